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

void RedisFollower::follow(const std::string& id) {
  awaited_.erase(id);  // the broker holds it now: relayed like any job it follows
  followed_.emplace(id, "0");
}

// Jobs accepted or followed here and run elsewhere: their result streams, read from where we
// are; and flashq:control, for cancel requests of jobs that run here.
void RedisFollower::relay(SteadyClock::time_point now) {
  if (relaying_ || (!relay_again_ && now - last_relay_ < kReadInterval)) return;
  relay_again_ = false;
  last_relay_ = now;
  std::vector<std::pair<std::string, std::string>> remote;  // job id, last result entry read
  for (const auto& [id, read_up_to] : followed_) {
    remote.emplace_back(id, read_up_to);
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
            for (const std::string& id : schema::cancelled_ids(entries)) outcomes_.push_back(CancelRequested{id});
            continue;
          }
          const std::string id = schema::job_of_out_key(key);
          auto followed = followed_.find(id);
          if (followed == followed_.end()) continue;
          EventsRelayed relayed{.id = id};
          for (const schema::Entry& entry : entries) {
            followed->second = entry.id;
            try {
              relayed.events.push_back(schema::event_of(entry));
            } catch (const Error& e) {
              spdlog::warn("job {}: unreadable result entry {}: {}", id, entry.id, e.what());
            }
          }
          if (!relayed.events.empty()) outcomes_.push_back(std::move(relayed));
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
  } else if (protocol::is_valid_id(id)) {
    if (awaited_.size() < kMaxAwaitedSubscriptions) awaited_.insert(id);
    ask_known(id);
  }
}

// Whether Redis knows a job that another broker may run (for a subscriber here). Until it does
// (no broker took it yet, or it is not submitted yet) its id stays awaited.
void RedisFollower::ask_known(const std::string& id) {
  pipeline_.add(
      schema::job_known(id),
      [this, id](const RedisReply& reply) {
        if (reply.is_error() || reply.integer != 1) return;
        awaited_.erase(id);
        outcomes_.push_back(JobKnown{id});
      },
      OnFailure::kDrop);
}

// Subscriptions to jobs Redis did not know yet are asked about again, a few times a second, until
// the job appears or its last subscriber leaves.
void RedisFollower::check_awaited(SteadyClock::time_point now) {
  if (awaited_.empty() || checking_awaited_ || now - last_await_check_ < kAwaitedCheckInterval) return;
  last_await_check_ = now;
  for (const std::string& id : awaited_) ask_known(id);
  // Replies come in order: this one ends the round, so a slow Redis never has two rounds queued.
  checking_awaited_ = true;
  pipeline_.add(schema::ping(), [this](const RedisReply&) { checking_awaited_ = false; }, OnFailure::kDrop);
}

}  // namespace flashq
