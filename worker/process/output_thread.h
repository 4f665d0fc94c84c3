// The worker's output thread, after the engine thread (work_inbox.h): the one owner of every job
// attempt's text (AttemptText). The engine's token ids become TOKENS with their text and stop
// strings, and its FINALs are completed with this attempt's count and the finish reason the text
// decided. A stop string found here ends the sequence at the engine's next step (StopSequence):
// the engine computes at most that one step for it in vain, and its ids are discarded. The
// thread never does a prompt's work, so the running sequences' tokens never wait behind one.
#pragma once

#include "worker/process/message_outbox.h"
#include "worker/process/work_inbox.h"

namespace flashq {

class OutputThread {
 public:
  OutputThread(OutputInbox& from_engine, WorkInbox& to_engine, MessageOutbox& outbox)
      : from_engine_(from_engine), to_engine_(to_engine), outbox_(outbox) {}

  // Writes the engine's output until EngineStopped.
  void run();

 private:
  void stream(AttemptTokens& step);
  void finish(AttemptFinal& final);

  OutputInbox& from_engine_;
  WorkInbox& to_engine_;
  MessageOutbox& outbox_;
};

}  // namespace flashq
