// The compute backend: every operation the models need, on one device. Model code is written
// against this interface only, so a CUDA backend sits beside the CPU one without model changes.
//
// Conventions: activations are float32 tensors of shape [rows, ...]; weights are row-major
// [out, in] in f32, f16 or bf16 (y = W x); integer inputs (token ids, positions, key counts) are
// int32 tensors on the backend's device. Launches are ordered; results are visible to the host
// after copy_to_host.
//
// Every op is listed in kernels/backend_ops.h, and the op-parity harness holds each to a plain
// reference on every backend: a new op goes in that list and gets its cases there.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "kernels/linear_weight.h"   // LinearWeight, MXFP4
#include "kernels/moe.h"             // MoeRouting, ExpertWeights, ExpertActivation
#include "kernels/rope_frequency.h"  // RopeOptions, RopeScaling
#include "kernels/state_chunk.h"     // StateChunk
#include "kernels/tensor.h"

namespace flashq {

// One sequence's share of a batched attention (Backend::store_and_attend): its rows
// [first_row, first_row + rows) of q, k and v, and its cache, [capacity, Hkv, D] keys and values.
// A paged cache (worker/model/kv_cache.h) names its block table: the cache is then a store of
// blocks shared by many sequences, read as AttentionOptions::block_table says.
struct CacheChunk {
  Tensor* keys = nullptr;
  Tensor* values = nullptr;
  int64_t first_row = 0, rows = 0;
  const Tensor* block_table = nullptr;  // int32 [blocks] on the device; null: not paged
  int64_t block_size = 0;
};

// What Backend::store_and_attend and store_kv apply to q and k before they are stored and
// attended: an optional per-head RMS norm (q with q_norm, k with k_norm, as head_norm_rope does;
// Qwen3 has it, families without it leave both null), then RoPE at `positions` (store_kv has no
// q). V is never touched. Attention biases are add_bias; sliding windows and attention sinks are
// AttentionOptions, beside this one.
struct QkNormRope {
  const Tensor* q_norm = nullptr;  // both norms or neither: neither is RoPE only
  const Tensor* k_norm = nullptr;
  const Tensor* positions = nullptr;
  float eps = 0.0f;  // the norm's; unread without one
  RopeOptions rope;
};

// What the attention ops (Backend::attention, store_and_attend) add for families that need it
// (gpt-oss, docs/models.md); the defaults are plain attention, on the unchanged fast paths.
struct AttentionOptions {
  // A learned logit per query head, [Hq] f32 or bf16 (none: no sink). It joins each query row's
  // softmax as one more score without a value: exp(sink - max) is added to the denominator (max
  // taken over the scores and the sink), so it only scales the weights down.
  const Tensor* sinks = nullptr;
  // 0: query row m attends keys [0, key_counts[m]). W > 0: row m with key_counts[m] = c
  // (positions [0, c) exist) attends only positions [max(0, c - W), c), position p read at row
  // p % T of its keys [T, Hkv, D] when not paged: the cache of a sliding layer is then a ring
  // that keeps the window, so c may exceed T, and T >= W (T >= W + the most rows stored in one
  // pass, so that rows stored and later truncated never overwrote a key still attended).
  int64_t sliding_window = 0;
  // Paged keys: k and v are a store of blocks of `block_size` rows, and position p is read at row
  // block_table[p / block_size] * block_size + p % block_size. `block_table` is int32 [blocks] on
  // the device, with an entry for every block the key counts reach, each in [0, T / block_size)
  // (checked when the op runs); with a window, only the entries of the blocks the window reaches
  // are read (a sequence gives the others back: worker/model/window_table.h).
  const Tensor* block_table = nullptr;
  int64_t block_size = 0;
  // Per query row, the first position it attends (int32 [M] on the device, each >= 0; null: 0):
  // row m attends [key_starts[m], key_counts[m]) (with a window too, from the later of the two
  // starts). A window that looks both ways (a DFlash drafter's non-causal sliding layer, whose
  // block rows see the positions less than W away on either side) is a start and a count per row.
  const Tensor* key_starts = nullptr;
};

// Throws unless `options` suit attention of q [M, Hq, D] against caches of `capacity` rows
// (the smallest, when there are several): sinks f32 or bf16 of [Hq] on `device`, a window >= 0
// and, when windowed, capacity >= window; a block table int32 of rank 1 on `device` with a
// positive block size dividing the capacity, and no window; key starts int32 [M] on `device`.
// `op` names the caller.
void require_attention_options(const AttentionOptions& options, const Tensor& q, int64_t capacity, Device device,
                               const char* op);

// `options` with the chunk's block table (none: not paged), for attention over its cache. Key
// starts cover every row of the call: attention over one chunk takes its rows' (key_starts_of).
AttentionOptions chunk_attention_options(const AttentionOptions& options, const CacheChunk& chunk);
// Rows [first, first + rows) of options.key_starts (undefined without key starts).
Tensor key_starts_of(const AttentionOptions& options, int64_t first, int64_t rows);

// Throws unless `norm_rope` can be applied: positions given, norms both or neither (`with_q`;
// without q only k_norm is read), a positive theta and usable scaling parameters
// (require_rope). `op` names the caller.
void require_norm_rope(const QkNormRope& norm_rope, bool with_q, const char* op);

// Throws unless `rope` has a positive theta and, when scaled, a factor >= 1 (and for llama3 a
// positive original context and low_freq_factor < high_freq_factor; for yarn a positive original
// context, 0 < beta_slow <= beta_fast and an attention factor >= 0). `op` names the caller.
void require_rope(const RopeOptions& rope, const char* op);

// Throws unless `chunks` cover rows [0, rows) in order, each with a cache; `op` names the caller.
void require_chunks_cover(std::span<const CacheChunk> chunks, int64_t rows, const char* op);

// One product of Backend::matmul_many: y = x * w^T.
struct WeightProduct {
  const Tensor* w = nullptr;
  Tensor* y = nullptr;
};

// Ops recorded by Backend::capture for replay (on a GPU, a CUDA graph).
class CapturedOps {
 public:
  virtual ~CapturedOps() = default;
};

struct DeviceMemory {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual std::string name() const = 0;
  // The device's memory now (a GPU's); none for host memory, which is not sized up front.
  virtual std::optional<DeviceMemory> memory() const { return std::nullopt; }

  // Memory on this device, zero-filled.
  virtual Tensor allocate(DType dtype, Shape shape) = 0;
  // A weight for this device. The CPU backend returns the same view (no copy); a GPU backend
  // uploads it, possibly converting the dtype.
  virtual Tensor upload_weight(const Tensor& host) = 0;
  virtual void copy_to_host(const Tensor& src, void* dst) = 0;
  virtual void copy_from_host(const void* src, Tensor& dst) = 0;
  // dst rows [first_row, first_row + src.dim(0)) = src; same dtype and row size.
  virtual void copy_rows(const Tensor& src, Tensor& dst, int64_t first_row) = 0;
  // dst[m, first_col + c] = src[m, c] for 2-D tensors with the same number of rows.
  virtual void copy_columns(const Tensor& src, Tensor& dst, int64_t first_col) = 0;

  // y[M, N] = x[M, K] * w[N, K]^T
  virtual void matmul(const Tensor& x, const Tensor& w, Tensor& y) = 0;
  // matmul() of one x against several weights (q, k and v; every drafter layer's k and v), with
  // the same results. The default is one matmul at a time; a GPU backend runs them all in one
  // launch, since a product of a few thousand weight rows alone leaves most of a GPU idle.
  virtual void matmul_many(const Tensor& x, std::span<const WeightProduct> products);
  // out = silu(x * gate^T) * (x * up^T): the MLP's two products and swiglu, with the results of
  // the three calls. `scratch` (out's shape) is where a backend may keep x * up^T; a GPU backend
  // does it all in one launch for up to 128 rows and never writes scratch there.
  virtual void matmul_swiglu(const Tensor& x, const Tensor& gate, const Tensor& up, Tensor& out, Tensor& scratch);

  // ---- mixture of experts and MXFP4 weights (kernels/linear_weight.h, kernels/moe.h) ----
  // y[M, N] = x[M, K] * W^T with W in MXFP4: `blocks` u8 [N, K / 2], `scales` u8 [N, K / 32],
  // decoded inside the kernel (never expanded to a dense copy of W); K a multiple of 32.
  virtual void matmul_mxfp4(const Tensor& x, const Tensor& blocks, const Tensor& scales, Tensor& y) = 0;
  // y = x * W^T (+ bias): matmul or matmul_mxfp4, then add_bias where the layer has a bias.
  void linear(const Tensor& x, const LinearWeight& w, Tensor& y);
  // The experts of each row of router logits [M, E]: expert_ids [M, k] int32 in descending weight
  // order, expert_weights [M, k] float32, k = routing.top_k in [1, E]. Ties go to the lower expert
  // index. kSoftmaxThenTopK picks by the logits (the order softmax keeps) and weighs with the
  // softmax over all E, divided by the sum of the k with normalize_top_k; kTopKThenSoftmax weighs
  // with the softmax over the k picked logits.
  virtual void moe_route(const Tensor& logits, const MoeRouting& routing, Tensor& expert_ids,
                         Tensor& expert_weights) = 0;
  // out[m] = sum_j expert_weights[m, j] * down(act(gate(x[m]), up(x[m]))) of expert
  // expert_ids[m, j], each product with its bias when it has one; x and out [M, H] float32, out
  // overwritten, the sum over j in order. `experts` [E] share one layout and shape. Rows are
  // grouped by expert, so each expert's weights are read once per call for all the rows routed to
  // it; an expert no row routes to is not read. Ids outside [0, E) are an error (on a GPU found
  // when the op runs and thrown at the next copy_to_host).
  virtual void moe_experts(const Tensor& x, const Tensor& expert_ids, const Tensor& expert_weights,
                           std::span<const ExpertWeights> experts, const ExpertActivation& activation, Tensor& out) = 0;
  // y = x * rsqrt(mean(x^2) + eps) * w, row by row over the last dimension (w has that length).
  virtual void rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& y) = 0;
  // h += delta, then y = rmsnorm(h) * w (the residual add fused with the next norm).
  virtual void add_rmsnorm(Tensor& h, const Tensor& delta, const Tensor& w, float eps, Tensor& y) = 0;
  // h += delta
  virtual void add(Tensor& h, const Tensor& delta) = 0;
  // Rotate-half RoPE in place on x[M, heads, head_dim]; row m uses positions[m], pair i the
  // inverse frequency rope_inverse_frequency(rope, i, head_dim) (kernels/rope_frequency.h).
  virtual void rope(Tensor& x, const Tensor& positions, const RopeOptions& rope) = 0;
  // Qwen3's q/k norm and RoPE in one: rmsnorm of each head of x[M, heads, head_dim] with w (of
  // head_dim), then rope, in place; the same result as the two calls.
  virtual void head_norm_rope(Tensor& x, const Tensor& w, float eps, const Tensor& positions,
                              const RopeOptions& rope) = 0;
  // The same two without scaling, for callers that have only a theta.
  void rope(Tensor& x, const Tensor& positions, float theta) { rope(x, positions, RopeOptions{.theta = theta}); }
  void head_norm_rope(Tensor& x, const Tensor& w, float eps, const Tensor& positions, float theta) {
    head_norm_rope(x, w, eps, positions, RopeOptions{.theta = theta});
  }
  // y[m, n] += bias[n] for y[M, N] (float32) and bias[N] in a weight's dtype: the bias of a
  // linear layer that has one (Llama's attention_bias and mlp_bias), after its matmul.
  virtual void add_bias(Tensor& y, const Tensor& bias) = 0;
  // Grouped-query attention. q[M, Hq, D]; k, v[T, Hkv, D]; query row m attends keys
  // [0, key_counts[m]), which expresses causal, non-causal and context-only masks alike; with
  // `options`, sinks join the softmax and a window limits (and wraps) the keys attended.
  virtual void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_counts, Tensor& out,
                         const AttentionOptions& options = {}) = 0;
  // dst[rows[i]] = src[i] (float32 rows; `rows` int32 on the device, checked when the op runs).
  virtual void store_rows(const Tensor& src, Tensor& dst, const Tensor& rows) = 0;
  // dst[i] = src[rows[i]], store_rows the other way: rows picked out of a pass in one launch
  // (the drafter's output rows of every block).
  virtual void gather_rows(const Tensor& src, const Tensor& rows, Tensor& dst) = 0;
  // For every chunk: row i of k and v stored into its cache at row store_at[i], then attention
  // of its q rows against its cache's rows [0, key_counts[m]). With `norm_rope`, q and k are
  // first normed (when it has norms) and rotated in place, as head_norm_rope or rope do (a
  // layer's whole path from its q/k/v products to attention). What changes from step to step is
  // read from device tensors (store_at, key_counts, positions), so a captured call stays right as
  // the caches fill. Chunks cover q's rows in order. The default is store_kv, then attention chunk by chunk; a GPU
  // backend does all chunks in a few launches, since launches per sequence per layer bound
  // batched decoding. `options` are attention's (sinks, a window over ring caches: every cache
  // then holds at least the window); a ring cache's store_at is the caller's (position % capacity).
  virtual void store_and_attend(const Tensor& q, const Tensor& k, const Tensor& v, std::span<const CacheChunk> chunks,
                                const Tensor& store_at, const Tensor& key_counts, Tensor& out,
                                const QkNormRope* norm_rope = nullptr, const AttentionOptions& options = {});
  // The KV half of store_and_attend, for rows that attend nothing (the drafter's context
  // injection): row i of k and v stored into its chunk's cache at row store_at[i], k first normed
  // (when it has a k_norm) and rotated in place with `norm_rope` (whose q_norm is not read). The
  // default is the primitives chunk by chunk; a GPU backend stores every chunk in one launch.
  virtual void store_kv(const Tensor& k, const Tensor& v, std::span<const CacheChunk> chunks, const Tensor& store_at,
                        const QkNormRope* norm_rope = nullptr);
  // Records the ops `work` issues, without running them, for replay(): on a GPU a CUDA graph,
  // which launches a whole pass for the price of one launch. A replay runs the same ops on the
  // same tensors: what they hold may change between replays (upload a step's ids, positions and
  // key counts first), where they are and their shapes may not. Nothing may be allocated or
  // cross between host and device while recording (those calls throw), and checks of what
  // tensors hold (token ids, key counts) happen at replay. Backends that cannot record throw
  // `unsupported`.
  virtual std::unique_ptr<CapturedOps> capture(const std::function<void()>& work);
  virtual void replay(CapturedOps& ops);
  // Gated DeltaNet's gates from their projections, per row and value head: beta = sigmoid(b) and
  // g = -exp(A_log) * softplus(a + dt_bias) (softplus(x) = x above 20, as torch's), the log decay
  // gated_delta_rule takes. a, b, g, beta [R, H] float32; a_log and dt_bias [H] f32 or bf16.
  virtual void delta_rule_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, Tensor& g,
                                Tensor& beta) = 0;
  // Gated DeltaNet's output norm, per row and head: out = x / sqrt(mean(x^2) + eps) * w * silu(z).
  // x, z and out [R, H, D] float32 (out may be x); w [D] f32 or bf16.
  virtual void gated_rmsnorm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) = 0;
  // x *= sigmoid(gate), float32: element-wise when gate has x's shape (gated attention's output
  // gate), or one gate per row when gate is [rows, 1] (a shared expert's gate), x [rows, W].
  virtual void sigmoid_gate(Tensor& x, const Tensor& gate) = 0;
  // Gated DeltaNet's depthwise causal convolution with SiLU, chunk by chunk: out[t][c] =
  // silu(sum over j < K of w[c][j] * x[t - K + 1 + j][c]), where a row before the chunk's first
  // is read from its state [K - 1, C] (the K - 1 inputs before it, oldest first), which then
  // holds the chunk's last K - 1 inputs. x and out [R, C] float32, weight [C, K] f32 or bf16.
  virtual void causal_conv1d(const Tensor& x, const Tensor& weight, std::span<const StateChunk> chunks,
                             Tensor& out) = 0;
  // Gated DeltaNet's recurrence (Qwen3.5 / Qwen3-Next linear attention), chunk by chunk, each
  // chunk's rows in order from its state S [Hv, Dk, Dv]: row t's q and k L2-normalised
  // (x / sqrt(sum x^2 + 1e-6)), key head h / (Hv / Hk) serving value head h, q scaled by
  // 1 / sqrt(Dk); then for each value head S = S * exp(g_t); u = beta_t * (v_t - S^T k_t);
  // S = S + k_t u^T; out_t = S^T q_t. q and k [R, Hk, Dk], v and out [R, Hv, Dv], g (the log
  // decay) and beta [R, Hv], all float32; Hk divides Hv. Chunks cover the rows in order, each
  // with its own state, left after its last row.
  virtual void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                                std::span<const StateChunk> chunks, Tensor& out) = 0;
  // The same recurrence in its chunked form, for a prefill's many rows: each run of up to
  // delta_rule_chunk_rows() rows at once through a triangular solve and products with the state
  // (kernels/cpu/gated_delta_rule_chunked.h), then the state carried on. Equal to gated_delta_rule
  // within float tolerance, not to the bit; the same tensors and chunks.
  virtual void gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                        const Tensor& beta, std::span<const StateChunk> chunks, Tensor& out) = 0;
  // The rows of a chunk of gated_delta_rule_chunked; and whether a prefill of many rows should
  // take the chunked form here: where the recurrent form's row after row is the long pole (a
  // GPU), not where it is as fast and keeps every row's bits independent of the pass (the CPU:
  // docs/decisions.md, "The delta rule's two forms").
  virtual int64_t delta_rule_chunk_rows() const = 0;
  virtual bool prefers_chunked_delta_rule() const = 0;
  // ---- DFlash2's drafter (docs/dflash.md §7) ----
  // The grouped dynamic causal convolution around each sublayer, over rows that come in blocks:
  // out[t, c] = sum over o < K with o <= row_in_block[t] of (base[o, c] + dynamic[t, o * G +
  // c / group_size]) * x[t - o, c], in tap order, with G = C / group_size: a row's taps never
  // read a row before its block's first. x and out [R, C] float32 (distinct), dynamic [R, K * G]
  // float32, base [K, C] f32 or bf16, row_in_block int32 [R] (each >= 0, checked when it runs).
  virtual void grouped_dynamic_conv(const Tensor& x, const Tensor& dynamic, const Tensor& base,
                                    const Tensor& row_in_block, int64_t group_size, Tensor& out) = 0;
  // The k = ids.dim(1) largest of each row of logits [M, V] (k <= V), in descending order, ties
  // to the lower index, NaN read as -inf: values [M, k] float32 and ids [M, k] int32.
  virtual void top_k(const Tensor& logits, Tensor& values, Tensor& ids) = 0;
  // The candidate selector's pair scores: out[i, p, k] = sum over r of a[i * K + p, r] * h[i, r] *
  // b[i * K + k, r] (r in order), for a and b [M * K, R], h [M, R] and out [M, K, K], float32.
  virtual void selector_pair_scores(const Tensor& a, const Tensor& h, const Tensor& b, Tensor& out) = 0;
  // out = silu(gate) * up, element-wise.
  virtual void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // out[M, H] = table[ids[m]] widened to float32; ids outside the table are an error.
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor& out) = 0;
  // ids[m] = argmax over row m of logits[M, V] (lowest index on ties).
  virtual void argmax(const Tensor& logits, Tensor& ids) = 0;
  // ids[m] = a token drawn from row m of logits [M, V] with params [M, 4] = {temperature, top_k,
  // top_p, u} per row: kernels/cpu/sampling.h states the distribution and the draw. Only ids
  // need to leave the device.
  virtual void sample(const Tensor& logits, const Tensor& params, Tensor& ids) = 0;
};

// The CPU backend (always available) and, where built and a GPU is present, the CUDA backend.
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace flashq
