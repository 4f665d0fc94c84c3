#!/usr/bin/python3
"""NumPy reference of the DFlash2 drafter and of greedy DFlash2 speculative decoding (docs/dflash.md §7),
written from the published definition (z-lab/dflash, dflash/model.py: GroupedDynamicCausalConv,
_grouped_dynamic_convolve, CandidateSelector, DFlash2DraftModel, dflash_generate), not from flashq's code.

DFlash2 is DFlash (dflash_reference.py: context features, KV injection, the block, the loop) plus:

1. Around each sublayer of every drafter layer, a grouped dynamic causal convolution over the
   block's rows. With x [B, H] the sublayer's (normed) input, K taps, groups of g channels
   (G = H / g), base [2, K, H] and a projection P [2 K G, H]:
       D = (x P^T) viewed [B, 2, K, G]
       conv(y, d, b)[t, c] = sum_{o < K} (b[o, c] + d[t, o, c // g]) * y[t - o, c],  y[t - o] = 0 before row 0
       sublayer input  = conv(x, D[:, 0], base[0])
       sublayer output = conv(out, D[:, 1], base[1])
   Row 0 of the block is the block's first row: taps never reach the context.
2. The candidate selector over the drafter's logits of rows 1..B-1 (compute_logits: the target's
   LM head, times output_multiplier, soft-capped): per row i the top-K logits (unary) and their
   tokens (candidates), and with h = hidden_projection(final-normed row), predecessor codebook A and
   successor codebook B, walking from the anchor (the block's token x):
       score_i(k) = unary_i(k) + sum_r A[prev, r] * h_i[r] * B[cand_i(k), r]
       greedy: the best k (first on ties); sampled: q_i = softmax(score_i / T), k drawn from q_i
       prev = cand_i(k)
   The published code takes torch.topk(sorted=False); the candidates' order here (descending
   logit, lower id on ties) is this reference's reading, and flashq's (docs/dflash.md §7.6).

Command line as dflash_reference.py's, with the selector's scores of every step's greedy walk also
written: PREFIX.selector_scores.f32 float32 [S, B-1, K]. Numerics: weights float32 as stored,
activations float64.
"""

import argparse
import json
import os
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dflash_reference as dflash  # noqa: E402
import qwen3_reference as qwen3  # noqa: E402
import target_reference as targets  # noqa: E402
from qwen3_reference import COMPUTE, linear, rms_norm, swiglu_mlp  # noqa: E402
from safetensors_numpy import load_safetensors  # noqa: E402


@dataclass(frozen=True)
class DFlash2Options:
    conv_kernel_size: int
    conv_group_size: int
    selector_rank: int
    selector_top_k: int


@dataclass
class DFlash2Drafter:
    base: dflash.DFlashDrafter  # the DFlash parts: fc, hidden_norm, layers, norm, config
    options: DFlash2Options
    convs: list                 # per layer {"attention": (base [2,K,H], projection [2KG,H]), "mlp": (...)}
    hidden_projection: np.ndarray  # [R, H]
    predecessor_codebook: np.ndarray  # [V, R]
    successor_codebook: np.ndarray    # [V, R]
    scores: list = None         # every greedy walk's scores, [B-1, K] each (for the check)


def read_options(drafter_dir):
    with open(os.path.join(drafter_dir, "config.json"), "r", encoding="utf-8") as f:
        raw = json.load(f)
    values = {}
    for key in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"):
        value = dflash.draft_value(raw, key)
        if value is None or int(value) < 1:
            raise ValueError(f"config: {key} must be a positive integer, got {value}")
        values[key] = int(value)
    return DFlash2Options(**values)


def load_drafter(drafter_dir, num_target_layers=None):
    base = dflash.load_drafter(drafter_dir, num_target_layers, architecture="DFlash2DraftModel")
    options = read_options(drafter_dir)
    c = base.config.layers
    H, K = c.hidden_size, options.conv_kernel_size
    if H % options.conv_group_size:
        raise ValueError(f"config: conv_group_size {options.conv_group_size} does not divide hidden_size {H}")
    G = H // options.conv_group_size
    tensors = load_safetensors(drafter_dir)
    convs = []
    for i in range(c.num_hidden_layers):
        layer = {}
        for sublayer in ("attention", "mlp"):
            p = f"layers.{i}.{sublayer}_conv."
            layer[sublayer] = (qwen3._take(tensors, p + "base_kernel", (2, K, H)),
                               qwen3._take(tensors, p + "kernel_projection.weight", (2 * K * G, H)))
        convs.append(layer)
    R, V = options.selector_rank, c.vocab_size

    def codebook(name):  # z-lab stores the bare name; an nn.Embedding copy adds .weight
        bare = "candidate_selector." + name
        return qwen3._take(tensors, bare if bare in tensors else bare + ".weight", (V, R))

    return DFlash2Drafter(base=base, options=options, convs=convs,
                          hidden_projection=qwen3._take(tensors, "candidate_selector.hidden_projection.weight", (R, H)),
                          predecessor_codebook=codebook("predecessor_codebook"),
                          successor_codebook=codebook("successor_codebook"), scores=[])


# ---------------------------------------------------------------------------------------------
# 1. The grouped dynamic causal convolution
# ---------------------------------------------------------------------------------------------

def convolve(y, dynamic, base, group_size):
    """y [B, H], dynamic [B, K, G], base [K, H]: sum over taps o of (base[o] + dynamic[:, o]
    repeated over each group's channels) * y shifted down o rows (zeros before row 0)."""
    B, H = y.shape
    out = np.zeros((B, H), dtype=COMPUTE)
    for o in range(base.shape[0]):
        shifted = np.zeros((B, H), dtype=COMPUTE)
        shifted[o:] = y[:B - o]
        weight = base[o][None, :].astype(COMPUTE) + np.repeat(dynamic[:, o, :], group_size, axis=1)
        out += weight * shifted
    return out


def conv_prepare(conv, x, options):
    """The sublayer's input convolved, and the dynamic taps its output will take."""
    base, projection = conv
    B = x.shape[0]
    G = x.shape[1] // options.conv_group_size
    dynamic = linear(x, projection).reshape(B, 2, options.conv_kernel_size, G)
    return convolve(x, dynamic[:, 0], base[0], options.conv_group_size), dynamic[:, 1]


def conv_finish(conv, y, dynamic, options):
    return convolve(y, dynamic, conv[0][1], options.conv_group_size)


def drafter2_layer(drafter, i, h, positions, context_kv, attention, context_positions):
    """dflash_reference.drafter_layer with the convolution around attention and around the MLP."""
    c = drafter.base.config.layers
    layer, conv, opts = drafter.base.layers[i], drafter.convs[i], drafter.options
    n = rms_norm(h, layer["input_layernorm"], c.rms_norm_eps)
    n, dynamic = conv_prepare(conv["attention"], n, opts)
    q, k, v = qwen3.project_qkv(layer, n, positions, c)
    context_k, context_v = context_kv
    allowed = dflash.block_attention_mask(positions, context_positions, attention)
    attn = qwen3.grouped_query_attention(q, np.concatenate([context_k, k]), np.concatenate([context_v, v]), allowed, c)
    h = h + conv_finish(conv["attention"], qwen3.project(layer, "self_attn.o_proj", attn), dynamic, opts)
    m = rms_norm(h, layer["post_attention_layernorm"], c.rms_norm_eps)
    m, dynamic = conv_prepare(conv["mlp"], m, opts)
    return h + conv_finish(conv["mlp"], swiglu_mlp(layer, m), dynamic, opts)


# ---------------------------------------------------------------------------------------------
# 2. The candidate selector
# ---------------------------------------------------------------------------------------------

def top_k(row, k):
    """The k largest logits of a row: descending, lower id on ties (this reference's reading)."""
    order = sorted(range(len(row)), key=lambda i: (-row[i], i))[:k]
    return np.array(order), row[order]


def select(drafter, hidden, logits, anchor, temperature=0.0, uniforms=None):
    """Walks rows 1..B-1 from the anchor. Returns (tokens, candidates [rows, K], q [rows, K] or
    None, scores [rows, K])."""
    K = drafter.options.selector_top_k
    projected = linear(hidden, drafter.hidden_projection)
    previous, tokens, all_candidates, qs, all_scores = anchor, [], [], [], []
    for i in range(hidden.shape[0]):
        candidates, unary = top_k(logits[i], K)
        pair = (drafter.predecessor_codebook[previous].astype(COMPUTE) * projected[i]) @ \
            drafter.successor_codebook[candidates].astype(COMPUTE).T
        scores = unary + pair
        if temperature > 0:
            q = np.exp((scores - scores.max()) / temperature)
            q /= q.sum()
            chosen = min(int(np.searchsorted(np.cumsum(q), uniforms[i], side="right")), K - 1)
            qs.append(q)
        else:
            chosen = int(np.argmax(scores))  # the first on ties
        previous = int(candidates[chosen])
        tokens.append(previous)
        all_candidates.append(candidates)
        all_scores.append(scores)
    return tokens, np.array(all_candidates), (np.array(qs) if qs else None), np.array(all_scores)


# ---------------------------------------------------------------------------------------------
# One draft step and the loop
# ---------------------------------------------------------------------------------------------

def draft_block(target, drafter, cache, start, last_token, block_size):
    """dflash_reference.draft_block with DFlash2's layers and the greedy selector walk."""
    base = drafter.base
    block_ids = [last_token] + [base.config.mask_token_id] * (block_size - 1)
    positions = np.arange(start, start + block_size)
    h = qwen3.embed(target, block_ids)
    attention = base.config.layer_attention or (dflash.LayerAttention(),) * len(base.layers)
    context_positions = cache.positions_before(start)
    for i, context_kv in enumerate(cache.rows_before(start)):
        h = drafter2_layer(drafter, i, h, positions, context_kv, attention[i], context_positions)
    final = rms_norm(h, base.norm, base.config.layers.rms_norm_eps)[1:]
    logits = dflash.compute_logits(base.config, final, target.lm_head)
    tokens, _, _, scores = select(drafter, final, logits, last_token)
    drafter.scores.append(scores)
    return tokens, logits


def speculative_generate(target, drafter, prompt, block_size, num_steps, max_new_tokens=None):
    """Greedy DFlash2 decoding: dflash_reference's loop with this drafter's steps. The context
    cache and injection are DFlash's (the context rows are never convolved)."""
    return dflash.speculative_generate(target, DrafterView(drafter), prompt, block_size, num_steps, max_new_tokens,
                                       draft=lambda t, view, cache, start, x, b: draft_block(t, drafter, cache, start,
                                                                                              x, b))


class DrafterView:
    """The DFlash parts of a DFlash2 drafter, as dflash_reference's loop reads them."""

    def __init__(self, drafter):
        self.config, self.fc, self.hidden_norm = drafter.base.config, drafter.base.fc, drafter.base.hidden_norm
        self.layers, self.norm = drafter.base.layers, drafter.base.norm


def main(argv=None):
    parser = argparse.ArgumentParser(description="NumPy reference of greedy DFlash2 speculative decoding")
    parser.add_argument("--target", required=True)
    parser.add_argument("--drafter", required=True)
    parser.add_argument("--tokens", required=True)
    parser.add_argument("--steps", required=True, type=int)
    parser.add_argument("--block-size", type=int, default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    target = targets.load_target(args.target)
    drafter = load_drafter(args.drafter, num_target_layers=target.config.num_hidden_layers)
    block_size = drafter.base.config.block_size if args.block_size is None else args.block_size
    prompt = qwen3._int_list(args.tokens)
    result = speculative_generate(target, drafter, prompt, block_size, args.steps)
    result["draft_logits"].astype("<f4").tofile(args.out + ".draft_logits.f32")
    np.stack(drafter.scores).astype("<f4").tofile(args.out + ".selector_scores.f32")
    with open(args.out + ".json", "w", encoding="utf-8") as f:
        json.dump({"steps": result["steps"], "generated": result["generated"], "prompt": prompt,
                   "block_size": block_size, "selector_top_k": drafter.options.selector_top_k}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
