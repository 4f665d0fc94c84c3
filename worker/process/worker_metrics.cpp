#include "worker/process/worker_metrics.h"

namespace flashq {

using prometheus::counter;
using prometheus::gauge;

WorkerMetrics::WorkerMetrics()
    : step_time_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56}),
      batch_size_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512}),
      step_tokens_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}) {}

void WorkerMetrics::engine_step(double seconds, int64_t batch, int64_t tokens, int64_t jobs_running) {
  std::lock_guard lock(mutex_);
  ++steps_;
  tokens_ += static_cast<uint64_t>(tokens);
  jobs_running_ = jobs_running;
  step_time_.observe(seconds);
  batch_size_.observe(static_cast<double>(batch));
  step_tokens_.observe(static_cast<double>(tokens));
}

void WorkerMetrics::pass_seconds(double prefill, double draft, double verify, double other) {
  std::lock_guard lock(mutex_);
  prefill_seconds_ += prefill;
  draft_seconds_ += draft;
  verify_seconds_ += verify;
  other_seconds_ += other;
}

void WorkerMetrics::cache_pool(int64_t capacity_bytes, int64_t used_bytes) {
  std::lock_guard lock(mutex_);
  has_pool_ = true;
  pool_capacity_ = capacity_bytes;
  pool_used_ = used_bytes;
}

void WorkerMetrics::paged_cache(const PagedCacheStats& stats) {
  std::lock_guard lock(mutex_);
  paged_ = stats;
}

std::string WorkerMetrics::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  counter(out, "flashq_worker_engine_steps_total", "Engine steps that produced output for at least one job.", steps_);
  counter(out, "flashq_worker_generation_tokens_total", "Output tokens those steps committed.", tokens_);
  gauge(out, "flashq_worker_jobs_running", "Jobs decoding in the engine after its last step.", static_cast<double>(jobs_running_));
  if (has_pool_) {
    gauge(out, "flashq_worker_kv_cache_capacity_bytes", "The KV cache pool's size.", static_cast<double>(pool_capacity_));
    gauge(out, "flashq_worker_kv_cache_used_bytes", "KV cache pool bytes held by sequences after the last step.",
          static_cast<double>(pool_used_));
  }
  if (paged_) {
    const BlockPoolStats& b = paged_->blocks;
    counter(out, "flashq_worker_prefix_cache_lookup_tokens_total",
            "Prompt tokens looked up in the prefix cache at admission.", static_cast<uint64_t>(b.lookup_tokens));
    counter(out, "flashq_worker_prefix_cache_hit_tokens_total",
            "Of those, tokens found cached (whose keys and values were not computed again).",
            static_cast<uint64_t>(b.hit_tokens));
    counter(out, "flashq_worker_prefix_cache_draft_hit_tokens_total",
            "Of those, tokens whose drafter context came with them (not injected again).",
            static_cast<uint64_t>(paged_->draft_hit_tokens));
    const std::string blocks = "flashq_worker_kv_blocks";
    prometheus::line(out, "# HELP " + blocks +
                              " Paged KV cache blocks by state: used (held by running sequences), "
                              "cached (a registered prefix no sequence holds, evictable), free.");
    prometheus::line(out, "# TYPE " + blocks + " gauge");
    for (const auto& [state, count] :
         {std::pair<const char*, int64_t>{"used", b.used}, {"cached", b.cached}, {"free", b.free}}) {
      prometheus::line(out, blocks + "{state=\"" + state + "\"} " + prometheus::number(static_cast<double>(count)));
    }
    counter(out, "flashq_worker_kv_block_evictions_total", "Cached prefix blocks taken for new content.",
            static_cast<uint64_t>(b.evictions));
    counter(out, "flashq_worker_preemptions_total",
            "Sequences that gave their blocks back for lack of free ones and were recomputed later.",
            static_cast<uint64_t>(paged_->preemptions));
  }
  const std::string pass = "flashq_worker_engine_pass_seconds_total";
  prometheus::line(out, "# HELP " + pass + " Engine time by pass: prefill (prompts), draft (the drafter's passes), "
                        "verify (the target's decode passes), other (planning, acceptance, text).");
  prometheus::line(out, "# TYPE " + pass + " counter");
  for (const auto& [phase, seconds] : {std::pair<const char*, double>{"prefill", prefill_seconds_},
                                       {"draft", draft_seconds_},
                                       {"verify", verify_seconds_},
                                       {"other", other_seconds_}}) {
    prometheus::line(out, pass + "{phase=\"" + phase + "\"} " + prometheus::number(seconds));
  }
  step_time_.render(out, "flashq_worker_engine_step_seconds",
                    "Wall time of one engine step: every running sequence's draft, verify pass, accept and commit.");
  batch_size_.render(out, "flashq_worker_engine_step_batch_size", "Sequences one engine step decoded.");
  step_tokens_.render(out, "flashq_worker_engine_step_tokens", "Output tokens one engine step committed, all sequences.");
  return out;
}

}  // namespace flashq
