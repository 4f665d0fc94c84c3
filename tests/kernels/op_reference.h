// Plain references of the Backend ops: straightforward loops over host vectors, in double
// where a sum is formed, written to be read against the interface's comments (kernels/backend.h)
// rather than to be fast. Every backend, the CPU one included, is held to these by the
// op-parity harness (backend_ops_test.cpp).
//
// Layouts are the backend's: row-major, activations [rows, ...], weights [out, in], heads
// [rows, heads, head_dim].
#pragma once

#include <cstdint>
#include <vector>

namespace flashq::reference {

// y[m, n] = sum_k x[m, k] * w[n, k]
std::vector<float> matmul(const std::vector<float>& x, const std::vector<float>& w, int64_t m, int64_t n, int64_t k);

// y = x / sqrt(mean(x^2) + eps) * w over each row of `dim`.
std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& w, int64_t dim, float eps);

std::vector<float> add(const std::vector<float>& a, const std::vector<float>& b);

// silu(gate) * up, silu(g) = g / (1 + e^-g).
std::vector<float> swiglu(const std::vector<float>& gate, const std::vector<float>& up);

// Rotate-half (NeoX) RoPE: in each head, element i < head_dim / 2 pairs with i + head_dim / 2 and
// the pair turns by position * theta^(-2i / head_dim). The angle is formed in float32 as
// Hugging Face's Qwen3 forms it (the inverse frequency rounded to float, then the product
// rounded to float): at positions in the tens of thousands that rounding moves the angle by
// more than the tolerance, so it is part of what RoPE means here.
std::vector<float> rope(const std::vector<float>& x, const std::vector<int32_t>& positions, int64_t heads,
                        int64_t head_dim, float theta);

// RoPE as rope() forms it, with the inverse frequency of pair i given (rounded to float as rope()
// rounds theta^(-2i / head_dim)).
std::vector<float> rope_with_frequencies(const std::vector<float>& x, const std::vector<int32_t>& positions,
                                         int64_t heads, int64_t head_dim, const std::vector<double>& inv_freq);

// Unscaled inverse frequencies theta^(-2i / head_dim), scaled as Hugging Face's modeling_rope_utils
// scales them: `linear` divides each by factor; `llama3` (_compute_llama3_parameters) divides
// those whose wavelength 2 pi / f is above original / low by factor, keeps those below
// original / high, and blends between with smooth = (original / wavelength - low) / (high - low):
// (1 - smooth) f / factor + smooth f.
std::vector<double> inverse_frequencies(float theta, int64_t head_dim);
std::vector<double> linear_inverse_frequencies(float theta, int64_t head_dim, double factor);
std::vector<double> llama3_inverse_frequencies(float theta, int64_t head_dim, double factor, double low, double high,
                                               double original);

// y[m, n] + bias[n] for rows of `cols`.
std::vector<float> add_bias(const std::vector<float>& y, const std::vector<float>& bias, int64_t cols);

// rmsnorm of each head with w (of head_dim), then rope.
std::vector<float> head_norm_rope(const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<int32_t>& positions, int64_t heads, int64_t head_dim, float eps,
                                  float theta);

// Grouped-query attention: query row m, head h attends keys [0, key_counts[m]) of KV head
// h / (q_heads / kv_heads) with softmax(q . k / sqrt(head_dim)); a row that sees no key gets zeros.
std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                             const std::vector<int32_t>& key_counts, int64_t q_heads, int64_t kv_heads,
                             int64_t head_dim);

// dst with row rows[i] replaced by row i of src (rows of row_size floats).
std::vector<float> store_rows(const std::vector<float>& src, std::vector<float> dst, const std::vector<int32_t>& rows,
                              int64_t row_size);
// Row rows[i] of src as row i.
std::vector<float> gather_rows(const std::vector<float>& src, const std::vector<int32_t>& rows, int64_t row_size);
// dst with rows [first_row, ...) replaced by src.
std::vector<float> copy_rows(const std::vector<float>& src, std::vector<float> dst, int64_t first_row,
                             int64_t row_size);
// dst[m, first_col + c] = src[m, c].
std::vector<float> copy_columns(const std::vector<float>& src, int64_t src_cols, std::vector<float> dst,
                                int64_t dst_cols, int64_t first_col);

// Row ids[m] of table, of dim floats.
std::vector<float> embedding(const std::vector<float>& table, const std::vector<int32_t>& ids, int64_t dim);

// The index of the largest logit of each row, the lowest on ties; NaN never wins.
std::vector<int32_t> argmax(const std::vector<float>& logits, int64_t vocab);

// One id per row of logits, drawn as kernels/cpu/sampling.h states with params {temperature,
// top_k, top_p, u} per row.
std::vector<int32_t> sample(const std::vector<float>& logits, const std::vector<float>& params, int64_t vocab);

// ---- gpt-oss: attention sinks, sliding windows, YaRN RoPE ----

// attention() as Hugging Face's gpt-oss computes it (eager_attention_forward with its sinks and
// masking_utils' sliding-window mask): each head's sink sinks[h] (none when `sinks` is empty)
// joins the scores as one more logit, the softmax is taken over scores and sink (max included),
// and the sink's weight is dropped. With window W > 0, row m with count c attends positions
// [max(0, c - W), c) (a key is seen when query position - key position < W), position p read at
// row p % T of k and v [T, kv_heads, head_dim]. With key_starts (one per row; empty: none), row m
// sees no position before key_starts[m]. A row that sees no key gets zeros.
std::vector<float> attention_with_options(const std::vector<float>& q, const std::vector<float>& k,
                                          const std::vector<float>& v, const std::vector<int32_t>& key_counts,
                                          int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                                          const std::vector<float>& sinks, int64_t window,
                                          const std::vector<int32_t>& key_starts = {});

// YaRN's inverse frequencies (modeling_rope_utils' _compute_yarn_parameters): with
// dim(r) = head_dim ln(original / (2 pi r)) / (2 ln theta), low = dim(beta_fast), high = dim(beta_slow)
// (floor and ceil when `truncate`), clamped to [0, head_dim - 1] (high + 0.001 when equal), and
// ramp(i) = clamp((i - low) / (high - low), 0, 1): f(i) / factor * ramp + f(i) * (1 - ramp).
std::vector<double> yarn_inverse_frequencies(double theta, int64_t head_dim, double factor, double beta_fast,
                                             double beta_slow, double original, bool truncate);
// YaRN's attention factor when none is given: 0.1 ln(factor) + 1 (1 for factor <= 1).
double yarn_attention_factor(double factor);

// rope_with_frequencies with cos and sin multiplied by attention_factor (YaRN's).
std::vector<float> rope_with_frequencies(const std::vector<float>& x, const std::vector<int32_t>& positions,
                                         int64_t heads, int64_t head_dim, const std::vector<double>& inv_freq,
                                         double attention_factor);

}  // namespace flashq::reference
