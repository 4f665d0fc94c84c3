#include "worker/process/output_thread.h"

#include <spdlog/spdlog.h>

#include <variant>

#include "worker/process/attempt_text.h"

namespace flashq {

void OutputThread::run() {
  while (true) {
    for (OutputItem& item : from_engine_.take(/*wait=*/true)) {
      if (auto* step = std::get_if<AttemptTokens>(&item)) {
        stream(*step);
      } else if (auto* final = std::get_if<AttemptFinal>(&item)) {
        finish(*final);
      } else if (std::holds_alternative<DrainFinished>(item)) {
        outbox_.mark_drained();  // after every FINAL the engine sent before it
      } else {
        return;  // EngineStopped
      }
    }
  }
}

void OutputThread::stream(AttemptTokens& step) {
  AttemptText& text = *step.text;
  const bool was_stopped = text.stopped_by_string;
  std::optional<protocol::Tokens> tokens = text.tokens(step);
  if (text.stopped_by_string && !was_stopped && !step.last) to_engine_.push(StopSequence{step.engine_id});
  if (tokens) outbox_.push({text.link, protocol::to_wire(*tokens)});
}

void OutputThread::finish(AttemptFinal& final) {
  if (final.text) {
    final.text->complete(final.final.result);
    spdlog::info("job {} attempt {}: {} tokens", final.final.id, final.final.attempt, final.text->kept_tokens);
  }
  outbox_.push({final.link, protocol::to_wire(final.final)});
}

}  // namespace flashq
