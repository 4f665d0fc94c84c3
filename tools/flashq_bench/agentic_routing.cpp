#include "tools/flashq_bench/agentic_routing.h"

#include <iostream>
#include <map>
#include <thread>

#include "shared/error.h"
#include "shared/protocol/messages.h"
#include "tools/flashq_bench/bench_cluster.h"
#include "tools/flashq_bench/bench_peers.h"

namespace flashq {
namespace {

using namespace std::chrono_literals;
using namespace flashq::bench;
using Json = nlohmann::ordered_json;

constexpr const char* kLookupTokens = "flashq_worker_prefix_cache_lookup_tokens_total";
constexpr const char* kHitTokens = "flashq_worker_prefix_cache_hit_tokens_total";
// Without a message for this long, a round has stalled (a worker died, or a job was lost).
constexpr auto kSilence = std::chrono::seconds(300);

struct PrefixCounters {
  bool present = false;
  double lookup = 0, hit = 0;
};

PrefixCounters read_counters(const BenchCluster& cluster) {
  PrefixCounters c;
  bool lookup_present = false, hit_present = false;
  c.lookup = cluster.worker_metric_sum(kLookupTokens, &lookup_present);
  c.hit = cluster.worker_metric_sum(kHitTokens, &hit_present);
  c.present = lookup_present && hit_present;
  return c;
}

// What the producer counted while its jobs ran.
struct JobTotals {
  int64_t jobs = 0, prompt_tokens = 0, completion_tokens = 0;
  // Of later turns' prompts, the tokens the turn before had (its prompt and output): what a
  // prefix cache can hold; the rest (the tool result, the user message) is new.
  int64_t reusable_tokens = 0;
};

// Runs every conversation on from its current turn until it reaches turn `until` (exclusive),
// each turn submitted as soon as the conversation's previous one finished, so that the turns of
// different conversations meet the workers at different times. A finished turn's output always
// becomes part of the conversation (the turn it opens runs in a later call when it is `until`);
// `reusable`, per conversation, the tokens of its last turn's prompt and output.
JobTotals run_conversations(zmq::socket_t& producer, const std::string& prefix,
                            std::vector<AgenticConversation>& conversations, int64_t until, int64_t output_tokens,
                            std::vector<int64_t>& reusable) {
  JobTotals totals;
  std::map<std::string, size_t> index_of;
  std::vector<std::map<int64_t, std::vector<int32_t>>> events(conversations.size());
  size_t running = 0;
  auto submit = [&](size_t c) {
    protocol::Job job;
    job.id = prefix + "-c" + std::to_string(c) + "-t" + std::to_string(conversations[c].turn());
    job.prompt = conversations[c].prompt();
    job.max_tokens = output_tokens;
    job.spec = protocol::SpecMode::kOff;
    job.session = "conversation-" + std::to_string(c);
    job.stream = true;
    index_of[job.id] = c;
    send_message(producer, protocol::Submit{job});
  };
  auto start_turn = [&](size_t c) {
    if (conversations[c].turn() >= until) return;
    ++running;
    ++totals.jobs;
    totals.prompt_tokens += static_cast<int64_t>(conversations[c].prompt().size());
    totals.reusable_tokens += reusable[c];
    events[c].clear();
    submit(c);
  };
  for (size_t c = 0; c < conversations.size(); ++c) start_turn(c);
  while (running > 0) {
    std::optional<protocol::WireMessage> message =
        receive(producer, std::chrono::duration_cast<std::chrono::milliseconds>(kSilence));
    if (!message) throw Error(ErrorCode::kIo, "the cluster sent nothing for " + std::to_string(kSilence.count()) + " s");
    if (message->type == protocol::MessageType::kRejected) {
      const auto rejected = protocol::from_wire<protocol::Rejected>(*message);
      if (rejected.retry_after_ms <= 0 || !index_of.count(rejected.id)) {
        throw Error(ErrorCode::kIo, "the broker refused job " + rejected.id + ": " + rejected.reason);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(rejected.retry_after_ms));
      submit(index_of[rejected.id]);
    } else if (message->type == protocol::MessageType::kError) {
      const auto error = protocol::from_wire<protocol::ErrorReply>(*message);
      throw Error(ErrorCode::kIo, "the broker answered " + error.code + ": " + error.message);
    } else if (message->type == protocol::MessageType::kEvent) {
      const auto event = protocol::from_wire<protocol::Event>(*message);
      const auto at = index_of.find(event.id);
      if (at == index_of.end()) continue;
      const size_t c = at->second;
      events[c][event.seq] = event.token_ids;
      if (!event.final_result) continue;
      if (event.final_result->finish_reason == protocol::FinishReason::kError) {
        throw Error(ErrorCode::kIo, "job " + event.id + " failed: " + event.final_result->error.value_or(""));
      }
      index_of.erase(at);
      --running;
      totals.completion_tokens += event.final_result->usage.completion_tokens;
      std::vector<int32_t> reply;
      for (const auto& [seq, ids] : events[c]) reply.insert(reply.end(), ids.begin(), ids.end());
      reusable[c] = static_cast<int64_t>(conversations[c].prompt().size() + reply.size());
      conversations[c].add_turn(reply);
      start_turn(c);
    }
  }
  return totals;
}

Json measure_policy(const RoutingFigureOptions& o, const AgenticScript& script, const std::string& policy) {
  ClusterOptions cluster_options{.bin_dir = o.bin_dir,
                                 .log_dir = o.log_dir / policy,
                                 .broker_args = {"--routing", policy},
                                 .workers = o.workers,
                                 .worker_args = {"--model", o.model_dir}};
  cluster_options.worker_args.insert(cluster_options.worker_args.end(), o.worker_args.begin(), o.worker_args.end());
  std::cerr << "flashq-bench agentic: figure 3, --routing " << policy << std::endl;
  BenchCluster cluster(cluster_options);
  zmq::context_t context;
  zmq::socket_t producer = make_socket(context, zmq::socket_type::dealer, cluster.frontend());
  std::vector<AgenticConversation> conversations;
  for (int64_t c = 0; c < o.conversations; ++c) conversations.emplace_back(script, c);

  const std::string prefix = "agentic-" + policy + "-" + std::to_string(now_ns());
  // Every first turn, then the counters; then the later turns, each conversation at its own pace.
  const auto start = Clock::now();
  std::vector<int64_t> reusable(conversations.size(), 0);
  const JobTotals first = run_conversations(producer, prefix, conversations, 1, o.output_tokens, reusable);
  const PrefixCounters after_first = read_counters(cluster);
  const JobTotals later = run_conversations(producer, prefix, conversations, o.turns, o.output_tokens, reusable);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const PrefixCounters at_end = read_counters(cluster);
  const double lookup = at_end.lookup - after_first.lookup, hit = at_end.hit - after_first.hit;
  const int64_t jobs = first.jobs + later.jobs;
  const int64_t prompt_tokens = first.prompt_tokens + later.prompt_tokens;
  const int64_t completion_tokens = first.completion_tokens + later.completion_tokens;
  Json arm = {{"routing", policy},
              {"seconds", seconds},
              {"jobs", jobs},
              {"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"turns_per_s", static_cast<double>(jobs) / seconds},
              {"completion_tokens_per_s", static_cast<double>(completion_tokens) / seconds},
              {"prompt_tokens_per_s", static_cast<double>(prompt_tokens) / seconds},
              {"later_turn_prompt_tokens", later.prompt_tokens}};
  if (at_end.present && lookup > 0) {
    arm["later_turn_lookup_tokens"] = lookup;
    arm["later_turn_hit_tokens"] = hit;
    arm["later_turn_prefix_hit_rate"] = hit / lookup;
    arm["later_turn_reusable_tokens"] = later.reusable_tokens;
    arm["reusable_hit_rate"] = hit / static_cast<double>(later.reusable_tokens);
  } else {
    arm["later_turn_prefix_hit_rate"] = nullptr;
    arm["note"] = "the workers counted no prefix cache lookups (" + std::string(kLookupTokens) + ")";
  }
  return arm;
}

}  // namespace

Json measure_routing(const RoutingFigureOptions& o, const AgenticScript& script) {
  if (o.workers < 1 || o.conversations < 1 || o.turns < 2 || o.output_tokens < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--routing-workers, --routing-conversations and --output-tokens must be positive, --routing-turns "
                "at least 2");
  }
  Json figure = {{"model", o.model_dir},
                 {"workers", o.workers},
                 {"conversations", o.conversations},
                 {"turns", o.turns},
                 {"output_tokens", o.output_tokens},
                 {"worker_args", o.worker_args},
                 {"arms", Json::array()}};
  for (const std::string& policy : o.policies) figure["arms"].push_back(measure_policy(o, script, policy));
  const Json& first = figure["arms"][0];
  const Json& last = figure["arms"][figure["arms"].size() - 1];
  figure["throughput_ratio"] =
      first["completion_tokens_per_s"].get<double>() / last["completion_tokens_per_s"].get<double>();
  return figure;
}

}  // namespace flashq
