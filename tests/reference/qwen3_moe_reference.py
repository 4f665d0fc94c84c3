#!/usr/bin/python3
"""NumPy reference of a Qwen3-MoE target (Qwen3MoeForCausalLM, model_type "qwen3_moe": Qwen3-30B-A3B,
Qwen3-Coder-30B-A3B), for checking flashq against.

Written from the published architecture (transformers' modeling_qwen3_moe.py, configuration_qwen3_moe.py,
modular_qwen3_moe.py with Qwen2MoeTopKRouter; docs/models.md lists what was verified), not from
flashq's code. A layer is a Qwen3 layer (qwen3_reference.py, whose attention this file reuses:
q_norm / k_norm, RoPE, GQA, q/k/v/o biases when attention_bias) whose MLP is either
  - a sparse MoE block, when layer_idx not in mlp_only_layers and num_experts > 0 and
    (layer_idx + 1) % decoder_sparse_step == 0: router mlp.gate.weight [E, hidden] (no bias),
    p = softmax over the E experts, the num_experts_per_tok largest, renormalised to sum 1 when
    norm_topk_prob (moe_reference.py), each chosen expert a SwiGLU MLP of moe_intermediate_size
    (mlp.experts.{e}.{gate,up,down}_proj.weight, no biases) weighted by its p; or
  - a dense SwiGLU MLP of intermediate_size (mlp.{gate,up,down}_proj.weight).
Config defaults (Qwen3MoeConfig): num_key_value_heads 4 (null: MHA), head_dim = hidden_size /
num_attention_heads when absent (Qwen3's 128 does not apply), rope_theta 10000, rms_norm_eps 1e-6,
norm_topk_prob false, decoder_sparse_step 1, mlp_only_layers [], untied embeddings; num_experts
may be spelled num_local_experts (transformers 5's attribute map).

Numerics as in qwen3_reference.py: weights float32 as stored, every activation float64; with
--kv-cache-dtype bf16, keys and values rounded to bf16 as a bf16 cache stores them (in the
attention reused from qwen3_reference.py).

Command line: the same as qwen3_reference.py's (see there for the files written):
  /usr/bin/python3 tests/reference/qwen3_moe_reference.py --model DIR --tokens 1,2,3 \
      [--greedy N] [--taps 0,2] [--kv-cache-dtype float32|bf16] --out PREFIX
PREFIX.json also holds "moe": {"layers": sparse layer ids, "experts": [layer][row][k] the experts
each row went to (descending weight), "min_margin": the smallest gap between a row's k-th and
(k+1)-th probability} for the forward over the tokens.

Import: load_model(dir) -> Qwen3MoeModel; forward(model, tokens) -> (logits, hidden_states);
forward_with_routing(model, tokens) -> (logits, hidden_states, RoutingRecord).
"""

import json
import os
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_reference as moe  # noqa: E402
import qwen3_reference as qwen3  # noqa: E402
import yarn_reference as yarn  # noqa: E402
from qwen3_reference import linear, rms_norm, causal_mask, grouped_query_attention, swiglu_mlp  # noqa: E402
from safetensors_numpy import load_safetensors  # noqa: E402


@dataclass(frozen=True)
class Qwen3MoeConfig:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: object        # None, rope_reference.RopeScaling or yarn_reference.YarnScaling
    vocab_size: int
    tie_word_embeddings: bool
    attention_bias: bool
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    norm_topk_prob: bool
    decoder_sparse_step: int
    mlp_only_layers: tuple

    def is_sparse(self, layer_idx):
        """HF Qwen3MoeDecoderLayer's condition for a sparse MoE block."""
        return (layer_idx not in self.mlp_only_layers and self.num_experts > 0
                and (layer_idx + 1) % self.decoder_sparse_step == 0)


_REQUIRED_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                  "num_experts_per_tok", "moe_intermediate_size")


def read_qwen3_moe_config(model_dir):
    with open(os.path.join(model_dir, "config.json"), "r", encoding="utf-8") as f:
        raw = json.load(f)
    if raw.get("model_type", "qwen3_moe") != "qwen3_moe":
        raise ValueError(f"config: model_type {raw['model_type']!r} is not qwen3_moe")
    for key in _REQUIRED_KEYS:
        if key not in raw:
            raise ValueError(f"config: missing {key}")
    num_experts = raw.get("num_experts", raw.get("num_local_experts"))
    if num_experts is None:
        raise ValueError("config: missing num_experts")
    if raw.get("use_sliding_window", False):
        raise ValueError("config: use_sliding_window = true is not implemented")
    if any(t != "full_attention" for t in raw.get("layer_types") or []):
        raise ValueError("config: layer_types other than full_attention are not implemented")
    if raw.get("hidden_act", "silu") != "silu":
        raise ValueError(f"config: hidden_act {raw['hidden_act']!r} is not implemented (only silu)")
    if raw.get("shared_expert_intermediate_size"):
        raise ValueError("config: shared_expert_intermediate_size (a shared expert) is not part of Qwen3-MoE")

    hidden, num_heads = int(raw["hidden_size"]), int(raw["num_attention_heads"])
    num_kv_heads = raw.get("num_key_value_heads", 4)
    num_kv_heads = num_heads if num_kv_heads is None else int(num_kv_heads)
    head_dim = raw.get("head_dim")
    rope_theta, rope_scaling = yarn.read_rope_with_yarn(raw, default_theta=10000.0)
    config = Qwen3MoeConfig(
        hidden_size=hidden,
        intermediate_size=int(raw["intermediate_size"]),
        num_hidden_layers=int(raw["num_hidden_layers"]),
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=hidden // num_heads if head_dim is None else int(head_dim),
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        vocab_size=int(raw["vocab_size"]),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        attention_bias=bool(raw.get("attention_bias", False)),
        num_experts=int(num_experts),
        num_experts_per_tok=int(raw["num_experts_per_tok"]),
        moe_intermediate_size=int(raw["moe_intermediate_size"]),
        norm_topk_prob=bool(raw.get("norm_topk_prob", False)),
        decoder_sparse_step=int(raw.get("decoder_sparse_step", 1)),
        mlp_only_layers=tuple(int(i) for i in raw.get("mlp_only_layers") or []),
    )
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"config: num_attention_heads {num_heads} not a multiple of num_key_value_heads {num_kv_heads}")
    if config.head_dim % 2 != 0:
        raise ValueError(f"config: head_dim {config.head_dim} must be even for rotate-half RoPE")
    if config.decoder_sparse_step < 1:
        raise ValueError(f"config: decoder_sparse_step {config.decoder_sparse_step} must be >= 1")
    if config.num_experts > 0 and not 1 <= config.num_experts_per_tok <= config.num_experts:
        raise ValueError(f"config: num_experts_per_tok {config.num_experts_per_tok} outside [1, {config.num_experts}]")
    return config


# ---------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------

@dataclass
class Qwen3MoeModel:
    config: Qwen3MoeConfig
    embed_tokens: np.ndarray   # [vocab, hidden]
    layers: list               # per layer {short name: array}; sparse ones add "mlp.gate" and "experts"
    norm: np.ndarray
    lm_head: np.ndarray        # the embedding itself when tied


ATTENTION_TENSORS = ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                     "self_attn.q_norm", "self_attn.k_norm", "post_attention_layernorm")
DENSE_MLP_TENSORS = ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def take_moe_layer(tensors, prefix, c, layer_idx):
    """One layer's tensors; a sparse layer's MLP is {"mlp.gate": [E, hidden], "experts": [{"mlp.gate_proj",
    "mlp.up_proj", "mlp.down_proj"} per expert]} (named so that qwen3.swiglu_mlp runs an expert)."""
    shapes = qwen3._expected_layer_shapes(c)
    layer = {short: qwen3._take(tensors, f"{prefix}{short}.weight", shapes[short]) for short in ATTENTION_TENSORS}
    if c.attention_bias:
        for proj in qwen3.ATTENTION_PROJECTIONS:
            name = f"{prefix}{proj}.bias"
            if name not in tensors:
                raise ValueError(f"checkpoint: attention_bias is true but {name} is missing")
            layer[proj + ".bias"] = qwen3._take(tensors, name, shapes[proj][:1])
    if not c.is_sparse(layer_idx):
        layer.update({short: qwen3._take(tensors, f"{prefix}{short}.weight", shapes[short]) for short in DENSE_MLP_TENSORS})
        return layer
    if f"{prefix}mlp.experts.gate_up_proj" in tensors:
        raise ValueError(f"checkpoint: {prefix}mlp.experts.gate_up_proj (fused experts) is not the published "
                         "layout; experts are read as mlp.experts.{e}.{gate,up,down}_proj.weight")
    H, I, E = c.hidden_size, c.moe_intermediate_size, c.num_experts
    layer["mlp.gate"] = qwen3._take(tensors, f"{prefix}mlp.gate.weight", (E, H))
    expert_shapes = {"mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}
    layer["experts"] = [
        {short: qwen3._take(tensors, f"{prefix}mlp.experts.{e}.{short[len('mlp.'):]}.weight", shape)
         for short, shape in expert_shapes.items()}
        for e in range(E)
    ]
    return layer


def load_model(model_dir):
    c = read_qwen3_moe_config(model_dir)
    tensors = load_safetensors(model_dir)
    layers = [take_moe_layer(tensors, f"model.layers.{i}.", c, i) for i in range(c.num_hidden_layers)]
    vocab_shape = (c.vocab_size, c.hidden_size)
    embed = qwen3._take(tensors, "model.embed_tokens.weight", vocab_shape)
    if "lm_head.weight" in tensors:
        lm_head = qwen3._take(tensors, "lm_head.weight", vocab_shape)
    elif c.tie_word_embeddings:
        lm_head = embed
    else:
        raise KeyError("checkpoint: no lm_head.weight and tie_word_embeddings is false")
    return Qwen3MoeModel(config=c, embed_tokens=embed, layers=layers,
                         norm=qwen3._take(tensors, "model.norm.weight", (c.hidden_size,)), lm_head=lm_head)


# ---------------------------------------------------------------------------------------------
# The forward pass
# ---------------------------------------------------------------------------------------------

def sparse_moe_block(layer, m, c):
    """Router, top-k with the family's normalisation, the chosen experts' SwiGLU outputs weighted
    and summed. Returns (out [T, hidden], experts [T, k], margins [T])."""
    router_logits = linear(m, layer["mlp.gate"])
    experts, weights, margin = moe.route_softmax_then_top_k(router_logits, c.num_experts_per_tok, c.norm_topk_prob)
    out = moe.mix_experts(m, experts, weights, lambda e, rows: swiglu_mlp(layer["experts"][e], rows))
    return out, experts, margin


def decoder_layer(layer, h, positions, c, layer_idx, record):
    """One pre-norm layer over the rows h [T, hidden], causal; returns the new residual stream."""
    n = rms_norm(h, layer["input_layernorm"], c.rms_norm_eps)
    q, k, v = qwen3.project_qkv(layer, n, positions, c)
    attn = grouped_query_attention(q, k, v, causal_mask(h.shape[0]), c)
    h = h + qwen3.project(layer, "self_attn.o_proj", attn)
    m = rms_norm(h, layer["post_attention_layernorm"], c.rms_norm_eps)
    if not c.is_sparse(layer_idx):
        return h + swiglu_mlp(layer, m)
    out, experts, margin = sparse_moe_block(layer, m, c)
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
    return qwen3.run_cli(argv, "Qwen3-MoE", load_model, forward, extra_info=routing_info)


if __name__ == "__main__":
    sys.exit(main())
