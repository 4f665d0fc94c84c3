#!/usr/bin/python3
"""NumPy reference of the DFlash drafter and of greedy DFlash speculative decoding (docs/dflash.md §2-§3).

Read it next to docs/dflash.md: §3 (the drafter directory) first because everything else needs it, then
§2.1 context features, §2.2 KV injection, §2.3 one draft step, §2.4 the greedy loop. The target is
a Qwen3, Llama, Qwen3-MoE or gpt-oss checkpoint, chosen by its model_type (target_reference.py).
The drafter's layers are Qwen3 layers whatever the target's family (the
published DFlashDraftModel is built from Qwen3 layers: q_norm/k_norm, an MLP without biases, q/k/v/o
biases when its attention_bias says so), with the RoPE its own config.json states (plain, linear,
llama3 or yarn: rope_reference.py, yarn_reference.py); this file reuses
qwen3_reference.py's building blocks (linear, rms_norm, apply_rope, attention, MLP) so that the
drafter differs from a target layer only where docs/dflash.md says it does.

Numerics as in qwen3_reference.py: weights float32 as stored, every activation float64.

Simplicity over speed: the target keeps no KV cache. Verification re-runs the target's full causal
forward over prompt + committed tokens + the block, which is obviously right because a causal row
does not depend on later rows; the target KV truncation of §2.4 then has nothing to do.

Command line:
  /usr/bin/python3 tests/reference/dflash_reference.py --target DIR --drafter DIR \
      --tokens 1,2,3 --steps S --block-size B --out PREFIX
writes
  PREFIX.json             {"steps": [{"start", "x", "draft": [d1..d_{B-1}], "accepted": a, "bonus"}],
                           "generated": [first token of the prefill, then every committed token and
                           bonus in order], plus "prompt", "block_size", "vocab_size",
                           "mask_token_id", "target_layer_ids"}. 1 + sum(a + 1) tokens are generated.
  PREFIX.draft_logits.f32 little-endian float32 [S, B-1, vocab]: the drafter's logits of block rows
                          1..B-1 (row j predicts the token at position start + j) of every step.
--block-size defaults to the drafter's block_size; any 2 <= B <= block_size is accepted, since the
block attends to itself without a mask.

Attention inside the drafter (z-lab's DFlashDraftModel, Qwen3DFlashAttention): a layer whose
layer_types entry is "full_attention" (the default) sees every context row before the block and
every block row, with no mask. A "sliding_attention" layer is causal: block row j (position
start + j) sees the keys at positions p <= start + j, and only the last W of them
(start + j - p < W, itself included) where W is the config's sliding_window; as in Qwen3Config,
W applies only when use_sliding_window is true (else the layer is causal without a window), and
use_sliding_window without an explicit layer_types list is refused (the list would otherwise
derive from max_window_layers). A config-level is_causal, when present, makes every layer causal
(true) or none (false), as z-lab's code reads it; a non-causal sliding layer then sees the
positions less than W away on either side.

Import: load_drafter(dir) -> DFlashDrafter; draft_block(...) for one step;
speculative_generate(target, drafter, prompt, block_size, num_steps) for the loop.
"""

import argparse
import json
import os
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3_reference as qwen3  # noqa: E402
import target_reference as targets  # noqa: E402
import yarn_reference as yarn  # noqa: E402
from qwen3_reference import COMPUTE, linear, rms_norm, apply_rope, swiglu_mlp  # noqa: E402
from safetensors_numpy import load_safetensors  # noqa: E402


# ---------------------------------------------------------------------------------------------
# §3  The drafter directory
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LayerAttention:
    """Which keys a drafter layer's block rows see (module docstring)."""
    causal: bool = False          # block row j sees positions <= start + j only
    window: int = None            # and only the last `window` of those (itself included)


@dataclass(frozen=True)
class DFlashConfig:
    layers: qwen3.Qwen3Config     # the drafter's own Qwen3 keys: heads, head_dim, RoPE, eps
    block_size: int               # the block size it was trained with
    mask_token_id: int
    target_layer_ids: tuple       # 0-based target layers tapped, in concatenation order
    num_target_layers: int        # None when config.json does not say
    layer_attention: tuple = ()   # LayerAttention per drafter layer; () means all full
    output_multiplier: float = 1.0         # z-lab's compute_logits: logits times this,
    final_logit_softcapping: float = None  # then cap * tanh(logits / cap) when cap > 0


def default_target_layer_ids(num_target_layers, num_draft_layers):
    """§2.1: K = number of drafter layers, spread from layer 1 to layer L-3,
    id_i = round(1 + i * (L - 4) / (K - 1)). Python's round (half to even) and the K = 1 case
    (the middle layer) are those of the public z-lab code."""
    L, K = num_target_layers, num_draft_layers
    if K == 1:
        return [L // 2]
    return [int(round(1 + i * (L - 4) / (K - 1))) for i in range(K)]


def draft_value(raw, key, default=None):
    """z-lab's _draft_value: dflash_config's key, else the top-level one."""
    return (raw.get("dflash_config") or {}).get(key, raw.get(key, default))


def read_dflash_config(drafter_dir, num_target_layers=None, architecture="DFlashDraftModel"):
    """num_target_layers: the target's layer count, used when config.json lacks its own.
    architecture: the one config.json must name (dflash2_reference.py reads DFlash2DraftModel)."""
    with open(os.path.join(drafter_dir, "config.json"), "r", encoding="utf-8") as f:
        raw = json.load(f)
    architectures = raw.get("architectures") or []
    if architecture not in architectures:
        raise ValueError(f"config: architectures {architectures} does not contain {architecture}")
    layer_attention = read_layer_attention(raw)
    # The Qwen3 keys without the attention pattern (read above), with YaRN allowed.
    layer_keys = {k: v for k, v in raw.items() if k not in ("layer_types", "use_sliding_window", "sliding_window")}
    layers = qwen3.qwen3_config_from_dict(layer_keys, read_rope=yarn.read_rope_with_yarn)
    dflash = raw.get("dflash_config") or {}
    if float(draft_value(raw, "input_embedding_scale", 1.0)) != 1.0:
        raise ValueError(f"config: input_embedding_scale = {draft_value(raw, 'input_embedding_scale')} is not implemented")
    output_multiplier = float(draft_value(raw, "output_multiplier", 1.0))
    if not output_multiplier > 0:
        raise ValueError(f"config: output_multiplier = {output_multiplier} must be positive")
    softcap = draft_value(raw, "final_logit_softcapping")
    softcap = float(softcap) if softcap is not None and float(softcap) > 0 else None
    if "mask_token_id" not in dflash:
        raise ValueError("config: missing dflash_config.mask_token_id")
    block_size = raw.get("block_size", dflash.get("block_size"))
    if block_size is None:
        raise ValueError("config: missing block_size (top level or in dflash_config)")
    if int(block_size) < 2:
        raise ValueError(f"config: block_size {block_size} < 2 leaves no row to draft")

    if raw.get("num_target_layers") is not None:
        num_target_layers = int(raw["num_target_layers"])
    if dflash.get("target_layer_ids") is not None:
        target_layer_ids = [int(i) for i in dflash["target_layer_ids"]]
    elif num_target_layers is not None:
        target_layer_ids = default_target_layer_ids(num_target_layers, layers.num_hidden_layers)
    else:
        raise ValueError("config: no dflash_config.target_layer_ids and no num_target_layers to derive them")
    if not target_layer_ids:
        raise ValueError("config: dflash_config.target_layer_ids is empty")
    if num_target_layers is not None:
        bad = [i for i in target_layer_ids if not 0 <= i < num_target_layers]
        if bad:
            raise ValueError(f"config: target_layer_ids {bad} outside [0, {num_target_layers})")
    return DFlashConfig(layers=layers, block_size=int(block_size), mask_token_id=int(dflash["mask_token_id"]),
                        target_layer_ids=tuple(target_layer_ids), num_target_layers=num_target_layers,
                        layer_attention=layer_attention, output_multiplier=output_multiplier,
                        final_logit_softcapping=softcap)


def read_layer_attention(raw):
    """LayerAttention per drafter layer from layer_types, use_sliding_window, sliding_window and
    is_causal (module docstring)."""
    num_layers = int(raw.get("num_hidden_layers", 0))
    layer_types = raw.get("layer_types")
    use_sliding_window = bool(raw.get("use_sliding_window", False))
    if layer_types is None:
        if use_sliding_window:
            raise ValueError("config: use_sliding_window = true without an explicit layer_types list is not implemented")
        layer_types = ["full_attention"] * num_layers
    bad = sorted({t for t in layer_types if t not in ("full_attention", "sliding_attention")})
    if bad:
        raise ValueError(f"config: layer_types {bad} are not implemented (full_attention, sliding_attention are)")
    if len(layer_types) != num_layers:
        raise ValueError(f"config: {len(layer_types)} layer_types for {num_layers} layers")
    window = raw.get("sliding_window") if use_sliding_window else None
    if window is not None and int(window) < 1:
        raise ValueError(f"config: sliding_window {window} must be >= 1")
    is_causal = raw.get("is_causal")
    attention = []
    for kind in layer_types:
        sliding = kind == "sliding_attention"
        attention.append(LayerAttention(causal=sliding if is_causal is None else bool(is_causal),
                                        window=int(window) if sliding and window is not None else None))
    return tuple(attention)


@dataclass
class DFlashDrafter:
    config: DFlashConfig
    fc: np.ndarray            # [hidden, K * target_hidden]
    hidden_norm: np.ndarray   # [hidden]
    layers: list              # per layer {short name: ndarray}: qwen3.LAYER_TENSORS (+ q/k/v/o biases)
    norm: np.ndarray          # [hidden], the drafter's final norm (the target's is never used)


def load_drafter(drafter_dir, num_target_layers=None, architecture="DFlashDraftModel"):
    """Tensor names carry no "model." prefix: fc.weight, hidden_norm.weight, norm.weight,
    layers.{i}.<Qwen3 layer tensor>.weight. There is no embedding and no LM head."""
    config = read_dflash_config(drafter_dir, num_target_layers, architecture)
    c = config.layers
    tensors = load_safetensors(drafter_dir)
    # The drafter's hidden size is the target's (its input rows are target embedding rows), so
    # fc takes K * hidden_size.
    K = len(config.target_layer_ids)
    layers = [qwen3.take_layer(tensors, f"layers.{i}.", c) for i in range(c.num_hidden_layers)]
    return DFlashDrafter(
        config=config,
        fc=qwen3._take(tensors, "fc.weight", (c.hidden_size, K * c.hidden_size)),
        hidden_norm=qwen3._take(tensors, "hidden_norm.weight", (c.hidden_size,)),
        layers=layers,
        norm=qwen3._take(tensors, "norm.weight", (c.hidden_size,)),
    )


def check_pair(target, drafter, block_size):
    """The conditions under which this drafter can serve this target at this block size."""
    t, d = target.config, drafter.config
    if d.layers.vocab_size != t.vocab_size:
        raise ValueError(f"drafter vocab_size {d.layers.vocab_size} != target vocab_size {t.vocab_size}")
    if d.layers.hidden_size != t.hidden_size:
        raise ValueError(f"drafter hidden_size {d.layers.hidden_size} != target hidden_size {t.hidden_size}")
    if d.num_target_layers is not None and d.num_target_layers != t.num_hidden_layers:
        raise ValueError(f"drafter num_target_layers {d.num_target_layers} != target layers {t.num_hidden_layers}")
    bad = [i for i in d.target_layer_ids if not 0 <= i < t.num_hidden_layers]
    if bad:
        raise ValueError(f"target_layer_ids {bad} outside the target's [0, {t.num_hidden_layers})")
    # MASK is an embedding row beyond the tokenizer; it must exist in the table, and is never clamped.
    if not 0 <= d.mask_token_id < target.embed_tokens.shape[0]:
        raise ValueError(f"mask_token_id {d.mask_token_id} is not a row of the target embedding")
    if not 2 <= block_size <= d.block_size:
        raise ValueError(f"block size {block_size} outside [2, {d.block_size}] (the drafter's block_size)")


# ---------------------------------------------------------------------------------------------
# §2.1  Context features
# ---------------------------------------------------------------------------------------------

def context_features(drafter, target_hidden_states, rows):
    """c(t) = hidden_norm(fc . f(t)) for the token rows `rows`, where f(t) concatenates, in list
    order, the residual stream after each listed target layer (hidden_states[id + 1]: after both
    residual adds, never normalised)."""
    f = qwen3.gather_taps(target_hidden_states, drafter.config.target_layer_ids)[rows]
    return rms_norm(linear(f, drafter.fc), drafter.hidden_norm, drafter.config.layers.rms_norm_eps)


# ---------------------------------------------------------------------------------------------
# §2.2  KV injection
# ---------------------------------------------------------------------------------------------

def inject_context(layer, c, positions, config):
    """Kc = rope_at_t(k_norm(k_proj c)), Vc = v_proj c, with this layer's own weights (and its
    k/v biases when attention_bias: z-lab's drafter applies k_proj/v_proj, biases included, to the
    context rows). c is not passed through input_layernorm, and never enters the residual stream."""
    T = c.shape[0]
    k = qwen3.project(layer, "self_attn.k_proj", c).reshape(T, config.num_key_value_heads, config.head_dim)
    v = qwen3.project(layer, "self_attn.v_proj", c).reshape(T, config.num_key_value_heads, config.head_dim)
    k = rms_norm(k, layer["self_attn.k_norm"], config.rms_norm_eps)
    k = apply_rope(k, positions, config.rope_theta, config.rope_scaling)
    return k, v


class DraftContextCache:
    """Per drafter layer, the injected K/V rows of committed tokens, with their positions.
    It only ever receives committed tokens, so a rejected draft tail needs no rollback."""

    def __init__(self, drafter):
        c = drafter.config.layers
        empty = np.zeros((0, c.num_key_value_heads, c.head_dim), dtype=COMPUTE)
        self.positions = np.zeros(0, dtype=np.int64)
        self.keys = [empty] * c.num_hidden_layers
        self.values = [empty] * c.num_hidden_layers

    def append(self, drafter, c, positions):
        positions = np.asarray(positions, dtype=np.int64)
        for i, layer in enumerate(drafter.layers):
            k, v = inject_context(layer, c, positions, drafter.config.layers)
            self.keys[i] = np.concatenate([self.keys[i], k])
            self.values[i] = np.concatenate([self.values[i], v])
        self.positions = np.concatenate([self.positions, positions])

    def rows_before(self, start):
        """Per layer (keys, values) of the positions < start: all a block at `start` may see."""
        seen = self.positions < start
        return [(k[seen], v[seen]) for k, v in zip(self.keys, self.values)]

    def positions_before(self, start):
        """The positions of rows_before(start), in the same order."""
        return self.positions[self.positions < start]


def inject_committed(cache, drafter, target_hidden_states, positions):
    """Appends the context rows of committed tokens, whose target hidden states are rows
    `positions` of target_hidden_states (positions counted from the start of the sequence)."""
    positions = np.asarray(positions, dtype=np.int64)
    cache.append(drafter, context_features(drafter, target_hidden_states, positions), positions)


# ---------------------------------------------------------------------------------------------
# §2.3  One draft step
# ---------------------------------------------------------------------------------------------

def block_attention_mask(block_positions, context_positions, attention):
    """allowed[block row, key] over keys [context rows ; block rows]: everything for a full layer
    (bidirectional inside the block); causal and windowed for a sliding one (LayerAttention)."""
    query = np.asarray(block_positions)[:, None]
    key = np.concatenate([np.asarray(context_positions), np.asarray(block_positions)])[None, :]
    allowed = np.ones((query.shape[0], key.shape[1]), dtype=bool)
    if attention.causal:
        allowed &= key <= query
    if attention.window is not None:
        allowed &= query - key < attention.window
        if not attention.causal:
            allowed &= key - query < attention.window
    return allowed


def drafter_layer(layer, h, positions, context_kv, config, attention=LayerAttention(), context_positions=None):
    """One drafter layer over the block rows h [B, hidden]: a Qwen3 layer whose attention reads
    [context rows ; block rows], with no mask at all for a full layer. context_positions: those of
    the context rows (default 0, 1, ...: the cache holds every position before the block)."""
    n = rms_norm(h, layer["input_layernorm"], config.rms_norm_eps)
    q, k, v = qwen3.project_qkv(layer, n, positions, config)
    context_k, context_v = context_kv
    keys = np.concatenate([context_k, k])
    values = np.concatenate([context_v, v])
    if context_positions is None:
        context_positions = np.arange(context_k.shape[0])
    allowed = block_attention_mask(positions, context_positions, attention)
    attn = qwen3.grouped_query_attention(q, keys, values, allowed, config)
    h = h + qwen3.project(layer, "self_attn.o_proj", attn)
    m = rms_norm(h, layer["post_attention_layernorm"], config.rms_norm_eps)
    return h + swiglu_mlp(layer, m)


def drafter_forward(drafter, block_hidden, positions, context_kv_per_layer, context_positions=None):
    """The drafter stack over the block rows, then its own final norm. Returns [B, hidden]."""
    c = drafter.config.layers
    attention = drafter.config.layer_attention or (LayerAttention(),) * len(drafter.layers)
    h = block_hidden
    for layer, context_kv, layer_attention in zip(drafter.layers, context_kv_per_layer, attention):
        h = drafter_layer(layer, h, positions, context_kv, c, layer_attention, context_positions)
    return rms_norm(h, drafter.norm, c.rms_norm_eps)


def draft_block(target, drafter, cache, start, last_token, block_size):
    """Block [x, MASK * (B-1)] at positions start..start+B-1, embedded with the target's table,
    through the drafter, then the target's LM head on rows 1..B-1 (row j predicts the token at
    position start + j). Returns (draft tokens d_1..d_{B-1}, their logits [B-1, vocab])."""
    block_ids = [last_token] + [drafter.config.mask_token_id] * (block_size - 1)
    positions = np.arange(start, start + block_size)
    block_hidden = qwen3.embed(target, block_ids)
    final = drafter_forward(drafter, block_hidden, positions, cache.rows_before(start), cache.positions_before(start))
    logits = compute_logits(drafter.config, final[1:], target.lm_head)
    draft = [int(np.argmax(row)) for row in logits]  # lowest id on ties
    return draft, logits


def compute_logits(config, hidden, lm_head):
    """z-lab's compute_logits: the target's LM head, times output_multiplier, then soft-capped."""
    logits = linear(hidden, lm_head) * config.output_multiplier
    if config.final_logit_softcapping is not None:
        logits = np.tanh(logits / config.final_logit_softcapping) * config.final_logit_softcapping
    return logits


# ---------------------------------------------------------------------------------------------
# §2.4  Greedy verification and the loop
# ---------------------------------------------------------------------------------------------

def accept_longest_prefix(draft, target_choices):
    """a = the largest k with d_i == y_{i-1} for every i <= k (draft[i-1] is d_i)."""
    a = 0
    while a < len(draft) and draft[a] == target_choices[a]:
        a += 1
    return a


def speculative_generate(target, drafter, prompt, block_size, num_steps, max_new_tokens=None, draft=None):
    """Greedy DFlash decoding: the prefill's token, then num_steps draft-and-verify steps (fewer
    if max_new_tokens is reached; generated is then cut to max_new_tokens).
    Returns {"steps": [...], "generated": [...], "draft_logits": [steps, B-1, vocab],
    "cache": the DraftContextCache at the end (positions 0..start-1 of the next step)}.
    draft: the step's drafting, draft_block's signature (default: draft_block; DFlash2's selector
    walk in dflash2_reference.py)."""
    draft_step = draft or draft_block
    check_pair(target, drafter, block_size)
    prompt = list(prompt)
    cache = DraftContextCache(drafter)

    # Prefill: target over the prompt, first token from the last row, every prompt position injected.
    logits, hidden_states = targets.forward(target, prompt)
    generated = [int(np.argmax(logits[-1]))]
    inject_committed(cache, drafter, hidden_states, np.arange(len(prompt)))

    steps, draft_logits = [], []
    for _ in range(num_steps):
        if max_new_tokens is not None and len(generated) >= max_new_tokens:
            break
        # Every generated token but the last has been through the target; the last is x.
        in_target = prompt + generated[:-1]
        start, x = len(in_target), generated[-1]
        draft, logits_rows = draft_step(target, drafter, cache, start, x, block_size)
        draft_logits.append(logits_rows)

        # Verify: y_j = the target's choice at row start + j (the token for position start + j + 1).
        logits, hidden_states = targets.forward(target, in_target + [x] + draft)
        y = [int(np.argmax(logits[start + j])) for j in range(block_size)]
        a = accept_longest_prefix(draft, y)
        bonus = y[a]
        # Committed: x, d_1..d_a at positions start..start+a; the bonus is the next x.
        inject_committed(cache, drafter, hidden_states, np.arange(start, start + a + 1))
        generated += draft[:a] + [bonus]
        steps.append({"start": start, "x": x, "draft": draft, "accepted": a, "bonus": bonus})

    if max_new_tokens is not None:
        generated = generated[:max_new_tokens]
    vocab = target.config.vocab_size
    stacked = np.stack(draft_logits) if draft_logits else np.zeros((0, block_size - 1, vocab))
    return {"steps": steps, "generated": generated, "draft_logits": stacked, "cache": cache}


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(description="NumPy reference of greedy DFlash speculative decoding")
    parser.add_argument("--target", required=True, help="target checkpoint directory (Qwen3, Llama, Qwen3-MoE or gpt-oss)")
    parser.add_argument("--drafter", required=True, help="DFlash drafter directory")
    parser.add_argument("--tokens", required=True, help="comma-separated prompt token ids")
    parser.add_argument("--steps", required=True, type=int, help="number of draft-and-verify steps")
    parser.add_argument("--block-size", type=int, default=None, help="block size B (default: the drafter's)")
    parser.add_argument("--out", required=True, help="output prefix")
    args = parser.parse_args(argv)

    target = targets.load_target(args.target)
    drafter = load_drafter(args.drafter, num_target_layers=target.config.num_hidden_layers)
    block_size = drafter.config.block_size if args.block_size is None else args.block_size
    prompt = qwen3._int_list(args.tokens)
    if args.steps < 0:
        parser.error("--steps: must be >= 0")
    try:
        check_pair(target, drafter, block_size)
    except ValueError as e:
        parser.error(str(e))

    result = speculative_generate(target, drafter, prompt, block_size, args.steps)
    result["draft_logits"].astype("<f4").tofile(args.out + ".draft_logits.f32")
    info = {
        "steps": result["steps"],
        "generated": result["generated"],
        "prompt": prompt,
        "block_size": block_size,
        "vocab_size": target.config.vocab_size,
        "mask_token_id": drafter.config.mask_token_id,
        "target_layer_ids": list(drafter.config.target_layer_ids),
    }
    with open(args.out + ".json", "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
