// What the gateway hears about one job from a broker link. Called on the link's thread, so an
// implementation hands the work to its own executor and returns at once.
#pragma once

#include "shared/protocol/producer_messages.h"

namespace flashq::gateway {

class JobListener {
 public:
  virtual ~JobListener() = default;
  // SUBMIT answered ACCEPTED. (A watched job has no submit and hears none.)
  virtual void accepted() {}
  // SUBMIT answered REJECTED; nothing follows.
  virtual void rejected(const protocol::Rejected& reply) = 0;
  // The job's events from seq 0, in order and without duplicates, up to the final one.
  virtual void event(const protocol::Event& event) = 0;
  // The broker answered ERROR about the job (not_found, replay_unavailable, ...), or did not
  // answer in time, or the link is going away; nothing follows. `code` is a flashq error code
  // name or "unavailable" for a broker that is not there.
  virtual void failed(const protocol::ErrorReply& error) = 0;
};

}  // namespace flashq::gateway
