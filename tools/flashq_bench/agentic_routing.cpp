#include "tools/flashq_bench/agentic_routing.h"

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

struct TurnOutput {
  std::map<int64_t, std::vector<int32_t>> tokens_by_seq;
  bool done = false;
  int64_t completion_tokens = 0;
};

// One round: every conversation's current turn submitted at once; returns their outputs.
std::vector<std::vector<int32_t>> run_round(zmq::socket_t& producer, const std::string& prefix,
                                            std::vector<AgenticConversation>& conversations, int64_t output_tokens,
                                            int64_t& completion_tokens) {
  std::map<std::string, size_t> index_of;
  std::vector<TurnOutput> outputs(conversations.size());
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
  for (size_t c = 0; c < conversations.size(); ++c) submit(c);
  size_t finished = 0;
  while (finished < conversations.size()) {
    std::optional<protocol::WireMessage> message = receive(producer, std::chrono::duration_cast<std::chrono::milliseconds>(kSilence));
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
      auto at = index_of.find(event.id);
      if (at == index_of.end()) continue;
      TurnOutput& out = outputs[at->second];
      out.tokens_by_seq[event.seq] = event.token_ids;
      if (event.final_result && !out.done) {
        if (event.final_result->finish_reason == protocol::FinishReason::kError) {
          throw Error(ErrorCode::kIo, "job " + event.id + " failed: " + event.final_result->error.value_or(""));
        }
        out.done = true;
        completion_tokens += event.final_result->usage.completion_tokens;
        ++finished;
      }
    }
  }
  std::vector<std::vector<int32_t>> replies;
  for (const TurnOutput& out : outputs) {
    std::vector<int32_t> reply;
    for (const auto& [seq, ids] : out.tokens_by_seq) reply.insert(reply.end(), ids.begin(), ids.end());
    replies.push_back(std::move(reply));
  }
  return replies;
}

Json measure_policy(const RoutingFigureOptions& o, const AgenticScript& script, const std::string& policy) {
  ClusterOptions cluster_options{.bin_dir = o.bin_dir,
                                 .log_dir = o.log_dir / policy,
                                 .broker_args = {"--routing", policy},
                                 .workers = o.workers,
                                 .worker_args = {"--model", o.model_dir}};
  cluster_options.worker_args.insert(cluster_options.worker_args.end(), o.worker_args.begin(), o.worker_args.end());
  BenchCluster cluster(cluster_options);
  zmq::context_t context;
  zmq::socket_t producer = make_socket(context, zmq::socket_type::dealer, cluster.frontend());
  std::vector<AgenticConversation> conversations;
  for (int64_t c = 0; c < o.conversations; ++c) conversations.emplace_back(script, c);

  const std::string prefix = "agentic-" + policy + "-" + std::to_string(now_ns());
  int64_t prompt_tokens = 0, later_prompt_tokens = 0, completion_tokens = 0;
  PrefixCounters after_first;
  const auto start = Clock::now();
  for (int64_t turn = 0; turn < o.turns; ++turn) {
    for (const AgenticConversation& c : conversations) {
      prompt_tokens += static_cast<int64_t>(c.prompt().size());
      if (turn > 0) later_prompt_tokens += static_cast<int64_t>(c.prompt().size());
    }
    const std::vector<std::vector<int32_t>> replies =
        run_round(producer, prefix, conversations, o.output_tokens, completion_tokens);
    if (turn == 0) after_first = read_counters(cluster);
    if (turn + 1 < o.turns) {
      for (size_t c = 0; c < conversations.size(); ++c) conversations[c].add_turn(replies[c]);
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const PrefixCounters at_end = read_counters(cluster);
  const double lookup = at_end.lookup - after_first.lookup, hit = at_end.hit - after_first.hit;
  Json arm = {{"routing", policy},
              {"seconds", seconds},
              {"jobs", o.conversations * o.turns},
              {"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"turns_per_s", static_cast<double>(o.conversations * o.turns) / seconds},
              {"completion_tokens_per_s", static_cast<double>(completion_tokens) / seconds},
              {"prompt_tokens_per_s", static_cast<double>(prompt_tokens) / seconds},
              {"later_turn_prompt_tokens", later_prompt_tokens}};
  if (at_end.present && lookup > 0) {
    arm["later_turn_lookup_tokens"] = lookup;
    arm["later_turn_hit_tokens"] = hit;
    arm["later_turn_prefix_hit_rate"] = hit / lookup;
  } else {
    arm["later_turn_prefix_hit_rate"] = nullptr;
    arm["note"] = "the workers report no prefix cache counters (" + std::string(kHitTokens) + ")";
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
