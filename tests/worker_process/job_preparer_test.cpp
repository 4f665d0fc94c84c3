// The worker's prepare thread (job_preparer.h): each ASSIGN reaches the engine thread prepared (its
// sequence, or why it cannot run), and everything reaches it in the order the link sent it, so a
// CANCEL never overtakes its ASSIGN.
#include "worker/process/job_preparer.h"

#include <gtest/gtest.h>

#include <thread>
#include <variant>

#include "shared/error.h"
#include "worker/process/attempt_text.h"
#include "tests/support/tiny_tokenizer_suite.h"

namespace flashq::testing {
namespace {

class JobPreparerTest : public TinyTokenizerSuite {};

AssignWork assign(const std::string& id, protocol::Prompt prompt, std::optional<std::string> model = std::nullopt) {
  AssignWork work;
  work.assign.job.id = id;
  work.assign.job.prompt = std::move(prompt);
  work.assign.job.max_tokens = 8;
  work.assign.job.model = std::move(model);
  return work;
}

// Everything the preparer passed on, once StopEngine came through.
std::vector<WorkItem> run_preparer(const Tokenizer& tokenizer, std::vector<WorkItem> items) {
  WorkInbox from_link, to_engine;
  JobPreparer preparer(tokenizer, {"m", false}, from_link, to_engine);
  std::thread text([&] { preparer.run(); });
  for (WorkItem& item : items) from_link.push(std::move(item));
  from_link.push(StopEngine{});
  text.join();
  return to_engine.take(/*wait=*/false);
}

TEST_F(JobPreparerTest, PassesEverythingOnInOrderWithEachAssignPrepared) {
  std::vector<WorkItem> items;
  items.emplace_back(assign("a", protocol::TokenIds{1, 2, 3}));
  items.emplace_back(CancelWork{"a"});
  items.emplace_back(LinkLost{1});
  items.emplace_back(assign("b", std::string("hello")));
  const std::vector<WorkItem> out = run_preparer(*tokenizer_, std::move(items));
  ASSERT_EQ(out.size(), 5u);
  const auto& a = std::get<AssignWork>(out[0]);
  ASSERT_NE(a.request, nullptr);
  ASSERT_NE(a.text, nullptr) << "the attempt's text, for the output thread";
  EXPECT_EQ(a.text->job_id, "a");
  EXPECT_FALSE(a.refused);
  EXPECT_EQ(a.request->sequence.generation.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(std::get<CancelWork>(out[1]).id, "a");
  EXPECT_EQ(std::get<LinkLost>(out[2]).link, 1u);
  const auto& b = std::get<AssignWork>(out[3]);
  ASSERT_NE(b.request, nullptr);
  EXPECT_EQ(b.request->sequence.generation.prompt_tokens, tokenizer_->encode_with_special_tokens("hello"));
  EXPECT_TRUE(std::holds_alternative<StopEngine>(out[4]));
}

TEST_F(JobPreparerTest, AnEmptyStopStringIsARefusalNamingIt) {
  AssignWork work = assign("s", protocol::TokenIds{1, 2});
  work.assign.job.stop = {""};
  prepare_job(work, *tokenizer_, {"m", false});
  EXPECT_EQ(work.request, nullptr);
  ASSERT_TRUE(work.refused);
  try {
    std::rethrow_exception(work.refused);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("stop"), std::string::npos) << e.what();
  }
}

TEST_F(JobPreparerTest, AJobItCannotPrepareCarriesItsErrorToTheEngineThread) {
  std::vector<WorkItem> items;
  items.emplace_back(assign("other", protocol::TokenIds{1}, "another-model"));
  const std::vector<WorkItem> out = run_preparer(*tokenizer_, std::move(items));
  ASSERT_EQ(out.size(), 2u);
  const auto& refused = std::get<AssignWork>(out[0]);
  EXPECT_EQ(refused.request, nullptr);
  EXPECT_EQ(refused.text, nullptr);
  ASSERT_TRUE(refused.refused);
  try {
    std::rethrow_exception(refused.refused);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("another-model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashq::testing
