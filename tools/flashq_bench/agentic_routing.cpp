#include "tools/flashq_bench/agentic_routing.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <random>
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

// A later turn's tool call takes a seeded time in [0, 2 * tool_ms]: in that time other turns end
// and start, so that a conversation's next turn meets the workers under another load than its
// last one did (with none, the worker that just finished a turn is the least loaded when the
// next one arrives, and least-loaded routing would keep conversations by accident).
std::chrono::milliseconds tool_time(uint64_t seed, size_t conversation, int64_t turn, int64_t tool_ms) {
  std::mt19937_64 random(seed * 1000003 + conversation * 7919 + static_cast<uint64_t>(turn));
  return std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(0, 2 * tool_ms)(random));
}

// Runs every conversation on from its current turn until it reaches turn `until` (exclusive):
// first turns submitted at once, each later one after its tool time from the end of the turn
// before (or from the call, for the first turn of the call). A finished turn's output always
// becomes part of the conversation (the turn it opens runs in a later call when it is `until`);
// `reusable`, per conversation, the tokens of its last turn's prompt and output.
JobTotals run_conversations(zmq::socket_t& producer, const std::string& prefix,
                            std::vector<AgenticConversation>& conversations, int64_t until,
                            const RoutingFigureOptions& o, std::vector<int64_t>& reusable) {
  JobTotals totals;
  std::map<std::string, size_t> index_of;
  std::vector<std::map<int64_t, std::vector<int32_t>>> events(conversations.size());
  std::multimap<Clock::time_point, size_t> due;  // turns waiting for their tool call
  size_t running = 0;
  auto submit = [&](size_t c) {
    protocol::Job job;
    job.id = prefix + "-c" + std::to_string(c) + "-t" + std::to_string(conversations[c].turn());
    job.prompt = conversations[c].prompt();
    job.max_tokens = o.output_tokens;
    job.spec = protocol::SpecMode::kOff;
    job.session = "conversation-" + std::to_string(c);
    job.stream = true;
    index_of[job.id] = c;
    send_message(producer, protocol::Submit{job});
  };
  auto start_turn = [&](size_t c) {
    ++running;
    ++totals.jobs;
    totals.prompt_tokens += static_cast<int64_t>(conversations[c].prompt().size());
    totals.reusable_tokens += reusable[c];
    events[c].clear();
    submit(c);
  };
  auto schedule = [&](size_t c) {
    const int64_t turn = conversations[c].turn();
    if (turn >= until) return;
    due.emplace(Clock::now() + (turn == 0 ? std::chrono::milliseconds(0) : tool_time(o.seed, c, turn, o.tool_ms)), c);
  };
  for (size_t c = 0; c < conversations.size(); ++c) schedule(c);
  auto last_message = Clock::now();
  while (running > 0 || !due.empty()) {
    while (!due.empty() && due.begin()->first <= Clock::now()) {
      start_turn(due.begin()->second);
      due.erase(due.begin());
    }
    auto wait = std::chrono::milliseconds(100);
    if (!due.empty()) {
      wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(due.begin()->first - Clock::now()));
    }
    std::optional<protocol::WireMessage> message = receive(producer, std::max(wait, std::chrono::milliseconds(1)));
    if (!message) {
      if (running > 0 && Clock::now() - last_message > kSilence) {
        throw Error(ErrorCode::kIo, "the cluster sent nothing for " + std::to_string(kSilence.count()) + " s");
      }
      continue;
    }
    last_message = Clock::now();
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
      schedule(c);
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
  if (!o.load_gap.empty())
    cluster_options.broker_args.insert(cluster_options.broker_args.end(), {"--routing-load-gap", o.load_gap});
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
  const JobTotals first = run_conversations(producer, prefix, conversations, 1, o, reusable);
  const PrefixCounters after_first = read_counters(cluster);
  const JobTotals later = run_conversations(producer, prefix, conversations, o.turns, o, reusable);
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
  if (o.workers < 1 || o.conversations < 1 || o.turns < 2 || o.output_tokens < 1 || o.tool_ms < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--routing-workers, --routing-conversations and --output-tokens must be positive, --routing-turns "
                "at least 2, --tool-ms not negative");
  }
  Json figure = {{"model", o.model_dir},
                 {"workers", o.workers},
                 {"conversations", o.conversations},
                 {"turns", o.turns},
                 {"output_tokens", o.output_tokens},
                 {"tool_ms", o.tool_ms},
                 {"worker_args", o.worker_args},
                 {"routing_load_gap", o.load_gap.empty() ? Json("broker default") : Json(o.load_gap)},
                 {"arms", Json::array()}};
  for (const std::string& policy : o.policies) figure["arms"].push_back(measure_policy(o, script, policy));
  const Json& first = figure["arms"][0];
  const Json& last = figure["arms"][figure["arms"].size() - 1];
  figure["throughput_ratio"] =
      first["completion_tokens_per_s"].get<double>() / last["completion_tokens_per_s"].get<double>();
  return figure;
}

}  // namespace flashq
