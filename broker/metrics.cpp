#include "broker/metrics.h"

#include "broker/dispatcher.h"

namespace flashq {
namespace {

using prometheus::counter;
using prometheus::gauge;
using prometheus::line;

void labelled_counter(std::string& out, const std::string& name, const std::string& help, const std::string& label,
                      const std::map<std::string, uint64_t>& values) {
  line(out, "# HELP " + name + " " + help);
  line(out, "# TYPE " + name + " counter");
  for (const auto& [key, value] : values) line(out, name + "{" + label + "=\"" + key + "\"} " + std::to_string(value));
}

const std::vector<double> kRequestLatencyBuckets = {0.001, 0.005, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5,
                                                    10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680};

}  // namespace

BrokerMetrics::BrokerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
      inter_token_({0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5}),
      // vLLM's request latency buckets, with finer ones below 0.3 s for short jobs on idle workers.
      queue_time_(kRequestLatencyBuckets),
      e2e_latency_(kRequestLatencyBuckets) {
  // Every reason from the start, so that a rate over it never starts from a missing series.
  for (RoutingReason reason : kRoutingReasons) routed_[std::string(routing_reason_name(reason))] = 0;
}

void BrokerMetrics::job_admitted() {
  std::lock_guard lock(mutex_);
  ++admitted_;
}
void BrokerMetrics::job_rejected(const std::string& reason) {
  std::lock_guard lock(mutex_);
  ++rejected_[reason];
}
void BrokerMetrics::job_routed(const std::string& reason) {
  std::lock_guard lock(mutex_);
  ++routed_[reason];
}
void BrokerMetrics::job_handed_over() {
  std::lock_guard lock(mutex_);
  ++handovers_;
}
void BrokerMetrics::job_retried() {
  std::lock_guard lock(mutex_);
  ++retries_;
}
void BrokerMetrics::job_finished(const std::string& finish_reason) {
  std::lock_guard lock(mutex_);
  ++finished_[finish_reason];
}
void BrokerMetrics::token_event(int64_t count, bool first, double seconds) {
  std::lock_guard lock(mutex_);
  generation_tokens_ += static_cast<uint64_t>(count);
  if (count <= 0) return;
  // The first event's other tokens arrived with the first: they are part of no gap.
  if (first) {
    ttft_.observe(seconds);
  } else {
    inter_token_.observe(seconds / static_cast<double>(count), static_cast<uint64_t>(count));
  }
}
void BrokerMetrics::speculation(const protocol::StepSpeculation& spec) {
  std::lock_guard lock(mutex_);
  drafts_ += static_cast<uint64_t>(spec.drafts);
  draft_tokens_ += static_cast<uint64_t>(spec.draft_tokens);
  accepted_ += static_cast<uint64_t>(spec.accepted_tokens);
  if (accepted_per_pos_.size() < spec.accepted_per_pos.size()) accepted_per_pos_.resize(spec.accepted_per_pos.size(), 0);
  for (size_t i = 0; i < spec.accepted_per_pos.size(); ++i) accepted_per_pos_[i] += static_cast<uint64_t>(spec.accepted_per_pos[i]);
}
void BrokerMetrics::job_started(double queued_seconds) {
  std::lock_guard lock(mutex_);
  queue_time_.observe(queued_seconds);
}
void BrokerMetrics::job_ended(double seconds) {
  std::lock_guard lock(mutex_);
  e2e_latency_.observe(seconds);
}
void BrokerMetrics::set_gauges(BrokerGauges gauges) {
  std::lock_guard lock(mutex_);
  gauges_ = std::move(gauges);
}
bool BrokerMetrics::draining() const {
  std::lock_guard lock(mutex_);
  return gauges_.draining;
}
int64_t BrokerMetrics::workers() const {
  std::lock_guard lock(mutex_);
  return gauges_.workers;
}
bool BrokerMetrics::ready() const {
  std::lock_guard lock(mutex_);
  return gauges_.workers > 0 && !gauges_.draining && gauges_.redis_connected.value_or(true);
}

std::string BrokerMetrics::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  line(out, "# HELP flashq_queue_depth Jobs waiting for a worker, by priority.");
  line(out, "# TYPE flashq_queue_depth gauge");
  for (const auto& [priority, depth] : gauges_.queue_depth) {
    line(out, "flashq_queue_depth{priority=\"" + std::to_string(priority) + "\"} " + std::to_string(depth));
  }
  gauge(out, "flashq_queue_prompt_tokens", "Prompt tokens (estimated) held by queued jobs.", static_cast<double>(gauges_.queued_prompt_tokens));
  gauge(out, "flashq_jobs_running", "Jobs assigned to a worker.", static_cast<double>(gauges_.jobs_running));
  gauge(out, "flashq_workers", "Workers registered.", static_cast<double>(gauges_.workers));
  gauge(out, "flashq_worker_slots", "Slots advertised by all workers.", static_cast<double>(gauges_.worker_slots));
  gauge(out, "flashq_routing_sessions", "Sessions whose last worker the broker remembers (cache-aware routing).",
        static_cast<double>(gauges_.routing_sessions));
  gauge(out, "flashq_routing_prefix_blocks",
        "256-byte prompt prefix blocks whose last worker the broker remembers (cache-aware routing).",
        static_cast<double>(gauges_.routing_prefix_blocks));
  if (gauges_.redis_connected) {
    gauge(out, "flashq_redis_connected", "1 while the broker is connected to its Redis and set up there.",
          *gauges_.redis_connected ? 1.0 : 0.0);
  }
  counter(out, "flashq_jobs_admitted_total", "Jobs accepted into the queue.", admitted_);
  labelled_counter(out, "flashq_jobs_rejected_total", "Submissions refused, by reason.", "reason", rejected_);
  labelled_counter(out, "flashq_jobs_finished_total", "Jobs ended, by finish reason.", "finish_reason", finished_);
  labelled_counter(out, "flashq_routing_decisions_total",
                   "Assignments of jobs to workers, by why that worker: session, prefix, least_loaded, fallback.",
                   "reason", routed_);
  counter(out, "flashq_routing_handovers_total",
          "Jobs taken from flashq:jobs and handed to the broker owning their session (Redis only).", handovers_);
  counter(out, "flashq_job_retries_total", "Jobs re-queued as continuations after losing their worker.", retries_);
  counter(out, "flashq_generation_tokens_total", "Tokens streamed to clients (rate() of it is tokens/s).", generation_tokens_);
  counter(out, "flashq_spec_decode_num_drafts_total", "Drafts verified (one per job per verify pass that carried one).",
          drafts_);
  counter(out, "flashq_spec_decode_num_draft_tokens_total", "Tokens proposed by those drafts.", draft_tokens_);
  counter(out, "flashq_spec_decode_num_accepted_tokens_total",
          "Draft tokens the target accepted (acceptance rate: this / num_draft_tokens).", accepted_);
  line(out, "# HELP flashq_spec_decode_num_accepted_tokens_per_pos_total Drafts whose token at this position "
            "(0 = first drafted) was accepted.");
  line(out, "# TYPE flashq_spec_decode_num_accepted_tokens_per_pos_total counter");
  for (size_t i = 0; i < accepted_per_pos_.size(); ++i) {
    line(out, "flashq_spec_decode_num_accepted_tokens_per_pos_total{position=\"" + std::to_string(i) + "\"} " +
                  std::to_string(accepted_per_pos_[i]));
  }
  ttft_.render(out, "flashq_time_to_first_token_seconds", "From submission to the first streamed token.");
  inter_token_.render(out, "flashq_inter_token_latency_seconds",
                      "Per token after a job's first event: an event of k tokens is k observations of "
                      "(time since the job's previous event) / k.");
  queue_time_.render(out, "flashq_request_queue_time_seconds", "From submission to the job's first assignment to a worker.");
  e2e_latency_.render(out, "flashq_e2e_request_latency_seconds", "From submission to the job's final (any finish reason).");
  return out;
}

}  // namespace flashq
