// MODELS at the broker (docs/protocol.md, "Models"): what the connected workers serve, model by
// model, from their READY: the smallest context length, the newest worker's output formats, the
// workers and slots counted. Unit cases on the registry, then a real broker over loopback with
// the test playing the workers (READY with and without the model fields) and Client::models()
// asking.
#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "broker/broker.h"
#include "broker/model_catalog.h"
#include "client/flashq_client.h"
#include "shared/protocol/map_writer.h"
#include "tests/broker/wire_peer.h"

namespace flashq {
namespace {

using namespace std::chrono_literals;
using protocol::ModelInfo;
using protocol::ReasoningFormat;
using protocol::ToolCallFormat;

protocol::Ready ready(const std::string& id, const std::string& model, int64_t slots, int64_t context,
                      ToolCallFormat tools, ReasoningFormat reasoning) {
  return {.worker_id = id, .model = model, .slots = slots, .backend = "cpu", .max_model_len = context,
          .tool_call_format = tools, .reasoning_format = reasoning};
}

TEST(ServedModelsReply, NoWorkersNoModels) {
  EXPECT_EQ(served_models_reply(WorkerRegistry{}), protocol::ModelsReply{});
}

TEST(ServedModelsReply, OneEntryPerModelSortedWithWorkersAndSlotsCounted) {
  WorkerRegistry workers;
  const auto now = SteadyClock::now();
  workers.add("z1", ready("w-z1", "qwen", 2, 40960, ToolCallFormat::kHermes, ReasoningFormat::kThinkTags), now);
  workers.add("a1", ready("w-a1", "llama", 4, 131072, ToolCallFormat::kLlama3Json, ReasoningFormat::kNone), now);
  workers.add("m1", ready("w-m1", "qwen", 3, 40960, ToolCallFormat::kHermes, ReasoningFormat::kThinkTags), now);
  const protocol::ModelsReply reply = served_models_reply(workers);
  const std::vector<ModelInfo> expected = {
      {"llama", 131072, ToolCallFormat::kLlama3Json, ReasoningFormat::kNone, 1, 4},
      {"qwen", 40960, ToolCallFormat::kHermes, ReasoningFormat::kThinkTags, 2, 5},
  };
  EXPECT_EQ(reply.models, expected);
}

TEST(ServedModelsReply, TheSmallestContextAndTheNewestWorkersFormats) {
  WorkerRegistry workers;
  const auto now = SteadyClock::now();
  // Identities sort the other way round from registration, so order of registration is what counts.
  workers.add("c", ready("old", "qwen", 1, 32768, ToolCallFormat::kHermes, ReasoningFormat::kThinkTags), now);
  workers.add("b", ready("new", "qwen", 1, 40960, ToolCallFormat::kHermes, ReasoningFormat::kThinkInPrompt), now);
  protocol::ModelsReply reply = served_models_reply(workers);
  ASSERT_EQ(reply.models.size(), 1u);
  EXPECT_EQ(reply.models[0].max_model_len, 32768);
  EXPECT_EQ(reply.models[0].reasoning_format, ReasoningFormat::kThinkInPrompt);

  workers.add("a", ready("newest", "qwen", 1, 40960, ToolCallFormat::kNone, ReasoningFormat::kNone), now);
  reply = served_models_reply(workers);
  EXPECT_EQ(reply.models[0].tool_call_format, ToolCallFormat::kNone);
  EXPECT_EQ(reply.models[0].reasoning_format, ReasoningFormat::kNone);

  // "c" registers again (a restarted worker): it is now the newest.
  workers.remove("c");
  workers.add("c", ready("restarted", "qwen", 1, 40960, ToolCallFormat::kHermes, ReasoningFormat::kThinkTags), now);
  reply = served_models_reply(workers);
  EXPECT_EQ(reply.models[0].max_model_len, 40960) << "the 32768 worker is gone";
  EXPECT_EQ(reply.models[0].tool_call_format, ToolCallFormat::kHermes);
  EXPECT_EQ(reply.models[0].workers, 3);
}

TEST(ServedModelsReply, AWorkerThatDoesNotReportItsContextMakesItUnknown) {
  WorkerRegistry workers;
  const auto now = SteadyClock::now();
  workers.add("a", ready("a", "qwen", 1, 40960, ToolCallFormat::kHermes, ReasoningFormat::kThinkTags), now);
  workers.add("b", ready("b", "qwen", 1, 0, ToolCallFormat::kHermes, ReasoningFormat::kThinkTags), now);
  EXPECT_EQ(served_models_reply(workers).models.at(0).max_model_len, 0);
}

class ModelsReplyTest : public ::testing::Test {
 protected:
  ModelsReplyTest() {
    BrokerOptions options;
    options.frontend = options.backend = options.stream = "tcp://127.0.0.1:*";
    options.http.clear();
    options.heartbeat_ms = 5000;  // the played workers stay alive without beating
    options.drain_timeout_ms = 0;
    broker_ = std::make_unique<Broker>(context_, options);
    thread_ = std::thread([this] { broker_->run(stop_); });
    client_.connect(broker_->frontend_endpoint(), broker_->stream_endpoint());
  }
  ~ModelsReplyTest() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  zmq::socket_t worker(const protocol::WireMessage& ready_message) {
    zmq::socket_t socket = testing::connect_dealer(context_, broker_->backend_endpoint());
    const std::vector<std::string> frames = protocol::to_frames(ready_message);
    std::vector<zmq::const_buffer> buffers;
    for (const std::string& f : frames) buffers.push_back(zmq::buffer(f));
    zmq::send_multipart(socket, buffers);
    return socket;
  }

  // Client::models() until it lists `count` models (workers register on their own socket, so a
  // MODELS sent right after a READY may overtake it), at most 3 s.
  protocol::ModelsReply models_once(std::size_t count) {
    const auto until = std::chrono::steady_clock::now() + 3s;
    protocol::ModelsReply reply = client_.models(2000);
    while (reply.models.size() != count && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(20ms);
      reply = client_.models(2000);
    }
    return reply;
  }

  zmq::context_t context_;
  std::unique_ptr<Broker> broker_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Client client_;
};

TEST_F(ModelsReplyTest, ListsWhatTheConnectedWorkersServeWithTheirReadyFields) {
  EXPECT_EQ(client_.models(2000), protocol::ModelsReply{}) << "no worker yet";

  zmq::socket_t qwen_a =
      worker(protocol::to_wire(ready("qa", "qwen", 2, 40960, ToolCallFormat::kHermes, ReasoningFormat::kThinkTags)));
  zmq::socket_t llama = worker(
      protocol::to_wire(ready("la", "llama", 4, 131072, ToolCallFormat::kLlama3Json, ReasoningFormat::kNone)));
  // A worker that predates the model fields: its READY has none of them.
  const std::string old_ready = protocol::MapWriter()
                                    .string("worker_id", "old")
                                    .string("model", "legacy")
                                    .integer("slots", 1)
                                    .integer("block_size", 0)
                                    .string("backend", "cpu")
                                    .finish();
  zmq::socket_t legacy = worker({protocol::MessageType::kReady, old_ready});

  protocol::ModelsReply reply = models_once(3);
  std::vector<ModelInfo> expected = {
      {"legacy", 0, ToolCallFormat::kNone, ReasoningFormat::kNone, 1, 1},
      {"llama", 131072, ToolCallFormat::kLlama3Json, ReasoningFormat::kNone, 1, 4},
      {"qwen", 40960, ToolCallFormat::kHermes, ReasoningFormat::kThinkTags, 1, 2},
  };
  EXPECT_EQ(reply.models, expected);

  // A second qwen worker, newer, with a smaller context and the thinking-in-prompt template.
  zmq::socket_t qwen_b = worker(
      protocol::to_wire(ready("qb", "qwen", 3, 32768, ToolCallFormat::kHermes, ReasoningFormat::kThinkInPrompt)));
  expected[2] = {"qwen", 32768, ToolCallFormat::kHermes, ReasoningFormat::kThinkInPrompt, 2, 5};
  const auto until = std::chrono::steady_clock::now() + 3s;
  while ((reply = client_.models(2000)).models != expected && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(reply.models, expected);

  // The llama worker leaves: its model is no longer listed.
  testing::send_message(llama, protocol::Disconnect{});
  reply = models_once(2);
  ASSERT_EQ(reply.models.size(), 2u);
  EXPECT_EQ(reply.models[0].name, "legacy");
  EXPECT_EQ(reply.models[1].name, "qwen");
}

TEST_F(ModelsReplyTest, AModelsBodyThatIsNotAMapIsAProtocolError) {
  zmq::socket_t producer = testing::connect_dealer(context_, broker_->frontend_endpoint());
  const std::vector<std::string> frames =
      protocol::to_frames({protocol::MessageType::kModels, std::string("\x91\x01", 2)});
  std::vector<zmq::const_buffer> buffers;
  for (const std::string& f : frames) buffers.push_back(zmq::buffer(f));
  zmq::send_multipart(producer, buffers);
  std::optional<protocol::WireMessage> reply = testing::receive_message(producer, 2000ms);
  ASSERT_TRUE(reply) << "no answer";
  ASSERT_EQ(reply->type, protocol::MessageType::kError) << protocol::message_type_name(reply->type);
  const auto error = protocol::from_wire<protocol::ErrorReply>(*reply);
  EXPECT_EQ(error.code, "protocol");
  EXPECT_NE(error.message.find("MODELS"), std::string::npos) << error.message;
  // The broker keeps serving: the same producer's next MODELS is answered.
  testing::send_message(producer, protocol::Models{});
  reply = testing::receive_message(producer, 2000ms);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->type, protocol::MessageType::kModelsReply);
}

}  // namespace
}  // namespace flashq
