// Where jobs and their results are kept: one interface, two stores.
//  - InMemoryJobStore: the broker's own memory. A job is admitted into this broker's queue, an
//    event goes out as soon as it is published, and nothing outlives the process.
//  - RedisJobStore (broker/redis/): intake into a stream any broker may take jobs from, events
//    stored before they go out, finals acknowledged only once stored, claims of a dead broker's
//    jobs, and jobs run elsewhere followed for this broker's producers and subscribers.
// The store keeps the log; the broker decides. A store never calls into the broker and never
// reads its tables: its calls return what happened, now or (for writes whose replies come later)
// among the outcomes of collect(), and the broker applies them (store_outcome.h). Both run on the
// broker thread only.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "broker/store_outcome.h"
#include "shared/protocol/producer_messages.h"

namespace flashq {

class JobStore {
 public:
  virtual ~JobStore() = default;

  // A SUBMIT of a new job, past the broker's checks: answered now (kAdmit: nothing to write;
  // kRefused: the store is unreachable), or later among the outcomes.
  virtual std::optional<IntakeAnswer> submit(const std::string& producer, protocol::Job job) = 0;
  // An event of a job this broker runs, numbered. Returned when it is kept already; else it comes
  // back as EventsKept once stored (or OwnershipLost). A final also ends the job in the store (a
  // durable one acknowledges its intake entry, and files it as dead with a `dead_reason`).
  virtual std::optional<protocol::Event> keep_event(protocol::Event event, const std::string& dead_reason) = 0;
  // The job was assigned to a worker (its attempt-th attempt).
  virtual void job_started(const std::string& id, int64_t attempt) = 0;
  // A TakenJob the broker does not run (its queue is full, or it runs that id already): its entry
  // is no longer kept claimed, so that this broker or another takes it later.
  virtual void leave_pending(const std::string& id, const std::string& entry) = 0;
  // Reads the events a previous owner stored of a taken job, up to `next_seq`: a CaughtUp follows.
  virtual void catch_up(const std::string& id, int64_t next_seq) = 0;
  // Jobs this broker holds without running them (kRemote): their result streams are read and come
  // back as EventsRelayed until unfollowed.
  virtual void follow(const std::string& id) = 0;
  virtual void unfollow(const std::string& id) = 0;

  // Requests about a job this broker does not hold, or only relays: none leaves the answer to the
  // broker (from what it holds, else `not_found`).
  virtual std::optional<protocol::StatusReply> status(const std::string& id) = 0;
  virtual StoredReplay replay(const protocol::Replay& replay) = 0;
  virtual std::optional<RemoteCancel> cancel_elsewhere(const std::string& id) = 0;
  // A subscriber came or left for the stream of job `id`.
  virtual void subscription_changed(const std::string& id, bool subscribed) = 0;

  // Once per turn of the poll loop, after the sockets are served: what the replies that came in
  // say happened, in their order...
  virtual StoreOutcomes collect() = 0;
  // What replies handled meanwhile said, without reading more: after a request answered at once
  // (status, replay, cancel_elsewhere), which first waits for the replies outstanding.
  virtual StoreOutcomes reported() = 0;
  // ... and, once the broker applied them, this turn's requests go out.
  virtual void turn(const StoreTurn& broker) = 0;
  // A socket the poll loop also waits on (-1: none), and how long it may wait at most.
  virtual int poll_fd() const = 0;
  virtual std::chrono::milliseconds poll_timeout() const = 0;
  // Queued jobs outlive this broker (another broker, or its restart, runs them): a drain only
  // waits for the running ones. Such a store reads its intake by what turn() is told.
  virtual bool keeps_queued_jobs() const = 0;
  // Whether the store is reachable; none for a store that needs no connection.
  virtual std::optional<bool> connected() const = 0;
  // At shutdown: events and finals not yet stored get up to `timeout` to get there; what their
  // replies said comes back.
  virtual StoreOutcomes flush(std::chrono::milliseconds timeout) = 0;
};

}  // namespace flashq
