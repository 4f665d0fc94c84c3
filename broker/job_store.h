// Where jobs and their results are kept: one interface, two stores.
//  - InMemoryJobStore: the broker's own memory. A job is admitted into this broker's queue, an
//    event goes out as soon as it is published, and nothing outlives the process.
//  - RedisJobStore (broker/redis/): intake into a stream any broker may take jobs from, events
//    stored before they go out, finals acknowledged only once stored, claims of a dead broker's
//    jobs, and jobs run elsewhere relayed to this broker's producers and subscribers.
// The broker's core paths call the store at the same points whichever it is, and the store drives
// the core back through BrokerCore. Both run on the broker thread only.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "broker/job_record.h"
#include "shared/protocol/producer_messages.h"
#include "shared/protocol/wire.h"

namespace flashq {

// The broker's core paths, as a store drives them.
class BrokerCore {
 public:
  virtual ~BrokerCore() = default;
  // Admission into this broker's queue (ACCEPTED or REJECTED overloaded to the producer).
  virtual void admit(const std::string& producer, protocol::Job job) = 0;
  virtual void reply(const std::string& producer, const protocol::WireMessage& message) = 0;
  // An event the store holds (a previous owner's, or one of a job run elsewhere): numbered and
  // delivered without being stored again.
  virtual void relay(JobRecord& job, protocol::Event event) = 0;
  // An event published here, now stored: out to subscribers, the producer and replay.
  virtual void deliver(JobRecord& job, const protocol::Event& event) = 0;
  virtual void finish(JobRecord& job, protocol::FinalResult result) = 0;
  virtual void dispatch() = 0;
  virtual void cancel(JobRecord& job) = 0;
  // The job stops here, wherever it is (queue, worker, finished), because another broker took it.
  virtual void withdraw(JobRecord& job) = 0;
  // The store's connection came or went (gauges, /readyz).
  virtual void store_state_changed() = 0;
  // Other brokers' workers serve models too (a shared store knows which): each model ever known
  // to be served, with when it last was (now, for one served at present).
  virtual void models_served_elsewhere(
      const std::vector<std::pair<std::string, SteadyClock::time_point>>& last_served) = 0;
  virtual bool draining() const = 0;
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // A SUBMIT of a new job, past the deadline check, while not draining.
  virtual void submit(const std::string& producer, protocol::Job job) = 0;
  // An event of a job this broker runs, numbered: it reaches BrokerCore::deliver once stored.
  // A final also ends the job in the store (a durable one acknowledges the job's intake entry).
  virtual void store_event(JobRecord& job, protocol::Event event) = 0;
  // The job was assigned to a worker (its attempt-th attempt).
  virtual void job_started(const std::string& id, int64_t attempt) = 0;

  // Requests about a job this broker does not hold, or only relays: true when answered from the
  // store; false leaves the answer to the broker (from what it holds, else `not_found`).
  virtual bool answer_status(const std::string& producer, const protocol::Status& status) = 0;
  virtual bool answer_replay(const std::string& producer, const protocol::Replay& replay) = 0;
  virtual bool cancel_elsewhere(const std::string& producer, const std::string& id) = 0;
  // A subscriber came or left for the stream of job `id`.
  virtual void subscription_changed(const std::string& id, bool subscribed) = 0;

  // Once per turn of the poll loop, after the sockets are served.
  virtual void turn() = 0;
  // A socket the poll loop also waits on (-1: none), and how long it may wait at most.
  virtual int poll_fd() const = 0;
  virtual std::chrono::milliseconds poll_timeout() const = 0;
  // Queued jobs outlive this broker (another broker, or its restart, runs them): a drain only
  // waits for the running ones.
  virtual bool keeps_queued_jobs() const = 0;
  // Whether the store is reachable; none for a store that needs no connection.
  virtual std::optional<bool> connected() const = 0;
  // At shutdown: events and finals not yet stored get up to `timeout` to get there.
  virtual void flush(std::chrono::milliseconds timeout) = 0;
};

}  // namespace flashq
