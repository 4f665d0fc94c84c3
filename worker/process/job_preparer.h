// The worker's prepare thread, between the I/O thread and the engine thread (work_inbox.h): it
// turns each ASSIGN into the sequence the engine runs (the chat template rendered, the prompt
// encoded, the resume point and settings checked: make_job_request) and the attempt's text
// (AttemptText, which the output thread keeps), so that a long prompt or a heavy template never
// stalls the steps of the sequences already running. Every other item (CANCEL, a lost link, a
// drain, the stop) passes through unchanged and in order, so nothing overtakes the ASSIGN it
// follows.
#pragma once

#include "worker/process/job_request.h"
#include "worker/process/work_inbox.h"
#include "worker/text/tokenizer.h"

namespace flashq {

// Fills `work.request` and `work.text`, or `work.refused` with the error that says why the job
// cannot run.
void prepare_job(AssignWork& work, const Tokenizer& tokenizer, const WorkerModel& served);

class JobPreparer {
 public:
  JobPreparer(const Tokenizer& tokenizer, WorkerModel served, WorkInbox& from_link, WorkInbox& to_engine)
      : tokenizer_(tokenizer), served_(std::move(served)), from_link_(from_link), to_engine_(to_engine) {}

  // Prepares and passes work on until StopEngine has passed through.
  void run();

 private:
  const Tokenizer& tokenizer_;
  WorkerModel served_;
  WorkInbox& from_link_;
  WorkInbox& to_engine_;
};

}  // namespace flashq
