// Everything a process loads to serve one model: the backend, the target (of the family its
// config.json names, model_registry.h), its tokenizer, its chat template (load_chat_template.h)
// and,
// when a drafter directory is given, the DFlash drafter and its proposer. One place that says
// how a model directory (and a drafter directory) becomes something the engine can run, and
// what READY says of it: its context length and output formats.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "shared/protocol/output_format.h"
#include "worker/engine/dflash_proposer.h"
#include "worker/model/dflash_drafter.h"
#include "worker/model/target_model.h"
#include "worker/text/load_chat_template.h"
#include "worker/text/tokenizer.h"

namespace flashq {

struct ServingModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<TargetModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  LoadedChatTemplate chat_template;  // the checkpoint's own, or its family's default
  std::unique_ptr<DFlashDrafter> drafter;    // null without a drafter directory
  std::unique_ptr<DFlashProposer> proposer;  // null without a drafter directory
  // How the model writes tool calls and reasoning, decided once at load from its chat template
  // (served_output_format()).
  protocol::OutputFormat output_format;

  // `device`: cpu, cuda or auto. Every loading error propagates as is (typed, naming the file).
  static ServingModel load(const std::string& model_dir, const std::string& drafter_dir, const std::string& device);
  int64_t block_size() const { return drafter ? drafter->config().block_size : 0; }
  // The context in tokens (prompt and completion together) the engine enforces.
  int64_t max_model_len() const { return model->config().max_position_embeddings; }
  // The element type of the target's and the drafter's KV caches (kv_cache_dtype.h), before any
  // cache is made.
  void set_kv_cache_dtype(DType dtype) const {
    model->set_kv_cache_dtype(dtype);
    if (drafter) drafter->set_kv_cache_dtype(dtype);
  }
  // Records the target's passes and the drafter's draft passes for replay (CUDA graphs on a GPU).
  void set_capture_passes(bool on) const {
    model->set_capture_passes(on);
    if (drafter) drafter->set_capture_passes(on);
  }
};

// The output formats a loaded template shows (shared/output_format_detection.h). A template whose
// format has <think> gets kThinkInPrompt when its generation prompt for one user message already
// opens <think>. A family default (no Jinja source) writes neither tool calls nor reasoning.
protocol::OutputFormat served_output_format(const LoadedChatTemplate& chat_template, const std::string& model_type);

}  // namespace flashq
