// The broker's side of its job store (job_store.h): it applies what the store reports
// (store_outcome.h), in the order the store's replies came, and it alone decides what follows:
// an entry taken is run here, finished or left pending; a previous owner's stream is caught up;
// kept events go out; a job another broker took over is relayed from then on.
#include <type_traits>
#include <variant>

#include "broker/broker.h"

namespace flashq {

using protocol::FinishReason;

void Broker::apply(StoreOutcomes outcomes) {
  for (StoreOutcome& outcome : outcomes) {
    std::visit(
        [this](auto&& happened) {
          using T = std::decay_t<decltype(happened)>;
          if constexpr (std::is_same_v<T, IntakeAnswer>) {
            on_intake(std::move(happened));
          } else if constexpr (std::is_same_v<T, TakenJob>) {
            on_taken(std::move(happened));
          } else if constexpr (std::is_same_v<T, CaughtUp>) {
            on_caught_up(happened);
          } else if constexpr (std::is_same_v<T, EventsKept>) {
            on_events_kept(happened);
          } else if constexpr (std::is_same_v<T, OwnershipLost>) {
            on_ownership_lost(happened);
          } else if constexpr (std::is_same_v<T, EventsRelayed>) {
            on_events_relayed(happened);
          } else if constexpr (std::is_same_v<T, CancelRequested>) {
            JobRecord* job = jobs_.find(happened.id);
            if (job && job->phase != JobPhase::kRemote) cancel(*job);
          } else if constexpr (std::is_same_v<T, JobKnown>) {
            on_job_known(happened);
          } else if constexpr (std::is_same_v<T, ModelsServed>) {
            models_.note_served_elsewhere(happened.last_served, SteadyClock::now());
          } else if constexpr (std::is_same_v<T, EntryRefused>) {
            metrics_.job_rejected(happened.reason);
          } else {
            static_assert(std::is_same_v<T, SessionHandedOver>);
            metrics_.job_handed_over();
          }
        },
        outcome);
  }
}

// An entry this broker took: run here unless it runs here already, was cancelled while it waited
// in the store, or was delivered too often (its brokers died running it).
void Broker::on_taken(TakenJob taken) {
  const std::string id = taken.job.id;
  auto it = jobs_.jobs.find(id);
  if (it != jobs_.jobs.end() && it->second.phase != JobPhase::kRemote) {  // ours already
    store_->leave_pending(id, taken.entry);
    return;
  }
  if (it == jobs_.jobs.end()) {
    JobRecord record;
    record.phase = JobPhase::kRemote;  // until run here below
    it = jobs_.jobs.emplace(id, std::move(record)).first;
  }
  JobRecord& record = it->second;
  store_->unfollow(id);  // run here from now on (or finished here)
  const auto now = SteadyClock::now();
  record.submitted_at = taken.submitted_at;
  if (taken.first_assigned_at && !record.first_assigned_at) record.first_assigned_at = taken.first_assigned_at;
  if (taken.first_token_at && !record.first_token_at) {
    record.first_token_at = taken.first_token_at;
    record.last_token_at = now;  // the gap across the takeover is not one inter-token interval
  }
  record.deadline_at = taken.deadline_at;
  record.prompt_tokens_estimate = estimate_prompt_tokens(taken.job);
  record.job = std::move(taken.job);
  record.known_by_id_only = false;
  record.attempt = std::max(record.attempt, taken.attempt);
  if (taken.cancel_requested) {  // cancelled while it waited in the store
    record.next_seq = std::max(record.next_seq, taken.next_seq);
    finish(record, final_with(FinishReason::kCancelled));
    return;
  }
  if (taken.deliveries > options_.redis.max_deliveries) {
    record.dead_reason = "delivered " + std::to_string(taken.deliveries) + " times";
    record.next_seq = std::max(record.next_seq, taken.next_seq);
    finish(record, final_with(FinishReason::kError, "the job was delivered " + std::to_string(taken.deliveries) +
                                                        " times without finishing (its brokers died)"));
    return;
  }
  record.phase = JobPhase::kQueued;
  if (taken.next_seq > record.next_seq) {
    store_->catch_up(id, taken.next_seq);  // not in the queue until its stream is caught up
    return;
  }
  const bool continuation = !record.streamed.empty();
  if (continuation) {
    queue_.push_front(id, record.job.priority,
                      record.prompt_tokens_estimate + static_cast<int64_t>(record.streamed.size()));
  } else if (!queue_.push_back(id, record.job.priority, record.prompt_tokens_estimate)) {
    // Full: left pending; another broker (or this one) claims it later.
    store_->leave_pending(id, taken.entry);
    hold_remote(record);
    return;
  }
  dispatch();
}

// A previous owner streamed part of the job: its tokens are the continuation's prefix, and the
// events this broker has not published yet are published now.
void Broker::on_caught_up(const CaughtUp& caught) {
  JobRecord* found = jobs_.find(caught.id);
  if (!found || found->phase != JobPhase::kQueued) return;
  JobRecord& job = *found;
  if (!caught.read) {
    hold_remote(job);  // left pending; taken again after a reconnect
    return;
  }
  for (const StoredEvent& stored : caught.events) {
    if (stored.final_result || stored.seq < job.next_seq || stored.seq >= caught.next_seq) continue;
    job.next_seq = stored.seq;
    job.streamed.insert(job.streamed.end(), stored.token_ids.begin(), stored.token_ids.end());
    job.streamed_text_bytes += static_cast<int64_t>(stored.text.size());
    relay(job, protocol::Event{.id = caught.id, .token_ids = stored.token_ids, .text = stored.text,
                               .logprobs = stored.logprobs});
  }
  job.next_seq = std::max(job.next_seq, caught.next_seq);
  queue_.push_front(caught.id, job.job.priority,
                    job.prompt_tokens_estimate + static_cast<int64_t>(job.streamed.size()));
  dispatch();
}

void Broker::on_events_kept(const EventsKept& kept) {
  JobRecord* job = jobs_.find(kept.id);
  if (!job) return;
  for (const protocol::Event& event : kept.events) deliver(*job, event);
}

// Another broker took the job (this one was silent too long): it stops here and is relayed
// instead, from where the store holds its stream (what our subscribers have seen).
void Broker::on_ownership_lost(const OwnershipLost& lost) {
  JobRecord* found = jobs_.find(lost.id);
  if (!found) return;
  JobRecord& job = *found;
  withdraw(job);
  job.next_seq = job.stored_next_seq;
  job.streamed.resize(job.stored_tokens);
  job.streamed_text_bytes = job.stored_text_bytes;
  hold_remote(job);
  // A job withdrawn from a worker leaves its slot free: the queue moves on now, not at the next
  // FINAL (a worker left idle with jobs queued would wait for traffic that may never come).
  dispatch();
}

void Broker::on_events_relayed(const EventsRelayed& relayed) {
  JobRecord* found = jobs_.find(relayed.id);
  if (!found || found->phase != JobPhase::kRemote) return;
  JobRecord& job = *found;
  for (const StoredEvent& stored : relayed.events) {
    if (stored.seq < job.next_seq) continue;
    job.next_seq = stored.seq;
    if (stored.final_result) {
      job.phase = JobPhase::kFinished;
      job.final_result = stored.final_result;
      store_->unfollow(job.job.id);
      relay(job, protocol::Event{.id = job.job.id, .final_result = stored.final_result});
      jobs_.finished_order.push_back(job.job.id);
      break;
    }
    job.streamed.insert(job.streamed.end(), stored.token_ids.begin(), stored.token_ids.end());
    job.streamed_text_bytes += static_cast<int64_t>(stored.text.size());
    relay(job, protocol::Event{.id = job.job.id, .token_ids = stored.token_ids, .text = stored.text,
                               .logprobs = stored.logprobs});
  }
}

// A job followed for a subscriber here (or a CANCEL sent on) that the store knows: relayed by its
// id alone, its fields staying in the store (which answers STATUS for it).
void Broker::on_job_known(const JobKnown& known) {
  if (jobs_.contains(known.id)) return;
  JobRecord record;
  record.job.id = known.id;
  record.known_by_id_only = true;
  record.submitted_at = SteadyClock::now();
  hold_remote(jobs_.jobs.emplace(known.id, std::move(record)).first->second);
}

void Broker::hold_remote(JobRecord& job) {
  job.phase = JobPhase::kRemote;
  store_->follow(job.job.id);
}

StoreTurn Broker::store_turn() const {
  StoreTurn turn{.draining = draining_,
                 .workers = static_cast<int64_t>(workers_.all().size()),
                 .queued = static_cast<int64_t>(queue_.size())};
  for (const auto& [identity, worker] : workers_.all()) {
    turn.free_slots += std::max<int64_t>(0, worker.free_slots());
    if (!draining_) turn.models.insert(worker.ready.model);
  }
  return turn;
}

void Broker::apply_reported() {
  apply(store_->reported());
  note_store_state();
}

void Broker::note_store_state() {
  if (store_->connected() != store_connected_) update_gauges();
}

}  // namespace flashq
