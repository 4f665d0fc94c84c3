#!/usr/bin/python3
"""NumPy reference of a gpt-oss target (GptOssForCausalLM, model_type "gpt_oss": gpt-oss-20b,
gpt-oss-120b), for checking flashq against.

Written from the published architecture (transformers' modeling_gpt_oss.py, configuration_gpt_oss.py,
integrations/mxfp4.py, modeling_rope_utils.py and masking_utils.py; docs/models.md lists what was
verified), not from flashq's code. Per layer, pre-norm:
  n = RMSNorm(h); q, k, v = q/k/v_proj(n) + biases (attention_bias, true by default); no q/k norm;
  rotate-half RoPE with YaRN scaling (yarn_reference.py; cos and sin times the attention factor);
  attention with a learned sink per head: the softmax runs over the row's allowed scores plus the
  logit self_attn.sinks[head], and the sink's share is dropped (the row's weights sum below 1);
  layer_types[i] "sliding_attention": query position t sees keys t - W + 1 .. t (W =
  sliding_window keys, itself included: HF's kv_idx > q_idx - W); "full_attention": keys 0 .. t;
  h += o_proj(attention) + bias
  m = RMSNorm(h); router logits = m router.weight^T + router.bias; the k = num_experts_per_tok
  largest logits, softmax over those k (moe_reference.py); each chosen expert e:
    gate_up = m W_gu[e]^T + b_gu[e]   (2I outputs, gate = even outputs, up = odd outputs)
    g = min(gate, limit), u = clamp(up, -limit, limit), limit = swiglu_limit (7.0)
    y = ((u + 1) * g * sigmoid(alpha * g)) W_down[e]^T + b_down[e], alpha = swiglu_alpha (1.702)
  h += sum over the k experts of weight * y
After the last layer: norm, then lm_head (untied by default).
Expert weights come as MXFP4 (mlp.experts.{gate_up,down}_proj_{blocks,scales}, decoded here by
mxfp4_reference.py) with bf16 biases (gate_up_proj_bias [E, 2I], down_proj_bias [E, H]), or as
the dequantized layout (mlp.experts.gate_up_proj [E, H, 2I], down_proj [E, I, H]: input-major,
x @ W) that transformers writes when it saves a dequantized model.
Config defaults (GptOssConfig): head_dim 64 (null: hidden / heads), num_key_value_heads 8 (null:
MHA), sliding_window 128, layer_types alternating sliding (even layers) and full (odd layers),
rms_norm_eps 1e-5, attention_bias true, untied embeddings, rope_theta 150000 and, when the file
states no RoPE settings, YaRN factor 32, beta_fast 32, beta_slow 1, truncate false, original 4096.

Numerics as in qwen3_reference.py: weights float32 as stored (MXFP4 decoded exactly), every
activation float64; with --kv-cache-dtype bf16, keys (after RoPE) and values rounded to bf16 as a
bf16 cache stores them.

Command line: the same as qwen3_reference.py's (see there for the files written):
  /usr/bin/python3 tests/reference/gptoss_reference.py --model DIR --tokens 1,2,3 \
      [--greedy N] [--taps 0,2] [--kv-cache-dtype float32|bf16] --out PREFIX
PREFIX.json also holds "moe" (as qwen3_moe_reference.py's, margins between router logits).

Import: load_model(dir) -> GptOssModel; forward(model, tokens) -> (logits, hidden_states);
forward_with_routing(model, tokens) -> (logits, hidden_states, RoutingRecord).
"""

import json
import os
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_reference as moe  # noqa: E402
import mxfp4_reference as mxfp4  # noqa: E402
import qwen3_reference as qwen3  # noqa: E402
import yarn_reference as yarn  # noqa: E402
from qwen3_reference import COMPUTE, linear, rms_norm, apply_rope  # noqa: E402
from safetensors_numpy import load_safetensors  # noqa: E402

# GptOssConfig's RoPE when config.json states none.
DEFAULT_ROPE = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096}
LAYER_TYPES = ("sliding_attention", "full_attention")


@dataclass(frozen=True)
class GptOssConfig:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: object          # yarn_reference.YarnScaling, or a plain / linear / llama3 kind
    vocab_size: int
    tie_word_embeddings: bool
    attention_bias: bool
    num_local_experts: int
    num_experts_per_tok: int
    sliding_window: int
    layer_types: tuple
    swiglu_limit: float
    swiglu_alpha: float

    def window(self, layer_idx):
        """Keys a query of this layer sees (itself included), None for full attention."""
        return self.sliding_window if self.layer_types[layer_idx] == "sliding_attention" else None


_REQUIRED_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                  "num_experts_per_tok")


def read_gptoss_config(model_dir):
    with open(os.path.join(model_dir, "config.json"), "r", encoding="utf-8") as f:
        raw = json.load(f)
    if raw.get("model_type", "gpt_oss") != "gpt_oss":
        raise ValueError(f"config: model_type {raw['model_type']!r} is not gpt_oss")
    for key in _REQUIRED_KEYS:
        if key not in raw:
            raise ValueError(f"config: missing {key}")
    num_experts = raw.get("num_local_experts", raw.get("num_experts"))
    if num_experts is None:
        raise ValueError("config: missing num_local_experts")
    quant = (raw.get("quantization_config") or {}).get("quant_method")
    if quant not in (None, "mxfp4"):
        raise ValueError(f"config: quantization_config.quant_method {quant!r} is not implemented (only mxfp4)")

    hidden, num_heads, L = int(raw["hidden_size"]), int(raw["num_attention_heads"]), int(raw["num_hidden_layers"])
    num_kv_heads = raw.get("num_key_value_heads", 8)
    head_dim = raw.get("head_dim", 64)
    layer_types = raw.get("layer_types")
    if layer_types is None:
        layer_types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(L)]
    bad = sorted({t for t in layer_types if t not in LAYER_TYPES})
    if bad:
        raise ValueError(f"config: layer_types {bad} are not implemented (sliding_attention, full_attention are)")
    if len(layer_types) != L:
        raise ValueError(f"config: {len(layer_types)} layer_types for {L} layers")
    sliding_window = raw.get("sliding_window", 128)
    if "sliding_attention" in layer_types and (sliding_window is None or int(sliding_window) < 1):
        raise ValueError(f"config: sliding_attention layers need sliding_window >= 1 (got {sliding_window})")
    rope_theta, rope_scaling = yarn.read_rope_with_yarn(raw, default_theta=150000.0, default_params=DEFAULT_ROPE)
    config = GptOssConfig(
        hidden_size=hidden,
        intermediate_size=int(raw["intermediate_size"]),
        num_hidden_layers=L,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads if num_kv_heads is None else int(num_kv_heads),
        head_dim=hidden // num_heads if head_dim is None else int(head_dim),
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-5)),
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        vocab_size=int(raw["vocab_size"]),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        attention_bias=bool(raw.get("attention_bias", True)),
        num_local_experts=int(num_experts),
        num_experts_per_tok=int(raw["num_experts_per_tok"]),
        sliding_window=None if sliding_window is None else int(sliding_window),
        layer_types=tuple(layer_types),
        swiglu_limit=float(raw.get("swiglu_limit", 7.0)),
        swiglu_alpha=float(raw.get("swiglu_alpha", 1.702)),
    )
    if config.num_attention_heads % config.num_key_value_heads != 0:
        raise ValueError(f"config: num_attention_heads {num_heads} not a multiple of num_key_value_heads "
                         f"{config.num_key_value_heads}")
    if config.head_dim % 2 != 0:
        raise ValueError(f"config: head_dim {config.head_dim} must be even for rotate-half RoPE")
    if not 1 <= config.num_experts_per_tok <= config.num_local_experts:
        raise ValueError(f"config: num_experts_per_tok {config.num_experts_per_tok} outside [1, {config.num_local_experts}]")
    return config


# ---------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------

@dataclass
class GptOssModel:
    config: GptOssConfig
    embed_tokens: np.ndarray   # [vocab, hidden]
    layers: list               # per layer {short name: array}, experts decoded (see take_layer)
    norm: np.ndarray
    lm_head: np.ndarray


def _attention_shapes(c):
    q_width, kv_width = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    shapes = {
        "input_layernorm.weight": (c.hidden_size,),
        "self_attn.q_proj.weight": (q_width, c.hidden_size),
        "self_attn.k_proj.weight": (kv_width, c.hidden_size),
        "self_attn.v_proj.weight": (kv_width, c.hidden_size),
        "self_attn.o_proj.weight": (c.hidden_size, q_width),
        "self_attn.sinks": (c.num_attention_heads,),
        "post_attention_layernorm.weight": (c.hidden_size,),
        "mlp.router.weight": (c.num_local_experts, c.hidden_size),
        "mlp.router.bias": (c.num_local_experts,),
    }
    if c.attention_bias:
        shapes.update({"self_attn.q_proj.bias": (q_width,), "self_attn.k_proj.bias": (kv_width,),
                       "self_attn.v_proj.bias": (kv_width,), "self_attn.o_proj.bias": (c.hidden_size,)})
    return shapes


def _take_packed(tensors, name, shape):
    t = qwen3._take(tensors, name, shape)
    if t.dtype != np.uint8:
        raise ValueError(f"checkpoint: {name} must be stored as U8 (packed MXFP4)")
    return t


def take_experts(tensors, prefix, c):
    """{"gate_up" [E, 2I, H], "gate_up_bias" [E, 2I], "down" [E, H, I], "down_bias" [E, H]} as
    float64 row-major [out, in] matrices, from MXFP4 blocks or from the dequantized layout."""
    E, H, I = c.num_local_experts, c.hidden_size, c.intermediate_size
    p = prefix + "mlp.experts."
    experts = {"gate_up_bias": qwen3._take(tensors, p + "gate_up_proj_bias", (E, 2 * I)).astype(COMPUTE),
               "down_bias": qwen3._take(tensors, p + "down_proj_bias", (E, H)).astype(COMPUTE)}
    if p + "gate_up_proj_blocks" in tensors:
        shapes = mxfp4.expected_shapes(E, H, I)
        experts["gate_up"] = mxfp4.decode_mxfp4(_take_packed(tensors, p + "gate_up_proj_blocks", shapes["gate_up_proj_blocks"]),
                                                _take_packed(tensors, p + "gate_up_proj_scales", shapes["gate_up_proj_scales"]))
        experts["down"] = mxfp4.decode_mxfp4(_take_packed(tensors, p + "down_proj_blocks", shapes["down_proj_blocks"]),
                                             _take_packed(tensors, p + "down_proj_scales", shapes["down_proj_scales"]))
    elif p + "gate_up_proj" in tensors:
        # GptOssExperts' own parameters are input-major (gate_up = x @ gate_up_proj): transpose.
        experts["gate_up"] = qwen3._take(tensors, p + "gate_up_proj", (E, H, 2 * I)).astype(COMPUTE).transpose(0, 2, 1)
        experts["down"] = qwen3._take(tensors, p + "down_proj", (E, I, H)).astype(COMPUTE).transpose(0, 2, 1)
    else:
        raise KeyError(f"checkpoint: missing tensor {p}gate_up_proj_blocks (or the dequantized {p}gate_up_proj)")
    return experts


def take_layer(tensors, prefix, c):
    layer = {name: qwen3._take(tensors, prefix + name, shape) for name, shape in _attention_shapes(c).items()}
    if not c.attention_bias and prefix + "self_attn.q_proj.bias" in tensors:
        raise ValueError(f"checkpoint: {prefix}self_attn.q_proj.bias present but attention_bias is false")
    layer["experts"] = take_experts(tensors, prefix, c)
    return layer


def load_model(model_dir):
    c = read_gptoss_config(model_dir)
    tensors = load_safetensors(model_dir)
    layers = [take_layer(tensors, f"model.layers.{i}.", c) for i in range(c.num_hidden_layers)]
    vocab_shape = (c.vocab_size, c.hidden_size)
    embed = qwen3._take(tensors, "model.embed_tokens.weight", vocab_shape)
    if "lm_head.weight" in tensors:
        lm_head = qwen3._take(tensors, "lm_head.weight", vocab_shape)
    elif c.tie_word_embeddings:
        lm_head = embed
    else:
        raise KeyError("checkpoint: no lm_head.weight and tie_word_embeddings is false")
    return GptOssModel(config=c, embed_tokens=embed, layers=layers,
                       norm=qwen3._take(tensors, "model.norm.weight", (c.hidden_size,)), lm_head=lm_head)


# ---------------------------------------------------------------------------------------------
# The forward pass
# ---------------------------------------------------------------------------------------------

def attention_mask(num_rows, window):
    """allowed[query, key]: causal, and with a window W only the W most recent keys (itself included)."""
    q, k = np.arange(num_rows)[:, None], np.arange(num_rows)[None, :]
    allowed = k <= q
    return allowed if window is None else allowed & (q - k < window)


def attention_with_sinks(q, k, v, allowed, sinks, c):
    """q [T, heads, hd], k/v [T, kv_heads, hd] -> [T, heads * hd]; the softmax of head h runs over
    the allowed scores and sinks[h], whose share is then dropped. Consecutive query heads share a
    kv head (repeat_kv order)."""
    group = c.num_attention_heads // c.num_key_value_heads
    scale = 1.0 / np.sqrt(c.head_dim)
    out = np.empty((q.shape[0], c.num_attention_heads, c.head_dim), dtype=COMPUTE)
    for h in range(c.num_attention_heads):
        kv = h // group
        scores = np.where(allowed, (q[:, h, :] @ k[:, kv, :].T) * scale, -np.inf)
        with_sink = np.concatenate([scores, np.full((scores.shape[0], 1), float(sinks[h]))], axis=-1)
        with_sink -= with_sink.max(axis=-1, keepdims=True)
        weights = np.exp(with_sink)
        weights /= weights.sum(axis=-1, keepdims=True)
        out[:, h, :] = weights[:, :-1] @ v[:, kv, :]
    return out.reshape(q.shape[0], c.num_attention_heads * c.head_dim)


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # = 1 / (1 + e^-x), without overflow for large |x|


def clamped_swiglu_expert(experts, e, x, c):
    """One expert on its rows x [n, hidden]: interleaved gate/up, clamped SwiGLU with (up + 1)."""
    gate_up = x @ experts["gate_up"][e].T + experts["gate_up_bias"][e]
    gate, up = gate_up[:, 0::2], gate_up[:, 1::2]
    gate = np.minimum(gate, c.swiglu_limit)
    up = np.clip(up, -c.swiglu_limit, c.swiglu_limit)
    glu = gate * sigmoid(c.swiglu_alpha * gate)
    return ((up + 1.0) * glu) @ experts["down"][e].T + experts["down_bias"][e]


def moe_block(layer, m, c):
    """Returns (out [T, hidden], experts [T, k], margins [T])."""
    router_logits = linear(m, layer["mlp.router.weight"], layer["mlp.router.bias"])
    experts, weights, margin = moe.route_top_k_then_softmax(router_logits, c.num_experts_per_tok)
    out = moe.mix_experts(m, experts, weights, lambda e, rows: clamped_swiglu_expert(layer["experts"], e, rows, c))
    return out, experts, margin


def decoder_layer(layer, h, positions, c, layer_idx, record):
    T = h.shape[0]
    n = rms_norm(h, layer["input_layernorm.weight"], c.rms_norm_eps)
    q = linear(n, layer["self_attn.q_proj.weight"], layer.get("self_attn.q_proj.bias")).reshape(T, c.num_attention_heads, c.head_dim)
    k = linear(n, layer["self_attn.k_proj.weight"], layer.get("self_attn.k_proj.bias")).reshape(T, c.num_key_value_heads, c.head_dim)
    v = linear(n, layer["self_attn.v_proj.weight"], layer.get("self_attn.v_proj.bias")).reshape(T, c.num_key_value_heads, c.head_dim)
    q = apply_rope(q, positions, c.rope_theta, c.rope_scaling)
    k = apply_rope(k, positions, c.rope_theta, c.rope_scaling)
    k, v = qwen3.as_stored(k), qwen3.as_stored(v)  # as the KV cache holds them (--kv-cache-dtype)
    attn = attention_with_sinks(q, k, v, attention_mask(T, c.window(layer_idx)), layer["self_attn.sinks"], c)
    h = h + linear(attn, layer["self_attn.o_proj.weight"], layer.get("self_attn.o_proj.bias"))
    m = rms_norm(h, layer["post_attention_layernorm.weight"], c.rms_norm_eps)
    out, experts, margin = moe_block(layer, m, c)
    record.add(layer_idx, experts, margin)
    return h + out


def forward_with_routing(model, tokens):
    return moe.forward_with_routing(model, tokens, decoder_layer)


def forward(model, tokens):
    """Full causal forward over tokens at positions 0..T-1; returns (logits [T, vocab],
    hidden_states) with hidden_states[i + 1] the raw residual stream after layer i."""
    logits, hidden_states, _ = forward_with_routing(model, tokens)
    return logits, hidden_states


def greedy_continuation(model, tokens, num_new):
    return qwen3.greedy_continuation(model, tokens, num_new, forward)


def routing_info(model, tokens):
    return {"moe": forward_with_routing(model, tokens)[2].as_json()}


def main(argv=None):
    return qwen3.run_cli(argv, "gpt-oss", load_model, forward, extra_info=routing_info)


if __name__ == "__main__":
    sys.exit(main())
