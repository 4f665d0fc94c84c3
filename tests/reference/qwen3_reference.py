#!/usr/bin/python3
"""NumPy reference of the Qwen3 dense target (docs/dflash.md section 1), for checking flashq against.

Written to be read next to docs/dflash.md: one function per step, in the order the section gives them,
no KV cache, no fusion. Slow on purpose; correctness is the only goal.

Numerics: weights are kept as float32 (exact for bf16/f16/f32 checkpoints, and half the memory of
float64); every activation and every accumulation is float64, weights being widened at the point
of use. The result is then an accurate answer for the stored weights, not a model of any
particular low-precision kernel: flashq's outputs are compared to it with a tolerance.

Command line:
  /usr/bin/python3 tests/reference/qwen3_reference.py --model DIR --tokens 1,2,3 \
      [--greedy N] [--taps 0,2] [--kv-cache-dtype float32|bf16] --out PREFIX
(--kv-cache-dtype bf16: keys and values rounded as a bf16 KV cache stores them; float32 by default)
writes
  PREFIX.logits.f32  little-endian float32 [len(tokens), vocab_size], row-major: logits of every
                     position of one causal forward over the tokens (positions 0..T-1).
  PREFIX.json        {"vocab_size", "rows", "hidden_size", "tokens", "greedy", "taps"}; "greedy" is
                     the N greedy next tokens (null without --greedy); "taps" describes the tap file
                     (null without --taps).
  PREFIX.taps.f32    with --taps: little-endian float32 [len(tokens), len(taps) * hidden_size]: for
                     each token, the residual stream after each listed layer (0-based, after both
                     residual adds, not normalised), concatenated in list order.

RoPE: plain, or scaled ("linear", "llama3") when config.json says so, as rope_reference.py reads it.

Import: load_model(dir) -> Qwen3Model; forward(model, tokens) -> (logits, hidden_states) where
hidden_states[0] is the embedding output and hidden_states[i + 1] the residual stream after layer i.
Note one difference from Hugging Face: HF's hidden_states[-1] is the *normalised* output of the
last layer; here every entry, the last included, is the raw residual stream (what a tap is).
"""

import argparse
import json
import os
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_numpy import load_safetensors  # noqa: E402
import rope_reference as rope  # noqa: E402
import yarn_reference as yarn  # noqa: E402

COMPUTE = np.float64


# ---------------------------------------------------------------------------------------------
# Configuration, read as Hugging Face's Qwen3Config reads config.json
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Qwen3Config:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    vocab_size: int
    tie_word_embeddings: bool
    rope_scaling: rope.RopeScaling = None  # None: plain RoPE
    attention_bias: bool = False           # q/k/v/o biases (HF Qwen3Attention's bias=attention_bias)


# Keys without which the shapes are unknowable; HF has defaults for them (those of some other
# model), but a reference that silently invents a model size would hide a broken config.
_REQUIRED_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


def read_qwen3_config(model_dir):
    with open(os.path.join(model_dir, "config.json"), "r", encoding="utf-8") as f:
        return qwen3_config_from_dict(json.load(f))


def qwen3_config_from_dict(raw, read_rope=rope.read_rope):
    """The Qwen3Config of a config.json dict. read_rope: how RoPE settings are read (a DFlash
    drafter's may name YaRN, yarn_reference.read_rope_with_yarn)."""
    for key in _REQUIRED_KEYS:
        if key not in raw:
            raise ValueError(f"config: missing {key}")
    # Features the section-1 forward does not have are refused, naming the key, rather than ignored.
    if raw.get("use_sliding_window", False):
        raise ValueError("config: use_sliding_window = true is not implemented")
    if any(t != "full_attention" for t in raw.get("layer_types") or []):
        raise ValueError("config: layer_types other than full_attention are not implemented")
    if raw.get("hidden_act", "silu") != "silu":
        raise ValueError(f"config: hidden_act {raw['hidden_act']!r} is not implemented (only silu)")

    # RoPE settings: plain, linear or llama3 (rope_reference.py); 10000 is HF's default theta.
    rope_theta, rope_scaling = read_rope(raw, default_theta=10000.0)
    num_heads = int(raw["num_attention_heads"])
    # HF: a missing num_key_value_heads takes the class default (32), an explicit null means MHA.
    num_kv_heads = raw.get("num_key_value_heads", 32)
    num_kv_heads = num_heads if num_kv_heads is None else int(num_kv_heads)
    config = Qwen3Config(
        hidden_size=int(raw["hidden_size"]),
        intermediate_size=int(raw["intermediate_size"]),
        num_hidden_layers=int(raw["num_hidden_layers"]),
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        # Read, never derived from hidden_size / heads (Qwen3 models differ); 128 is HF's default.
        head_dim=int(raw.get("head_dim", 128)),
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        rope_theta=rope_theta,
        vocab_size=int(raw["vocab_size"]),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        rope_scaling=rope_scaling,
        attention_bias=bool(raw.get("attention_bias", False)),
    )
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"config: num_attention_heads {num_heads} not a multiple of num_key_value_heads {num_kv_heads}")
    if config.head_dim % 2 != 0:
        raise ValueError(f"config: head_dim {config.head_dim} must be even for rotate-half RoPE")
    return config


# ---------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------

@dataclass
class Qwen3Model:
    config: Qwen3Config
    embed_tokens: np.ndarray   # [vocab, hidden]
    layers: list               # per layer: {short name: float32 ndarray}, names as below
    norm: np.ndarray           # [hidden]
    lm_head: np.ndarray        # [vocab, hidden]; the embedding itself when tied


LAYER_TENSORS = (
    "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "self_attn.q_norm", "self_attn.k_norm", "post_attention_layernorm",
    "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
)


def _expected_layer_shapes(c):
    q_width, kv_width = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    return {
        "input_layernorm": (c.hidden_size,),
        "self_attn.q_proj": (q_width, c.hidden_size),
        "self_attn.k_proj": (kv_width, c.hidden_size),
        "self_attn.v_proj": (kv_width, c.hidden_size),
        "self_attn.o_proj": (c.hidden_size, q_width),
        "self_attn.q_norm": (c.head_dim,),
        "self_attn.k_norm": (c.head_dim,),
        "post_attention_layernorm": (c.hidden_size,),
        "mlp.gate_proj": (c.intermediate_size, c.hidden_size),
        "mlp.up_proj": (c.intermediate_size, c.hidden_size),
        "mlp.down_proj": (c.hidden_size, c.intermediate_size),
    }


ATTENTION_PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj")


def take_layer(tensors, prefix, config):
    """One layer's tensors {short name: array} under `prefix` ("model.layers.3." or "layers.3."),
    with "<projection>.bias" for q/k/v/o when the config has attention_bias."""
    shapes = _expected_layer_shapes(config)
    layer = {short: _take(tensors, f"{prefix}{short}.weight", shapes[short]) for short in LAYER_TENSORS}
    if config.attention_bias:
        for proj in ATTENTION_PROJECTIONS:
            name = f"{prefix}{proj}.bias"
            if name not in tensors:
                raise ValueError(f"checkpoint: attention_bias is true but {name} is missing")
            layer[proj + ".bias"] = _take(tensors, name, shapes[proj][:1])
    return layer


def _take(tensors, name, shape):
    if name not in tensors:
        raise KeyError(f"checkpoint: missing tensor {name}")
    t = tensors[name]
    if t.shape != tuple(shape):
        raise ValueError(f"checkpoint: {name} has shape {list(t.shape)}, config implies {list(shape)}")
    return t


def load_model(model_dir):
    config = read_qwen3_config(model_dir)
    tensors = load_safetensors(model_dir)
    c = config
    vocab_shape = (c.vocab_size, c.hidden_size)
    layers = [take_layer(tensors, f"model.layers.{i}.", c) for i in range(c.num_hidden_layers)]
    embed = _take(tensors, "model.embed_tokens.weight", vocab_shape)
    # docs/dflash.md: lm_head.weight when the file has it; otherwise the embedding, if the config ties them.
    if "lm_head.weight" in tensors:
        lm_head = _take(tensors, "lm_head.weight", vocab_shape)
    elif c.tie_word_embeddings:
        lm_head = embed
    else:
        raise KeyError("checkpoint: no lm_head.weight and tie_word_embeddings is false")
    return Qwen3Model(config=c, embed_tokens=embed, layers=layers,
                      norm=_take(tensors, "model.norm.weight", (c.hidden_size,)), lm_head=lm_head)


# ---------------------------------------------------------------------------------------------
# The forward pass, docs/dflash.md section 1, step by step
# ---------------------------------------------------------------------------------------------

def linear(x, weight, bias=None):
    """y = x W^T (+ b) with W stored [out, in] (each output row is W times the input row)."""
    y = x @ weight.astype(COMPUTE).T
    return y if bias is None else y + bias.astype(COMPUTE)


def project(layer, name, x):
    """The named projection of a layer dict, with its bias ("<name>.bias") when it has one."""
    return linear(x, layer[name], layer.get(name + ".bias"))


def rms_norm(x, weight, eps):
    """x * 1/sqrt(mean(x^2) + eps) * w over the last axis."""
    mean_square = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(mean_square + eps) * weight.astype(COMPUTE)


def apply_rope(x, positions, theta, scaling=None):
    """Rotate-half RoPE on x [T, heads, head_dim]: element i and element i + head_dim/2 form the
    pair rotated by angle positions[t] * inv_freq[i] (inv_freq of rope_reference.py: plain, or
    scaled when `scaling` is given; YaRN's, of rope_reference.py or yarn_reference.py, with the
    attention factor that also multiplies cos and sin)."""
    head_dim = x.shape[-1]
    half = head_dim // 2
    inv_freq, magnitude = yarn.rope_frequencies(head_dim, theta, scaling)
    angle = np.asarray(positions, dtype=COMPUTE)[:, None] * inv_freq[None, :]
    cos = magnitude * np.cos(angle)[:, None, :]  # [T, 1, half]: the same rotation for every head
    sin = magnitude * np.sin(angle)[:, None, :]
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


# The KV cache's element type: "float32" keeps keys and values as computed; "bf16" rounds them
# as a bf16 cache stores them (nearest even), before attention reads them (--kv-cache-dtype).
KV_CACHE_DTYPE = "float32"


def round_to_bf16(x):
    """x rounded to the nearest bf16 (ties to even), through float32 as the runtime computes it."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64).reshape(np.shape(x))


def as_stored(x):
    return round_to_bf16(x) if KV_CACHE_DTYPE == "bf16" else x


def project_qkv(layer, n, positions, config):
    """Queries, keys, values of the normalised rows n [T, hidden] (projections plus their biases
    when attention_bias): q_norm/k_norm per head (one weight shared by all heads), then RoPE; v is
    never normalised. Shapes [T, heads, head_dim]."""
    c = config
    T = n.shape[0]
    q = project(layer, "self_attn.q_proj", n).reshape(T, c.num_attention_heads, c.head_dim)
    k = project(layer, "self_attn.k_proj", n).reshape(T, c.num_key_value_heads, c.head_dim)
    v = project(layer, "self_attn.v_proj", n).reshape(T, c.num_key_value_heads, c.head_dim)
    q = rms_norm(q, layer["self_attn.q_norm"], c.rms_norm_eps)
    k = rms_norm(k, layer["self_attn.k_norm"], c.rms_norm_eps)
    q = apply_rope(q, positions, c.rope_theta, c.rope_scaling)
    k = apply_rope(k, positions, c.rope_theta, c.rope_scaling)
    return q, as_stored(k), as_stored(v)


def causal_mask(num_rows):
    """allowed[query, key]: a row sees itself and earlier rows only."""
    return np.tril(np.ones((num_rows, num_rows), dtype=bool))


def grouped_query_attention(q, k, v, allowed, config):
    """q [Tq, heads, hd], k/v [Tk, kv_heads, hd], allowed [Tq, Tk] -> [Tq, heads * hd].
    Query head h reads kv head h // (heads / kv_heads): consecutive query heads share one kv head
    (HF's repeat_kv order)."""
    c = config
    group = c.num_attention_heads // c.num_key_value_heads
    scale = 1.0 / np.sqrt(c.head_dim)
    out = np.empty((q.shape[0], c.num_attention_heads, c.head_dim), dtype=COMPUTE)
    for h in range(c.num_attention_heads):
        kv = h // group
        scores = (q[:, h, :] @ k[:, kv, :].T) * scale
        scores = np.where(allowed, scores, -np.inf)
        scores -= scores.max(axis=-1, keepdims=True)  # softmax is shift-invariant; avoids overflow
        weights = np.exp(scores)
        weights /= weights.sum(axis=-1, keepdims=True)
        out[:, h, :] = weights @ v[:, kv, :]
    return out.reshape(q.shape[0], c.num_attention_heads * c.head_dim)


def silu(x):
    return x / (1.0 + np.exp(-x))


def swiglu_mlp(layer, m):
    """down(silu(gate(m)) * up(m))."""
    return linear(silu(linear(m, layer["mlp.gate_proj"])) * linear(m, layer["mlp.up_proj"]), layer["mlp.down_proj"])


def decoder_layer(layer, h, positions, config):
    """One pre-norm layer over the rows h [T, hidden], causal; returns the new residual stream."""
    n = rms_norm(h, layer["input_layernorm"], config.rms_norm_eps)
    q, k, v = project_qkv(layer, n, positions, config)
    attn = grouped_query_attention(q, k, v, causal_mask(h.shape[0]), config)
    h = h + project(layer, "self_attn.o_proj", attn)
    m = rms_norm(h, layer["post_attention_layernorm"], config.rms_norm_eps)
    return h + swiglu_mlp(layer, m)


def embed(model, tokens):
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.ndim != 1 or tokens.size == 0:
        raise ValueError("tokens: need a non-empty 1-D list")
    if tokens.min() < 0 or tokens.max() >= model.embed_tokens.shape[0]:
        raise ValueError(f"tokens: ids must lie in [0, {model.embed_tokens.shape[0]})")
    return model.embed_tokens[tokens].astype(COMPUTE)


def forward(model, tokens):
    """Full causal forward over tokens at positions 0..T-1.
    Returns (logits [T, vocab] float64, hidden_states): hidden_states[0] = embedding output,
    hidden_states[i + 1] = residual stream after layer i (not normalised, the last one included)."""
    c = model.config
    h = embed(model, tokens)
    positions = np.arange(h.shape[0])
    hidden_states = [h]
    for layer in model.layers:
        h = decoder_layer(layer, h, positions, c)
        hidden_states.append(h)
    final = rms_norm(h, model.norm, c.rms_norm_eps)
    logits = linear(final, model.lm_head)
    return logits, hidden_states


def greedy_continuation(model, tokens, num_new, forward_fn=None):
    """The num_new greedy next tokens. Each step re-runs the full forward over everything so far:
    no cache to get wrong. Ties go to the lowest id (np.argmax, like torch.argmax).
    forward_fn: the family's forward (this file's by default)."""
    forward_fn = forward_fn or forward
    sequence = list(tokens)
    new = []
    for _ in range(num_new):
        logits, _ = forward_fn(model, sequence)
        next_id = int(np.argmax(logits[-1]))
        new.append(next_id)
        sequence.append(next_id)
    return new


def gather_taps(hidden_states, tap_layers):
    """[T, len(taps) * hidden]: residual after each tapped layer (HF hidden_states[id + 1]) in list order."""
    return np.concatenate([hidden_states[i + 1] for i in tap_layers], axis=-1)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

def _int_list(text):
    return [int(x) for x in text.split(",") if x.strip() != ""]


def run_cli(argv, family, load_model_fn, forward_fn, extra_info=None):
    """The command line of module docstring, shared by the families (llama_reference.py too).
    extra_info(model, tokens): more entries for PREFIX.json (the MoE families' routing)."""
    parser = argparse.ArgumentParser(description=f"NumPy reference forward of a {family} checkpoint")
    parser.add_argument("--model", required=True, help="checkpoint directory (config.json + safetensors)")
    parser.add_argument("--tokens", required=True, help="comma-separated token ids")
    parser.add_argument("--greedy", type=int, default=None, help="also produce N greedy next tokens")
    parser.add_argument("--taps", default=None, help="comma-separated 0-based layer ids to tap")
    parser.add_argument("--out", required=True, help="output prefix")
    parser.add_argument("--kv-cache-dtype", choices=["float32", "bf16"], default="float32",
                        help="bf16: keys and values rounded as a bf16 cache stores them")
    args = parser.parse_args(argv)
    global KV_CACHE_DTYPE
    KV_CACHE_DTYPE = args.kv_cache_dtype

    model = load_model_fn(args.model)
    c = model.config
    tokens = _int_list(args.tokens)
    taps = _int_list(args.taps) if args.taps is not None else None
    if taps is not None:
        if not taps:
            parser.error("--taps: empty list")
        bad = [i for i in taps if not 0 <= i < c.num_hidden_layers]
        if bad:
            parser.error(f"--taps: layers {bad} outside [0, {c.num_hidden_layers})")
    if args.greedy is not None and args.greedy < 0:
        parser.error("--greedy: must be >= 0")

    logits, hidden_states = forward_fn(model, tokens)
    logits.astype("<f4").tofile(args.out + ".logits.f32")

    info = {
        "vocab_size": c.vocab_size,
        "rows": len(tokens),
        "hidden_size": c.hidden_size,
        "tokens": tokens,
        "greedy": greedy_continuation(model, tokens, args.greedy, forward_fn) if args.greedy is not None else None,
        "taps": None,
    }
    if taps is not None:
        gather_taps(hidden_states, taps).astype("<f4").tofile(args.out + ".taps.f32")
        info["taps"] = {"layers": taps, "shape": [len(tokens), len(taps) * c.hidden_size],
                        "file": os.path.basename(args.out) + ".taps.f32"}
    if extra_info is not None:
        info.update(extra_info(model, tokens))
    with open(args.out + ".json", "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1)
    return 0


def main(argv=None):
    return run_cli(argv, "Qwen3", load_model, forward)


if __name__ == "__main__":
    sys.exit(main())
