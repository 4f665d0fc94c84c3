#include "kernels/backend.h"

#include <string>

#include "kernels/op_checks.h"
#include "shared/error.h"

namespace flashq {
namespace {

// Norms x[M, heads, head_dim] with `norm` when given, then rotates it, in place.
void norm_and_rotate(Backend& backend, Tensor& x, const Tensor* norm, const QkNormRope& norm_rope) {
  if (norm != nullptr) {
    backend.head_norm_rope(x, *norm, norm_rope.eps, *norm_rope.positions, norm_rope.rope);
  } else {
    backend.rope(x, *norm_rope.positions, norm_rope.rope);
  }
}

}  // namespace

void require_norm_rope(const QkNormRope& norm_rope, bool with_q, const char* op) {
  if (norm_rope.positions == nullptr) {
    throw Error(ErrorCode::kInternal, std::string(op) + ": RoPE needs the positions");
  }
  if (with_q && (norm_rope.q_norm == nullptr) != (norm_rope.k_norm == nullptr)) {
    throw Error(ErrorCode::kInternal, std::string(op) + ": a q/k norm needs both norms");
  }
  require_rope(norm_rope.rope, op);
}

void require_rope(const RopeOptions& rope, const char* op) {
  if (!(rope.theta > 0.0f)) {
    throw Error(ErrorCode::kInternal, std::string(op) + ": RoPE needs a positive theta");
  }
  if (rope.rotary_dims < 0 || rope.rotary_dims % 2 != 0) {
    throw Error(ErrorCode::kInternal, std::string(op) + ": RoPE's rotary dims must be even and not negative, not " +
                                          std::to_string(rope.rotary_dims));
  }
  if (rope.scaling == RopeScaling::kNone) return;
  if (!(rope.factor >= 1.0f)) {
    throw Error(ErrorCode::kInternal, std::string(op) + ": RoPE scaling needs a factor of at least 1");
  }
  if (rope.scaling == RopeScaling::kLlama3 && !(rope.original_max_position > 0.0f && rope.low_freq_factor > 0.0f &&
                                                rope.low_freq_factor < rope.high_freq_factor)) {
    throw Error(ErrorCode::kInternal, std::string(op) +
                                          ": llama3 RoPE needs a positive original context and "
                                          "0 < low_freq_factor < high_freq_factor");
  }
  if (rope.scaling == RopeScaling::kYarn && !(rope.original_max_position > 0.0f && rope.beta_slow > 0.0f &&
                                              rope.beta_fast >= rope.beta_slow && rope.attention_factor >= 0.0f)) {
    throw Error(ErrorCode::kInternal, std::string(op) +
                                          ": yarn RoPE needs a positive original context, 0 < beta_slow <= "
                                          "beta_fast and an attention factor >= 0 (0: the default)");
  }
}

void require_attention_options(const AttentionOptions& options, const Tensor& q, int64_t capacity, Device device,
                               const char* op) {
  const std::string where(op);
  if (options.sinks != nullptr) {
    const Tensor& sinks = *options.sinks;
    if (!sinks.defined() || sinks.device() != device) {
      throw Error(ErrorCode::kInternal, where + ": the attention sinks must be a tensor on the op's device");
    }
    if (sinks.dtype() != DType::kF32 && sinks.dtype() != DType::kBF16) {
      throw Error(ErrorCode::kInternal,
                  where + ": the attention sinks must be f32 or bf16, not " + std::string(dtype_name(sinks.dtype())));
    }
    const int64_t q_heads = q.rank() == 3 ? q.dim(1) : -1;
    if (sinks.rank() != 1 || sinks.dim(0) != q_heads) {
      throw Error(ErrorCode::kInternal, where + ": the attention sinks must hold one logit per query head (" +
                                            std::to_string(q_heads) + "), not " + shape_to_string(sinks.shape()));
    }
  }
  if (options.sliding_window < 0) {
    throw Error(ErrorCode::kInternal,
                where + ": a sliding window of " + std::to_string(options.sliding_window) + " keys (must be >= 0)");
  }
  if (options.sliding_window > 0 && options.block_table == nullptr && capacity < options.sliding_window) {
    throw Error(ErrorCode::kInternal, where + ": a cache of " + std::to_string(capacity) +
                                          " rows cannot hold a sliding window of " +
                                          std::to_string(options.sliding_window));
  }
  if (options.key_starts != nullptr) {
    const Tensor& starts = *options.key_starts;
    const int64_t rows = q.rank() > 0 ? q.dim(0) : 0;
    if (!starts.defined() || starts.device() != device || starts.dtype() != DType::kI32 || starts.rank() != 1 ||
        starts.dim(0) != rows) {
      throw Error(ErrorCode::kInternal, where + ": key starts must be an int32 vector of one entry per query row (" +
                                            std::to_string(rows) + ") on the op's device");
    }
  }
  if (options.block_table != nullptr) {
    const Tensor& table = *options.block_table;
    if (!table.defined() || table.device() != device || table.dtype() != DType::kI32 || table.rank() != 1) {
      throw Error(ErrorCode::kInternal, where + ": a block table must be an int32 vector on the op's device");
    }
    if (options.block_size <= 0 || capacity % options.block_size != 0) {
      throw Error(ErrorCode::kInternal, where + ": a block size of " + std::to_string(options.block_size) +
                                            " does not divide a paged store of " + std::to_string(capacity) + " rows");
    }
  }
}

AttentionOptions chunk_attention_options(const AttentionOptions& options, const CacheChunk& chunk) {
  AttentionOptions chunk_options = options;
  chunk_options.block_table = chunk.block_table;
  chunk_options.block_size = chunk.block_size;
  return chunk_options;
}

Tensor key_starts_of(const AttentionOptions& options, int64_t first, int64_t rows) {
  return options.key_starts != nullptr ? options.key_starts->slice_rows(first, rows) : Tensor();
}

void require_chunks_cover(std::span<const CacheChunk> chunks, int64_t rows, const char* op) {
  int64_t next_row = 0;
  for (const CacheChunk& chunk : chunks) {
    if (chunk.keys == nullptr || chunk.values == nullptr || chunk.first_row != next_row || chunk.rows < 0) {
      throw Error(ErrorCode::kInternal, std::string(op) + ": chunks must cover the rows in order, each with a cache");
    }
    next_row += chunk.rows;
  }
  if (next_row != rows) throw Error(ErrorCode::kInternal, std::string(op) + ": chunks must cover every row");
}

void Backend::matmul_many(const Tensor& x, std::span<const WeightProduct> products) {
  const std::string backend = name();
  OpChecks(device(), backend.c_str()).matmul_many(x, products);
  for (const WeightProduct& product : products) matmul(x, *product.w, *product.y);
}

void Backend::matmul_swiglu(const Tensor& x, const Tensor& gate, const Tensor& up, Tensor& out, Tensor& scratch) {
  matmul(x, gate, out);
  matmul(x, up, scratch);
  swiglu(out, scratch, out);
}

void Backend::linear(const Tensor& x, const LinearWeight& w, Tensor& y) {
  const std::string backend = name();
  OpChecks(device(), backend.c_str()).linear(x, w, y);
  if (w.mxfp4()) {
    matmul_mxfp4(x, w.weight, w.scales, y);
  } else {
    matmul(x, w.weight, y);
  }
  if (w.bias.defined()) add_bias(y, w.bias);
}

void Backend::store_kv(const Tensor& k, const Tensor& v, std::span<const CacheChunk> chunks, const Tensor& store_at,
                       const QkNormRope* norm_rope) {
  require_chunks_cover(chunks, k.rank() > 0 ? k.dim(0) : 0, "store_kv");
  if (norm_rope != nullptr) {
    require_norm_rope(*norm_rope, /*with_q=*/false, "store_kv");
    Tensor k_heads = k;  // a view: normed and rotated in place, as documented
    norm_and_rotate(*this, k_heads, norm_rope->k_norm, *norm_rope);
  }
  for (const CacheChunk& chunk : chunks) {
    const int64_t first = chunk.first_row, n = chunk.rows;
    store_rows(k.slice_rows(first, n), *chunk.keys, store_at.slice_rows(first, n));
    store_rows(v.slice_rows(first, n), *chunk.values, store_at.slice_rows(first, n));
  }
}

void Backend::store_and_attend(const Tensor& q, const Tensor& k, const Tensor& v, std::span<const CacheChunk> chunks,
                               const Tensor& store_at, const Tensor& key_counts, Tensor& out,
                               const QkNormRope* norm_rope, const AttentionOptions& options) {
  require_chunks_cover(chunks, q.rank() > 0 ? q.dim(0) : 0, "store_and_attend");
  for (const CacheChunk& chunk : chunks) {
    require_attention_options(chunk_attention_options(options, chunk), q,
                              chunk.keys->rank() > 0 ? chunk.keys->dim(0) : 0, device(), "store_and_attend");
  }
  if (norm_rope != nullptr) {
    require_norm_rope(*norm_rope, /*with_q=*/true, "store_and_attend");
    Tensor q_heads = q;  // a view: normed and rotated in place, as documented
    norm_and_rotate(*this, q_heads, norm_rope->q_norm, *norm_rope);
  }
  store_kv(k, v, chunks, store_at, norm_rope);
  for (const CacheChunk& chunk : chunks) {
    Tensor chunk_out = out.slice_rows(chunk.first_row, chunk.rows);
    AttentionOptions chunk_options = chunk_attention_options(options, chunk);
    const Tensor chunk_starts = key_starts_of(options, chunk.first_row, chunk.rows);
    if (chunk_starts.defined()) chunk_options.key_starts = &chunk_starts;
    attention(q.slice_rows(chunk.first_row, chunk.rows), *chunk.keys, *chunk.values,
              key_counts.slice_rows(chunk.first_row, chunk.rows), chunk_out, chunk_options);
  }
}

std::unique_ptr<CapturedOps> Backend::capture(const std::function<void()>&) {
  throw Error(ErrorCode::kUnsupported, "backend " + name() + " cannot capture ops");
}

void Backend::replay(CapturedOps&) { throw Error(ErrorCode::kUnsupported, "backend " + name() + " cannot replay ops"); }

}  // namespace flashq
