#include "worker/process/job_preparer.h"

#include <variant>

namespace flashq {

void prepare_job(AssignWork& work, const Tokenizer& tokenizer, const WorkerModel& served) {
  try {
    work.request = std::make_shared<JobRequest>(make_job_request(work.assign, tokenizer, served));
  } catch (...) {
    work.refused = std::current_exception();  // the engine thread answers it with the job's FINAL
  }
}

void JobPreparer::run() {
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
