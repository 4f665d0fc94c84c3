#!/usr/bin/python3
"""NumPy reference of a Llama 3.x target (LlamaForCausalLM, model_type "llama"), for checking
flashq against.

Written from the published architecture (Hugging Face transformers' modeling_llama.py and
configuration_llama.py, RoPE from modeling_rope_utils.py: see rope_reference.py), not from flashq's
code. A Llama layer is a Qwen3 layer (qwen3_reference.py, whose building blocks this file reuses)
with these differences:
  - no q_norm / k_norm: RoPE is applied to the projections directly;
  - attention_bias: q_proj, k_proj, v_proj and o_proj each add a bias (all four or none);
  - mlp_bias: gate_proj, up_proj and down_proj each add a bias;
  - RoPE may be scaled (rope_scaling of type "linear" or "llama3"; rope_theta 500000 in Llama 3);
  - config defaults: head_dim = hidden_size / num_attention_heads, num_key_value_heads =
    num_attention_heads, rope_theta 10000, rms_norm_eps 1e-6, untied embeddings.
Everything else (pre-norm residual blocks, RMSNorm, rotate-half RoPE, GQA with consecutive query
heads sharing a kv head, softmax scale 1/sqrt(head_dim), SwiGLU, final norm, lm_head or the tied
embedding) is the same computation.

Numerics as in qwen3_reference.py: weights float32 as stored, every activation float64; with
--kv-cache-dtype bf16, keys (after RoPE) and values rounded to bf16 as a bf16 cache stores them.

Command line: the same as qwen3_reference.py's (see there for the files written):
  /usr/bin/python3 tests/reference/llama_reference.py --model DIR --tokens 1,2,3 \
      [--greedy N] [--taps 0,2] [--kv-cache-dtype float32|bf16] --out PREFIX

Import: load_model(dir) -> LlamaModel; forward(model, tokens) -> (logits, hidden_states) with
hidden_states as in qwen3_reference.py; greedy_continuation(model, tokens, n).
"""

import json
import os
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3_reference as qwen3  # noqa: E402
import rope_reference as rope  # noqa: E402
from qwen3_reference import linear, rms_norm, apply_rope, causal_mask, grouped_query_attention, silu  # noqa: E402
from safetensors_numpy import load_safetensors  # noqa: E402


# ---------------------------------------------------------------------------------------------
# Configuration, read as Hugging Face's LlamaConfig reads config.json
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LlamaConfig:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: rope.RopeScaling   # None: plain RoPE
    vocab_size: int
    tie_word_embeddings: bool
    attention_bias: bool
    mlp_bias: bool


_REQUIRED_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


def read_llama_config(model_dir):
    with open(os.path.join(model_dir, "config.json"), "r", encoding="utf-8") as f:
        raw = json.load(f)
    for key in _REQUIRED_KEYS:
        if key not in raw:
            raise ValueError(f"config: missing {key}")
    if raw.get("model_type", "llama") != "llama":
        raise ValueError(f"config: model_type {raw['model_type']!r} is not llama")
    if raw.get("hidden_act", "silu") != "silu":
        raise ValueError(f"config: hidden_act {raw['hidden_act']!r} is not implemented (only silu)")

    num_heads = int(raw["num_attention_heads"])
    hidden = int(raw["hidden_size"])
    # HF LlamaConfig: a missing or null num_key_value_heads means MHA; a missing or null head_dim
    # is hidden_size / num_attention_heads (not Qwen3's fixed 128).
    num_kv_heads = raw.get("num_key_value_heads")
    num_kv_heads = num_heads if num_kv_heads is None else int(num_kv_heads)
    head_dim = raw.get("head_dim")
    head_dim = hidden // num_heads if head_dim is None else int(head_dim)
    rope_theta, rope_scaling = rope.read_rope(raw, default_theta=10000.0)
    config = LlamaConfig(
        hidden_size=hidden,
        intermediate_size=int(raw["intermediate_size"]),
        num_hidden_layers=int(raw["num_hidden_layers"]),
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        vocab_size=int(raw["vocab_size"]),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        attention_bias=bool(raw.get("attention_bias", False)),
        mlp_bias=bool(raw.get("mlp_bias", False)),
    )
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"config: num_attention_heads {num_heads} not a multiple of num_key_value_heads {num_kv_heads}")
    if head_dim % 2 != 0:
        raise ValueError(f"config: head_dim {head_dim} must be even for rotate-half RoPE")
    return config


# ---------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------

@dataclass
class LlamaModel:
    config: LlamaConfig
    embed_tokens: np.ndarray   # [vocab, hidden]
    layers: list               # per layer: {short name: float32 ndarray}; biases as "<proj>.bias"
    norm: np.ndarray           # [hidden]
    lm_head: np.ndarray        # [vocab, hidden]; the embedding itself when tied


ATTENTION_PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj")
MLP_PROJECTIONS = ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def layer_tensor_shapes(c):
    """{tensor name inside a layer (without ".weight"): shape}, biases included when configured."""
    q_width, kv_width = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    shapes = {
        "input_layernorm": (c.hidden_size,),
        "self_attn.q_proj": (q_width, c.hidden_size),
        "self_attn.k_proj": (kv_width, c.hidden_size),
        "self_attn.v_proj": (kv_width, c.hidden_size),
        "self_attn.o_proj": (c.hidden_size, q_width),
        "post_attention_layernorm": (c.hidden_size,),
        "mlp.gate_proj": (c.intermediate_size, c.hidden_size),
        "mlp.up_proj": (c.intermediate_size, c.hidden_size),
        "mlp.down_proj": (c.hidden_size, c.intermediate_size),
    }
    biased = (ATTENTION_PROJECTIONS if c.attention_bias else ()) + (MLP_PROJECTIONS if c.mlp_bias else ())
    for name in biased:
        shapes[name + ".bias"] = (shapes[name][0],)  # one bias per output row
    return shapes


def _file_name(short):
    return short if short.endswith(".bias") else short + ".weight"


def load_model(model_dir):
    c = read_llama_config(model_dir)
    tensors = load_safetensors(model_dir)
    shapes = layer_tensor_shapes(c)
    layers = [
        {short: qwen3._take(tensors, f"model.layers.{i}.{_file_name(short)}", shape) for short, shape in shapes.items()}
        for i in range(c.num_hidden_layers)
    ]
    vocab_shape = (c.vocab_size, c.hidden_size)
    embed = qwen3._take(tensors, "model.embed_tokens.weight", vocab_shape)
    # lm_head.weight when the file has it; otherwise the embedding, if the config ties them.
    if "lm_head.weight" in tensors:
        lm_head = qwen3._take(tensors, "lm_head.weight", vocab_shape)
    elif c.tie_word_embeddings:
        lm_head = embed
    else:
        raise KeyError("checkpoint: no lm_head.weight and tie_word_embeddings is false")
    return LlamaModel(config=c, embed_tokens=embed, layers=layers,
                      norm=qwen3._take(tensors, "model.norm.weight", (c.hidden_size,)), lm_head=lm_head)


# ---------------------------------------------------------------------------------------------
# The forward pass
# ---------------------------------------------------------------------------------------------

def project(layer, name, x):
    """The named projection of the layer, with its bias when the checkpoint has one."""
    return linear(x, layer[name], layer.get(name + ".bias"))


def project_qkv(layer, n, positions, config):
    """Queries, keys, values of the normalised rows n [T, hidden]: projections (+ biases), then
    RoPE (scaled as the config says) on q and k; no per-head norm; k and v as the KV cache stores
    them (qwen3_reference.as_stored). Shapes [T, heads, head_dim]."""
    c = config
    T = n.shape[0]
    q = project(layer, "self_attn.q_proj", n).reshape(T, c.num_attention_heads, c.head_dim)
    k = project(layer, "self_attn.k_proj", n).reshape(T, c.num_key_value_heads, c.head_dim)
    v = project(layer, "self_attn.v_proj", n).reshape(T, c.num_key_value_heads, c.head_dim)
    q = apply_rope(q, positions, c.rope_theta, c.rope_scaling)
    k = apply_rope(k, positions, c.rope_theta, c.rope_scaling)
    return q, qwen3.as_stored(k), qwen3.as_stored(v)


def swiglu_mlp(layer, m):
    """down(silu(gate(m)) * up(m)), each projection with its bias when present."""
    hidden = silu(project(layer, "mlp.gate_proj", m)) * project(layer, "mlp.up_proj", m)
    return project(layer, "mlp.down_proj", hidden)


def decoder_layer(layer, h, positions, config):
    """One pre-norm layer over the rows h [T, hidden], causal; returns the new residual stream."""
    n = rms_norm(h, layer["input_layernorm"], config.rms_norm_eps)
    q, k, v = project_qkv(layer, n, positions, config)
    attn = grouped_query_attention(q, k, v, causal_mask(h.shape[0]), config)
    h = h + project(layer, "self_attn.o_proj", attn)
    m = rms_norm(h, layer["post_attention_layernorm"], config.rms_norm_eps)
    return h + swiglu_mlp(layer, m)


def forward(model, tokens):
    """Full causal forward over tokens at positions 0..T-1; returns (logits [T, vocab],
    hidden_states) with hidden_states[i + 1] the raw residual stream after layer i."""
    c = model.config
    h = qwen3.embed(model, tokens)
    positions = np.arange(h.shape[0])
    hidden_states = [h]
    for layer in model.layers:
        h = decoder_layer(layer, h, positions, c)
        hidden_states.append(h)
    logits = linear(rms_norm(h, model.norm, c.rms_norm_eps), model.lm_head)
    return logits, hidden_states


def greedy_continuation(model, tokens, num_new):
    return qwen3.greedy_continuation(model, tokens, num_new, forward)


def main(argv=None):
    return qwen3.run_cli(argv, "Llama", load_model, forward)


if __name__ == "__main__":
    sys.exit(main())
