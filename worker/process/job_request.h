// From an ASSIGN to what the engine runs: the prompt (text through the tokenizer, token ids as
// given, or chat messages, tools and template options through the model's chat template)
// followed by the resume tokens of a
// continuation (with how much of their text was streamed), max_tokens less what earlier attempts
// produced, sampling, stops and speculation.
#pragma once

#include <cstdint>
#include <string>

#include "shared/protocol/worker_messages.h"
#include "worker/engine/sequence.h"
#include "worker/grammar/grammar_cache.h"
#include "worker/grammar/token_table.h"
#include "worker/text/chat_template.h"
#include "worker/text/tokenizer.h"

namespace flashq {

// What the worker serves, for checking a job against it.
struct WorkerModel {
  std::string name;  // a job naming another model is refused
  bool has_drafter = false;
  const ChatTemplate* chat_template = nullptr;  // the checkpoint's (load_chat_template.h)
  // Structured outputs: grammars compiled over the model's token table, cached; null: a job that
  // asks for one is refused.
  grammar::GrammarCache* grammars = nullptr;
  std::shared_ptr<const grammar::TokenTable> token_table;
  // The same with special tokens as their text, for grammars that spell them (harmony's tool
  // calls); null for a model whose tool calls need none.
  std::shared_ptr<const grammar::TokenTable> special_token_table;
};

struct JobRequest {
  SequenceRequest sequence;
  // usage is job-level (docs/protocol.md, FINAL): the job's own prompt, and the output of every
  // attempt, the resume tokens included.
  int64_t job_prompt_tokens = 0;
  int64_t resumed_tokens = 0;
  bool nothing_left = false;  // the resume tokens already reach max_tokens: the job is done
};

// kInvalidArgument (with a message fit for the job's FINAL) for a job this worker cannot run:
// another model, a structured output it cannot compile (naming the keyword), or a chat its
// template refuses (a role it does not know, tools for a template
// that takes none, the template's raise_exception). Everything the
// engine checks itself (context, vocabulary, sampling, spec without a drafter, block size) is
// left to Engine::add.
// A chat job (prompt holds messages) as its template takes it: messages as OpenAI-shaped objects
// (a tool call's arguments given as JSON text of an object become that object), tools, options
// and add_generation_prompt.
ChatRequest make_chat_request(const protocol::Job& job);

JobRequest make_job_request(const protocol::Assign& assign, const Tokenizer& tokenizer, const WorkerModel& model);

}  // namespace flashq
