#include "broker/redis/redis_follower.h"

#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "broker/redis/redis_schema.h"
#include "shared/error.h"

namespace flashq {
namespace {

using OnFailure = RedisPipeline::OnFailure;
namespace schema = redis_schema;

}  // namespace

void RedisFollower::on_connect(RedisConnection& connection) {
  if (!control_from_.empty()) return;
  const std::vector<schema::Entry> entries = schema::entries_of(connection.command(schema::last_control_entry()));
  control_from_ = entries.empty() ? "0-0" : entries.front().id;
}

// Jobs accepted or followed here and run elsewhere: their result streams, read from where we
// are; and flashq:control, for cancel requests of jobs that run here.
void RedisFollower::relay(SteadyClock::time_point now) {
  if (relaying_ || (!relay_again_ && now - last_relay_ < kReadInterval)) return;
  relay_again_ = false;
  last_relay_ = now;
  std::vector<std::pair<std::string, std::string>> remote;  // job id, last result entry relayed
  for (const auto& [id, job] : jobs_.jobs) {
    if (job.phase != JobPhase::kRemote) continue;
    remote.emplace_back(id, job.relayed_up_to);
    if (remote.size() >= 512) break;
  }
  relaying_ = true;
  pipeline_.add(
      schema::read_control_and_results(control_from_, remote),
      [this](const RedisReply& reply) {
        relaying_ = false;
        if (reply.is_error()) return;
        for (const auto& [key, entries] : schema::streams_of(reply)) {
          relay_again_ = relay_again_ || !entries.empty();  // more may be on the way
          if (key == schema::kControl) {
            if (!entries.empty()) control_from_ = entries.back().id;
            for (const std::string& id : schema::cancelled_ids(entries)) {
              JobRecord* job = jobs_.find(id);
              if (job && job->phase != JobPhase::kRemote) core_.cancel(*job);
            }
            continue;
          }
          JobRecord* found = jobs_.find(schema::job_of_out_key(key));
          if (!found || found->phase != JobPhase::kRemote) continue;
          JobRecord& job = *found;
          for (const schema::Entry& entry : entries) {
            job.relayed_up_to = entry.id;
            schema::StoredEvent stored;
            try {
              stored = schema::event_of(entry);
            } catch (const Error& e) {
              spdlog::warn("job {}: unreadable result entry {}: {}", job.job.id, entry.id, e.what());
              continue;
            }
            if (stored.seq < job.next_seq) continue;
            job.next_seq = stored.seq;
            if (stored.final_result) {
              job.phase = JobPhase::kFinished;
              job.final_result = stored.final_result;
              core_.relay(job, protocol::Event{.id = job.job.id, .final_result = stored.final_result});
              jobs_.finished_order.push_back(job.job.id);
              break;
            }
            job.streamed.insert(job.streamed.end(), stored.token_ids.begin(), stored.token_ids.end());
            job.streamed_text_bytes += static_cast<int64_t>(stored.text.size());
            core_.relay(job, protocol::Event{.id = job.job.id, .token_ids = stored.token_ids, .text = stored.text});
          }
        }
      },
      OnFailure::kDrop);
}

// A subscriber's first subscription to a job this broker knows nothing of: the job may run on
// another broker (or be submitted there later), and its stream is relayed from there (from its
// start: the subscriber may be late). The last subscriber leaving ends the wait for a job that
// never came.
void RedisFollower::subscription_changed(const std::string& id, bool subscribed) {
  if (!subscribed) {
    awaited_.erase(id);
  } else if (protocol::is_valid_id(id) && !jobs_.contains(id)) {
    if (awaited_.size() < kMaxAwaitedSubscriptions) awaited_.insert(id);
    follow(id);
  }
}

// Relays the stream of a job that another broker runs (for a subscriber here) once Redis knows
// it. Until then (no broker took it yet, or it is not submitted yet) its id stays awaited.
void RedisFollower::follow(const std::string& id) {
  pipeline_.add(
      schema::job_known(id),
      [this, id](const RedisReply& reply) {
        const bool known_here = jobs_.contains(id);
        const bool known_to_redis = !reply.is_error() && reply.integer == 1;
        if (known_here || known_to_redis) awaited_.erase(id);
        if (known_here || !known_to_redis) return;
        JobRecord record;
        record.job.id = id;
        record.known_by_id_only = true;
        record.phase = JobPhase::kRemote;
        record.submitted_at = SteadyClock::now();
        jobs_.jobs.emplace(id, std::move(record));
      },
      OnFailure::kDrop);
}

// Subscriptions to jobs Redis did not know yet are asked about again, a few times a second, until
// the job appears or its last subscriber leaves.
void RedisFollower::check_awaited(SteadyClock::time_point now) {
  if (awaited_.empty() || checking_awaited_ || now - last_await_check_ < kAwaitedCheckInterval) return;
  last_await_check_ = now;
  for (auto it = awaited_.begin(); it != awaited_.end();) {
    if (jobs_.contains(*it)) {
      it = awaited_.erase(it);  // submitted here meanwhile: streamed like any job of ours
    } else {
      follow(*it++);
    }
  }
  // Replies come in order: this one ends the round, so a slow Redis never has two rounds queued.
  checking_awaited_ = true;
  pipeline_.add(schema::ping(), [this](const RedisReply&) { checking_awaited_ = false; }, OnFailure::kDrop);
}

}  // namespace flashq
