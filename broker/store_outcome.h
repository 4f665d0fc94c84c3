// What a job store reports back to the broker: the outcome of a write or a read it made, in the
// order its replies came. The store decides nothing about admission, dispatch or the broker's
// records; the broker applies each outcome (Broker::apply) and decides.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "shared/protocol/final_result.h"
#include "shared/protocol/job.h"
#include "shared/protocol/token_logprobs.h"
#include "shared/protocol/producer_messages.h"

namespace flashq {

using SteadyClock = std::chrono::steady_clock;

// A SUBMIT, answered by the store.
struct IntakeAnswer {
  enum class Kind {
    kAdmit,     // nothing durable to write: the broker admits the job into its own queue
    kStored,    // written to the shared intake: ACCEPTED, run by whichever broker takes it
    kFinished,  // the id finished already: ACCEPTED and its final again
    kRefused,   // not stored (or not on enough replicas): REJECTED unavailable, retry later
  };
  Kind kind = Kind::kAdmit;
  std::string producer;
  protocol::Job job;
  bool first_time = false;                            // kStored: a new job, not a resubmission
  std::optional<protocol::FinalResult> final_result;  // kFinished, when readable
};

// An entry of the shared intake this broker took to run (its own, one handed or claimed to it).
// Times are on the broker's clock, converted from what the store holds, so that figures and the
// deadline count from the job's first submission, whichever broker that was.
struct TakenJob {
  protocol::Job job;
  std::string entry;  // the entry's id: given back with JobStore::leave_pending
  SteadyClock::time_point submitted_at;
  SteadyClock::time_point deadline_at;
  std::optional<SteadyClock::time_point> first_assigned_at;
  std::optional<SteadyClock::time_point> first_token_at;
  int64_t attempt = 0;     // attempts any broker started
  int64_t next_seq = 0;    // events in the job's result stream already (a previous owner's)
  int64_t deliveries = 0;  // how often the entry was delivered (its brokers died)
  bool cancel_requested = false;
};

// One event of a job's result stream as the store holds it.
struct StoredEvent {
  int64_t seq = 0;
  std::vector<int32_t> token_ids;
  std::string text;
  std::optional<protocol::FinalResult> final_result;
  std::vector<protocol::OutputLogprobs> logprobs;  // one per token id, when the job asked
};

// The stream a previous owner wrote of a taken job, read up to `next_seq` (JobStore::catch_up).
struct CaughtUp {
  std::string id;
  int64_t next_seq = 0;
  bool read = false;                // false: the stream could not be read now
  std::vector<StoredEvent> events;  // in seq order; those before an unreadable entry
};

// Events (or a final) of a job this broker runs, now kept: they may go out.
struct EventsKept {
  std::string id;
  std::vector<protocol::Event> events;
};

// Another broker took over a job this broker ran (this one was silent too long): it stops here.
struct OwnershipLost {
  std::string id;
};

// Events of a job followed here and run elsewhere, in the order of its result stream.
struct EventsRelayed {
  std::string id;
  std::vector<StoredEvent> events;
};

// A CANCEL made at another broker, for a job that may run here.
struct CancelRequested {
  std::string id;
};

// A job asked about by id (JobStore::follow_when_known) is known to the store.
struct JobKnown {
  std::string id;
};

// The models served by any broker sharing the store: each model ever known to be served, with when
// it last was (now, for one served at present).
struct ModelsServed {
  std::vector<std::pair<std::string, SteadyClock::time_point>> last_served;
};

// An intake entry that is not a job: filed as dead, counted as rejected for `reason`.
struct EntryRefused {
  std::string reason;
};

// A job of a session another live broker owns, handed to that broker.
struct SessionHandedOver {};

using StoreOutcome = std::variant<IntakeAnswer, TakenJob, CaughtUp, EventsKept, OwnershipLost, EventsRelayed,
                                  CancelRequested, JobKnown, ModelsServed, EntryRefused, SessionHandedOver>;
using StoreOutcomes = std::vector<StoreOutcome>;

// CANCEL of a job this broker does not run, as the store answered it.
struct RemoteCancel {
  enum class Kind { kRequested, kFinished, kNotFound, kUnavailable } kind = Kind::kRequested;
  std::string error;  // kUnavailable
};

// REPLAY of a job's stream from the store: the events it read, and whether that answers it (an
// unreadable entry leaves the rest of the answer to the broker).
struct StoredReplay {
  std::vector<protocol::Event> events;
  bool answered = false;
};

// What the store's turn needs to know of the broker: how much work to take, what to announce.
struct StoreTurn {
  bool draining = false;
  int64_t workers = 0;
  int64_t free_slots = 0;        // over every worker
  int64_t queued = 0;            // jobs in this broker's queue
  std::set<std::string> models;  // served by this broker's workers (none while draining)
};

}  // namespace flashq
