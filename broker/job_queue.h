// The broker's bounded priority queue of jobs waiting for a worker. Lower priority values go
// first, FIFO within a level; continuations of jobs whose worker died go to the front of their
// level. Bounded by the number of jobs and by the prompt tokens they hold, so a burst of huge
// prompts cannot exhaust memory: over either bound, admission is refused with a retry hint.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "shared/protocol/job.h"

namespace flashq {

// Roughly 4 bytes of text per token: the queue's bound on prompt tokens before tokenizing.
int64_t estimate_prompt_tokens(const protocol::Job& job);

struct QueueLimits {
  int64_t max_jobs = 10000;
  int64_t max_prompt_tokens = 4'000'000;
};

class JobQueue {
 public:
  explicit JobQueue(QueueLimits limits) : limits_(limits) {}

  // False when admitting the job would exceed a limit (the caller rejects it as overloaded).
  bool push_back(const std::string& job_id, int64_t priority, int64_t prompt_tokens);
  // Continuations are never refused: they were admitted once already.
  void push_front(const std::string& job_id, int64_t priority, int64_t prompt_tokens);
  // The next job to dispatch, removed from the queue.
  std::optional<std::string> pop();
  // The first job in dispatch order for which `can_run` holds, removed from the queue.
  template <typename Predicate>
  std::optional<std::string> pop_first(Predicate can_run) {
    for (const auto& [priority, ids] : levels_) {
      for (const std::string& id : ids) {
        if (!can_run(id)) continue;
        std::string found = id;
        remove(found);
        return found;
      }
    }
    return std::nullopt;
  }
  // Removes a queued job (cancel, deadline); false when it is not queued.
  bool remove(const std::string& job_id);

  bool empty() const { return jobs_ == 0; }
  int64_t size() const { return jobs_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t size_at(int64_t priority) const;
  const std::map<int64_t, std::deque<std::string>>& levels() const { return levels_; }

 private:
  struct Entry {
    int64_t priority;
    int64_t prompt_tokens;
  };
  QueueLimits limits_;
  std::map<int64_t, std::deque<std::string>> levels_;  // priority -> job ids in order
  std::map<std::string, Entry> entries_;
  int64_t jobs_ = 0;
  int64_t prompt_tokens_ = 0;
};

}  // namespace flashq
