#include "worker/process/job_preparer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <variant>

#include "worker/process/attempt_text.h"

namespace flashq {
namespace {

constexpr int kPrepareThreadNice = 10;

}  // namespace

void prepare_job(AssignWork& work, const Tokenizer& tokenizer, const WorkerModel& served) {
  try {
    work.request = std::make_shared<JobRequest>(make_job_request(work.assign, tokenizer, served));
    work.text = std::make_shared<AttemptText>(tokenizer, work.assign, work.link);
  } catch (...) {
    work.request.reset();
    work.refused = std::current_exception();  // the engine thread answers it with the job's FINAL
  }
}

void JobPreparer::run() {
  // Below the engine's threads: where they share cores (the CPU backend), a long prompt's text
  // work takes the cycles the engine leaves rather than slowing the running sequences' steps.
  // Nice applies per thread on Linux; failing to lower it changes nothing else.
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kPrepareThreadNice);
  while (true) {
    for (WorkItem& item : from_link_.take(/*wait=*/true)) {
      if (auto* assign = std::get_if<AssignWork>(&item)) prepare_job(*assign, tokenizer_, served_);
      const bool stop = std::holds_alternative<StopEngine>(item);
      to_engine_.push(std::move(item));
      if (stop) return;
    }
  }
}

}  // namespace flashq
