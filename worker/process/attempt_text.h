// One job attempt's output as its client sees it, kept by the worker's output thread (output_thread.h):
// the token ids the engine hands back become TOKENS with their text, a stop string ends the output
// (the ids the engine computed past it are discarded: never sent, never counted), and the FINAL
// gets this attempt's token count and the finish reason the text decided.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "shared/protocol/worker_messages.h"
#include "worker/process/work_inbox.h"
#include "worker/text/text_stream.h"
#include "worker/text/tokenizer.h"

namespace flashq {

struct AttemptText {
  // A continuation's text carries on from the resume tokens (TextStream). kInvalidArgument for an
  // empty stop string.
  AttemptText(const Tokenizer& tokenizer, const protocol::Assign& assign, uint64_t link);

  // The TOKENS message for the step, if it says anything (ids, text or a draft's counts), with
  // the kept ids' log-probabilities when the step has them. Sets `stopped_by_string` when a stop
  // string ends the output in this step.
  std::optional<protocol::Tokens> tokens(AttemptTokens& step);
  // Completes the FINAL: this attempt's tokens added to the usage, and `stop` when the text
  // ended the output.
  void complete(protocol::FinalResult& result) const;

  const Tokenizer& tokenizer;  // for the bytes of each token's log-probabilities
  std::string job_id;
  int64_t attempt = 1;
  uint64_t link = 0;
  TextStream stream;
  int64_t next_seq = 0;
  int64_t kept_tokens = 0;         // sent in TOKENS
  bool stopped_by_string = false;  // later steps' ids are discarded; the engine is told to stop
  bool tail_stopped = false;       // the text released at the end completed a stop string
};

}  // namespace flashq
