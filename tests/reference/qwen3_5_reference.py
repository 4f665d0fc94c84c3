#!/usr/bin/python3
"""NumPy reference of the hybrid Qwen3.5 / Qwen3-Next targets, for checking flashq against:
  qwen3_5      Qwen3.5 dense (Qwen3_5ForConditionalGeneration / Qwen3_5ForCausalLM; model_type
               qwen3_5 with text_config, or qwen3_5_text)
  qwen3_5_moe  Qwen3.5-MoE (model_type qwen3_5_moe with text_config, or qwen3_5_moe_text)
  qwen3_next   Qwen3-Next (Qwen3NextForCausalLM, model_type qwen3_next)

Written from the published architecture (transformers' modular_qwen3_next.py, configuration_qwen3_next.py,
modular_qwen3_5.py, modular_qwen3_5_moe.py and the classes they build on), not from flashq's code.

Layers: layer_types ("linear_attention" / "full_attention"), else layer i is full when
(i + 1) % full_attention_interval == 0 (default 4). Each layer is pre-norm:
  h += mixer(norm(h)); h += mlp(norm(h))
with zero-centred RMSNorm x / sqrt(mean(x^2) + eps) * (1 + w) (Gemma3's) for both layer norms, the
final norm and the attention's q_norm / k_norm.
  full_attention    q_proj gives [heads, 2 * head_dim] per row: query then gate of each head;
                    q_norm / k_norm per head; RoPE on the first head_dim * partial_rotary_factor
                    (default 0.25) dims of each head (rotate-half within that part, the rest passed
                    through); GQA attention with scale 1/sqrt(head_dim); output * sigmoid(gate),
                    then o_proj.
  linear_attention  Gated DeltaNet: q, k, v (2 key_dim + value_dim channels) through a depthwise
                    causal conv1d (kernel linear_conv_kernel_dim, no bias) and SiLU; z, b, a per
                    row; beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias); q and k L2-
                    normalised (eps 1e-6) and repeated to the value heads (repeat_interleave); q
                    scaled by 1/sqrt(head_k_dim); the gated delta rule per value head with state
                    S [d_k, d_v]:
                        S <- S exp(g_t); delta = beta_t (v_t - S^T k_t); S <- S + k_t delta^T;
                        o_t = S^T q_t
                    then RMSNorm per value head (weight w, not zero-centred) times silu(z), out_proj.
                    Qwen3.5 stores in_proj_qkv / in_proj_z / in_proj_b / in_proj_a; Qwen3-Next
                    stores in_proj_qkvz / in_proj_ba grouped per key head (split_grouped_projection).
  mlp               qwen3_5: SwiGLU of intermediate_size. qwen3_5_moe: every layer sparse; softmax
                    over the experts, top-k, always renormalised (Qwen3VLMoeTextTopKRouter: the text
                    config has no norm_topk_prob). qwen3_next: sparse on HF's condition (mlp_only_layers,
                    decoder_sparse_step), renormalised when norm_topk_prob (default true); dense
                    SwiGLU of intermediate_size elsewhere. A sparse block adds the shared expert
                    (SwiGLU of shared_expert_intermediate_size) times sigmoid(shared_expert_gate(x)).
Experts are read in both published layouts: per-expert mlp.experts.{e}.{gate,up,down}_proj.weight
(Qwen3-Next) or fused mlp.experts.gate_up_proj [E, 2 I, H] (gate rows first) and
mlp.experts.down_proj [E, H, I] (Qwen3.5-MoE, transformers 5's Qwen2MoeExperts).

Checkpoint layouts: the multimodal one (text under model.language_model.*, config in text_config,
lm_head.weight at top level, model.visual.* and mtp.* ignored) and the text-only one (model.*).

Delta rule: two forms. delta_rule_recurrent runs token by token; delta_rule_chunked is the chunked
form of transformers' torch_chunk_gated_delta_rule (chunks of 64: inside a chunk through the
cumulative decay and a unit lower-triangular solve, across chunks through the state). The forward
uses the chunked form (what a prefill kernel computes); --recurrent (or DELTA_RULE = "recurrent")
selects the other. The decode functions (prefill, decode_step) carry what a server keeps: per linear
layer the last K-1 conv inputs [K-1, conv_dim] and the recurrent state [v_heads, d_k, d_v], per full
layer the keys and values.

Numerics as in qwen3_reference.py: weights float32 as stored, every activation float64 (HF computes
g, the delta rule and the gated norm in float32); --kv-cache-dtype bf16 rounds the full layers'
keys and values as a bf16 cache stores them.

Command line: qwen3_reference.py's (see there for the files), plus --recurrent:
  /usr/bin/python3 tests/reference/qwen3_5_reference.py --model DIR --tokens 1,2,3 \
      [--greedy N] [--taps 0,2] [--kv-cache-dtype float32|bf16] [--recurrent] --out PREFIX
For the MoE families PREFIX.json also holds "moe" (see qwen3_moe_reference.py).

Import: load_model(dir) -> HybridModel; forward(model, tokens) -> (logits, hidden_states);
prefill(model, tokens) -> (logits, hidden_states, HybridCache); decode_step(model, token, cache) ->
(logits [vocab], cache).
"""

import json
import os
import sys
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_reference as moe  # noqa: E402
import qwen3_reference as qwen3  # noqa: E402
from qwen3_reference import COMPUTE, linear, rms_norm, grouped_query_attention, swiglu_mlp, silu  # noqa: E402
import rope_reference as rope  # noqa: E402
from safetensors_numpy import load_safetensors  # noqa: E402

FAMILIES = ("qwen3_5", "qwen3_5_moe", "qwen3_next")
# model_type (top level, or of text_config) -> family
MODEL_TYPES = {"qwen3_5": "qwen3_5", "qwen3_5_text": "qwen3_5", "qwen3_5_moe": "qwen3_5_moe",
               "qwen3_5_moe_text": "qwen3_5_moe", "qwen3_next": "qwen3_next"}
CHUNK_SIZE = 64              # torch_chunk_gated_delta_rule's default, what HF's forward uses
L2_EPS = 1e-6                # HF l2norm's eps (FLA's)
DELTA_RULE = "chunked"       # the forward's delta-rule form: "chunked" or "recurrent" (--recurrent)


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HybridConfig:
    family: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: object
    rotary_dim: int              # int(head_dim * partial_rotary_factor), HF's rotary dim
    vocab_size: int
    tie_word_embeddings: bool
    attention_bias: bool
    layer_types: tuple
    conv_kernel: int
    head_k_dim: int
    head_v_dim: int
    num_k_heads: int
    num_v_heads: int
    intermediate_size: int = None
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    norm_topk_prob: bool = True
    decoder_sparse_step: int = 1
    mlp_only_layers: tuple = ()

    @property
    def key_dim(self):
        return self.num_k_heads * self.head_k_dim

    @property
    def value_dim(self):
        return self.num_v_heads * self.head_v_dim

    @property
    def conv_dim(self):
        return 2 * self.key_dim + self.value_dim

    def is_linear(self, i):
        return self.layer_types[i] == "linear_attention"

    def is_sparse(self, i):
        if self.family == "qwen3_5":
            return False
        if self.family == "qwen3_5_moe":
            return True  # Qwen3_5MoeDecoderLayer: a sparse block on every layer
        return (i not in self.mlp_only_layers and self.num_experts > 0
                and (i + 1) % self.decoder_sparse_step == 0)


def read_raw_config(model_dir):
    """(family, text config dict, multimodal?) of config.json: a text_config, when present, is the
    language model's config (Qwen3.5's ForConditionalGeneration files)."""
    with open(os.path.join(model_dir, "config.json"), "r", encoding="utf-8") as f:
        raw = json.load(f)
    text = raw.get("text_config")
    multimodal = text is not None
    if multimodal:
        # Keys the composite config keeps at top level (tie_word_embeddings) fill in the text config.
        text = dict(text)
        if "tie_word_embeddings" not in text and "tie_word_embeddings" in raw:
            text["tie_word_embeddings"] = raw["tie_word_embeddings"]
    else:
        text = raw
    model_type = text.get("model_type", raw.get("model_type"))
    if model_type not in MODEL_TYPES:
        raise ValueError(f"config: model_type {model_type!r} is not a hybrid Qwen ({', '.join(MODEL_TYPES)})")
    return MODEL_TYPES[model_type], text, multimodal


def config_from_dict(family, raw):
    required = ["hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"]
    if family in ("qwen3_5", "qwen3_next"):
        required.append("intermediate_size")
    if family in ("qwen3_5_moe", "qwen3_next"):
        required += ["num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"]
    for key in required:
        if key not in raw:
            raise ValueError(f"config: missing {key}")
    if raw.get("hidden_act", "silu") != "silu":
        raise ValueError(f"config: hidden_act {raw['hidden_act']!r} is not implemented (only silu)")
    if raw.get("attn_output_gate", True) is not True:
        # HF's attention always gates (the key is not read): a config saying otherwise is not this model.
        raise ValueError("config: attn_output_gate false is not what the published attention computes")
    L = int(raw["num_hidden_layers"])
    layer_types = raw.get("layer_types")
    if layer_types is None:
        interval = int(raw.get("full_attention_interval", 4))
        layer_types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(L)]
    layer_types = tuple(layer_types)
    if len(layer_types) != L or any(t not in ("linear_attention", "full_attention") for t in layer_types):
        raise ValueError(f"config: layer_types must be {L} entries of linear_attention / full_attention")

    rope_theta, rope_scaling = rope.read_rope(raw, default_theta=10000.0)
    params = raw.get("rope_parameters") or {}
    # transformers 5 keeps partial_rotary_factor in rope_parameters, older files at top level; 0.25 is HF's default.
    factor = float(params.get("partial_rotary_factor", raw.get("partial_rotary_factor", 0.25)))
    num_heads = int(raw["num_attention_heads"])
    num_kv = raw.get("num_key_value_heads", 2 if family == "qwen3_next" else 4)
    num_kv = num_heads if num_kv is None else int(num_kv)
    head_dim = int(raw.get("head_dim") or 256)
    rotary_dim = int(head_dim * factor)
    config = HybridConfig(
        family=family, hidden_size=int(raw["hidden_size"]), num_hidden_layers=L, num_attention_heads=num_heads,
        num_key_value_heads=num_kv, head_dim=head_dim, rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        rope_theta=rope_theta, rope_scaling=rope_scaling, rotary_dim=rotary_dim, vocab_size=int(raw["vocab_size"]),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        attention_bias=bool(raw.get("attention_bias", False)), layer_types=layer_types,
        conv_kernel=int(raw.get("linear_conv_kernel_dim", 4)), head_k_dim=int(raw.get("linear_key_head_dim", 128)),
        head_v_dim=int(raw.get("linear_value_head_dim", 128)), num_k_heads=int(raw.get("linear_num_key_heads", 16)),
        num_v_heads=int(raw.get("linear_num_value_heads", 32)),
        intermediate_size=int(raw["intermediate_size"]) if "intermediate_size" in raw else None,
        num_experts=int(raw.get("num_experts", 0)), num_experts_per_tok=int(raw.get("num_experts_per_tok", 0)),
        moe_intermediate_size=int(raw.get("moe_intermediate_size", 0)),
        shared_expert_intermediate_size=int(raw.get("shared_expert_intermediate_size", 0)),
        # Qwen3.5-MoE's router always renormalises; Qwen3-Next's reads norm_topk_prob (default true).
        norm_topk_prob=True if family == "qwen3_5_moe" else bool(raw.get("norm_topk_prob", True)),
        decoder_sparse_step=int(raw.get("decoder_sparse_step", 1)),
        mlp_only_layers=tuple(int(i) for i in raw.get("mlp_only_layers") or []),
    )
    if num_heads % num_kv != 0:
        raise ValueError(f"config: num_attention_heads {num_heads} not a multiple of num_key_value_heads {num_kv}")
    if rotary_dim % 2 != 0 or not 0 < rotary_dim <= head_dim:
        raise ValueError(f"config: rotary dim {rotary_dim} (head_dim * partial_rotary_factor) must be even, in (0, head_dim]")
    if config.num_v_heads % config.num_k_heads != 0:
        raise ValueError("config: linear_num_value_heads must be a multiple of linear_num_key_heads")
    if family != "qwen3_5" and not 1 <= config.num_experts_per_tok <= config.num_experts:
        raise ValueError(f"config: num_experts_per_tok {config.num_experts_per_tok} outside [1, {config.num_experts}]")
    return config


def read_config(model_dir):
    family, raw, _ = read_raw_config(model_dir)
    return config_from_dict(family, raw)


# ---------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------

@dataclass
class HybridModel:
    config: HybridConfig
    embed_tokens: np.ndarray
    layers: list             # per layer {short name: array}; sparse layers add "experts", "shared_expert"
    norm: np.ndarray         # zero-centred: the scale is 1 + norm
    lm_head: np.ndarray


def _take(tensors, name, shape):
    return qwen3._take(tensors, name, shape)


def _full_attention_shapes(c):
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    return {"self_attn.q_proj": (2 * q, c.hidden_size), "self_attn.k_proj": (kv, c.hidden_size),
            "self_attn.v_proj": (kv, c.hidden_size), "self_attn.o_proj": (c.hidden_size, q),
            "self_attn.q_norm": (c.head_dim,), "self_attn.k_norm": (c.head_dim,)}


def _linear_attention_shapes(c):
    H, nv = c.hidden_size, c.num_v_heads
    shapes = {"linear_attn.conv1d": (c.conv_dim, 1, c.conv_kernel), "linear_attn.norm": (c.head_v_dim,),
              "linear_attn.out_proj": (H, c.value_dim)}
    if c.family == "qwen3_next":
        shapes.update({"linear_attn.in_proj_qkvz": (2 * c.key_dim + 2 * c.value_dim, H),
                       "linear_attn.in_proj_ba": (2 * nv, H)})
    else:
        shapes.update({"linear_attn.in_proj_qkv": (c.conv_dim, H), "linear_attn.in_proj_z": (c.value_dim, H),
                       "linear_attn.in_proj_b": (nv, H), "linear_attn.in_proj_a": (nv, H)})
    return shapes


def _swiglu_shapes(I, H):
    return {"mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}


def take_experts(tensors, p, c):
    """Per-expert dicts {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"} (qwen3.swiglu_mlp's names)
    from either published layout."""
    H, I, E = c.hidden_size, c.moe_intermediate_size, c.num_experts
    if p + "mlp.experts.gate_up_proj" in tensors:
        gate_up = _take(tensors, p + "mlp.experts.gate_up_proj", (E, 2 * I, H))
        down = _take(tensors, p + "mlp.experts.down_proj", (E, H, I))
        # Qwen2MoeExperts: linear(x, gate_up_proj[e]) chunked in two along the output: gate, then up.
        return [{"mlp.gate_proj": gate_up[e, :I], "mlp.up_proj": gate_up[e, I:], "mlp.down_proj": down[e]}
                for e in range(E)]
    return [{short: _take(tensors, f"{p}mlp.experts.{e}.{short[4:]}.weight", shape)
             for short, shape in _swiglu_shapes(I, H).items()} for e in range(E)]


def take_layer(tensors, p, c, i):
    H = c.hidden_size
    layer = {"input_layernorm": _take(tensors, p + "input_layernorm.weight", (H,)),
             "post_attention_layernorm": _take(tensors, p + "post_attention_layernorm.weight", (H,))}
    if c.is_linear(i):
        for short, shape in _linear_attention_shapes(c).items():
            layer[short] = _take(tensors, f"{p}{short}.weight", shape)
        layer["linear_attn.A_log"] = _take(tensors, p + "linear_attn.A_log", (c.num_v_heads,))
        layer["linear_attn.dt_bias"] = _take(tensors, p + "linear_attn.dt_bias", (c.num_v_heads,))
    else:
        shapes = _full_attention_shapes(c)
        for short, shape in shapes.items():
            layer[short] = _take(tensors, f"{p}{short}.weight", shape)
        if c.attention_bias:
            for proj in qwen3.ATTENTION_PROJECTIONS:
                layer[proj + ".bias"] = _take(tensors, f"{p}{proj}.bias", shapes[proj][:1])
    if c.is_sparse(i):
        layer["mlp.gate"] = _take(tensors, p + "mlp.gate.weight", (c.num_experts, H))
        layer["experts"] = take_experts(tensors, p, c)
        layer["shared_expert"] = {short: _take(tensors, f"{p}mlp.shared_expert.{short[4:]}.weight", shape)
                                  for short, shape in _swiglu_shapes(c.shared_expert_intermediate_size, H).items()}
        layer["mlp.shared_expert_gate"] = _take(tensors, p + "mlp.shared_expert_gate.weight", (1, H))
    else:
        layer.update({short: _take(tensors, f"{p}{short}.weight", shape)
                      for short, shape in _swiglu_shapes(c.intermediate_size, H).items()})
    return layer


def load_model(model_dir):
    family, raw, _ = read_raw_config(model_dir)
    c = config_from_dict(family, raw)
    tensors = load_safetensors(model_dir)
    # The multimodal files hold the language model under model.language_model.; vision and mtp are unused.
    prefix = "model.language_model." if "model.language_model.embed_tokens.weight" in tensors else "model."
    layers = [take_layer(tensors, f"{prefix}layers.{i}.", c, i) for i in range(c.num_hidden_layers)]
    vocab_shape = (c.vocab_size, c.hidden_size)
    embed = _take(tensors, prefix + "embed_tokens.weight", vocab_shape)
    if "lm_head.weight" in tensors:
        lm_head = _take(tensors, "lm_head.weight", vocab_shape)
    elif c.tie_word_embeddings:
        lm_head = embed
    else:
        raise KeyError("checkpoint: no lm_head.weight and tie_word_embeddings is false")
    return HybridModel(config=c, embed_tokens=embed, layers=layers, norm=_take(tensors, prefix + "norm.weight", (c.hidden_size,)),
                       lm_head=lm_head)


# ---------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------

def zero_centred_rms_norm(x, weight, eps):
    """x / sqrt(mean(x^2) + eps) * (1 + w): checkpoints store w around 0 (Gemma3RMSNorm)."""
    return rms_norm(x, 1.0 + weight.astype(COMPUTE), eps)


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # = 1 / (1 + exp(-x)) without overflow for large |x|


def softplus(x):
    return np.logaddexp(0.0, x)


def apply_partial_rope(x, positions, c):
    """RoPE on the first rotary_dim dims of each head (rotate-half within them, frequencies of a
    rotary_dim-wide head), the rest unchanged: HF's apply_rotary_pos_emb splits at cos's width.
    Qwen3.5's M-RoPE gives text tokens the same position in all three sections (t, h, w), so each
    section rotates by the same angle as 1-D RoPE: text-only, it is ordinary RoPE."""
    r = c.rotary_dim
    rotated = qwen3.apply_rope(x[..., :r], positions, c.rope_theta, c.rope_scaling)
    return np.concatenate([rotated, x[..., r:]], axis=-1)


def gated_attention_inputs(layer, n, positions, c):
    """(q, gate, k, v): q [T, heads, hd] normalised and rotated, gate [T, heads * hd], k, v
    [T, kv_heads, hd] (k normalised and rotated, both as a cache stores them)."""
    T = n.shape[0]
    q_and_gate = qwen3.project(layer, "self_attn.q_proj", n).reshape(T, c.num_attention_heads, 2 * c.head_dim)
    q, gate = q_and_gate[..., :c.head_dim], q_and_gate[..., c.head_dim:]
    k = qwen3.project(layer, "self_attn.k_proj", n).reshape(T, c.num_key_value_heads, c.head_dim)
    v = qwen3.project(layer, "self_attn.v_proj", n).reshape(T, c.num_key_value_heads, c.head_dim)
    q = apply_partial_rope(zero_centred_rms_norm(q, layer["self_attn.q_norm"], c.rms_norm_eps), positions, c)
    k = apply_partial_rope(zero_centred_rms_norm(k, layer["self_attn.k_norm"], c.rms_norm_eps), positions, c)
    return q, gate.reshape(T, -1), qwen3.as_stored(k), qwen3.as_stored(v)


def gated_attention(layer, n, positions, c, past=None):
    """Full-attention mixer over the rows n at `positions`; past: (keys, values) of earlier positions
    (a KV cache) or None. Returns (output [T, hidden], (keys, values) including these rows)."""
    q, gate, k, v = gated_attention_inputs(layer, n, positions, c)
    if past is not None:
        k, v = np.concatenate([past[0], k]), np.concatenate([past[1], v])
    T, P = q.shape[0], k.shape[0] - q.shape[0]
    allowed = np.tril(np.ones((T, k.shape[0]), dtype=bool), k=P)  # row t sees keys 0 .. P + t
    attn = grouped_query_attention(q, k, v, allowed, c)
    return qwen3.project(layer, "self_attn.o_proj", attn * sigmoid(gate)), (k, v)


def split_grouped_projection(qkvz, ba, c):
    """Qwen3-Next's in_proj_qkvz / in_proj_ba outputs -> (q [T, key_dim], k [T, key_dim],
    v [T, value_dim], z [T, value_dim], b [T, v_heads], a [T, v_heads]) in Qwen3.5's flat order.
    Both are grouped per key head: for key head j, qkvz holds q_j [dk], k_j [dk], then the v and z
    of its r = v_heads / k_heads value heads [r dv each]; ba holds b then a of those r heads."""
    T, nk, dk, dv = qkvz.shape[0], c.num_k_heads, c.head_k_dim, c.head_v_dim
    r = c.num_v_heads // nk
    g = qkvz.reshape(T, nk, 2 * dk + 2 * r * dv)
    q, k = g[..., :dk], g[..., dk:2 * dk]
    v, z = g[..., 2 * dk:2 * dk + r * dv], g[..., 2 * dk + r * dv:]
    gba = ba.reshape(T, nk, 2 * r)
    return (q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1), z.reshape(T, -1),
            gba[..., :r].reshape(T, -1), gba[..., r:].reshape(T, -1))


def linear_attention_inputs(layer, n, c):
    """(mixed qkv [T, conv_dim] before the conv, z [T, value_dim], b, a [T, v_heads])."""
    if "linear_attn.in_proj_qkvz" in layer:
        q, k, v, z, b, a = split_grouped_projection(linear(n, layer["linear_attn.in_proj_qkvz"]),
                                                    linear(n, layer["linear_attn.in_proj_ba"]), c)
        return np.concatenate([q, k, v], axis=-1), z, b, a
    return (linear(n, layer["linear_attn.in_proj_qkv"]), linear(n, layer["linear_attn.in_proj_z"]),
            linear(n, layer["linear_attn.in_proj_b"]), linear(n, layer["linear_attn.in_proj_a"]))


def causal_conv(x, weight, conv_state):
    """Depthwise causal conv1d plus SiLU over x [T, C] with weight [C, 1, K]; conv_state [K-1, C]:
    the K-1 inputs before x (zeros at the start). out[t] = silu(sum_j w[:, j] x[t - (K-1) + j]): the
    last tap meets the current row (PyTorch's conv1d is a cross-correlation). Returns (out, the last
    K-1 inputs, the next call's conv_state)."""
    K = weight.shape[-1]
    w = weight[:, 0, :].astype(COMPUTE)
    padded = np.concatenate([conv_state, x], axis=0)
    T = x.shape[0]
    out = sum(padded[j:j + T] * w[:, j] for j in range(K))
    return silu(out), padded[padded.shape[0] - (K - 1):]


def l2_normalise(x):
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + L2_EPS)


def delta_rule_recurrent(q, k, v, g, beta, state=None):
    """The gated delta rule token by token. q, k [T, h, dk] (L2-normalised, q not yet scaled),
    v [T, h, dv], g, beta [T, h], state [h, dk, dv] (zeros when None). Returns (out [T, h, dv], state)."""
    T, h, dk = k.shape
    S = np.zeros((h, dk, v.shape[-1])) if state is None else np.array(state, dtype=COMPUTE)
    q = q / np.sqrt(dk)
    out = np.empty(v.shape)
    for t in range(T):
        S = S * np.exp(g[t])[:, None, None]
        kv_mem = np.einsum("hkv,hk->hv", S, k[t])
        delta = (v[t] - kv_mem) * beta[t][:, None]
        S = S + k[t][:, :, None] * delta[:, None, :]
        out[t] = np.einsum("hkv,hk->hv", S, q[t])
    return out, S


def delta_rule_chunked(q, k, v, g, beta, state=None, chunk_size=CHUNK_SIZE):
    """The same rule chunk by chunk, as torch_chunk_gated_delta_rule computes it (a last chunk
    shorter than chunk_size equals HF's zero padding: padded rows have k = 0, beta = 0, g = 0).
    Inside a chunk of rows 1..C with cumulative decay G_i = g_1 + .. + g_i and
    D[i, j] = exp(G_i - G_j) (i >= j):
      A = I + strict_lower(beta_i k_i.k_j D[i, j])          (unit lower triangular)
      U = A^-1 (beta v),  W = A^-1 (beta k exp(G))          (the triangular solve)
      new = U - W S;  out = (q exp(G)) S + lower(q_i.k_j D[i, j]) new
      S <- S exp(G_C) + sum_i k_i exp(G_C - G_i) new_i^T
    """
    T, h, dk = k.shape
    dv = v.shape[-1]
    S = np.zeros((h, dk, dv)) if state is None else np.array(state, dtype=COMPUTE)
    q = q / np.sqrt(dk)
    out = np.empty(v.shape)
    for start in range(0, T, chunk_size):
        rows = slice(start, min(start + chunk_size, T))
        C = rows.stop - rows.start
        strict = np.tril(np.ones((C, C), dtype=bool), k=-1)
        lower = np.tril(np.ones((C, C), dtype=bool))
        for head in range(h):
            qc, kc, vc = q[rows, head], k[rows, head], v[rows, head]
            bc, G = beta[rows, head], np.cumsum(g[rows, head])
            # Masked before exp: above the diagonal G_i - G_j > 0 could overflow and is never used.
            D = np.exp(np.where(lower, G[:, None] - G[None, :], -np.inf))
            A = np.eye(C) + np.where(strict, (bc[:, None] * kc) @ kc.T * D, 0.0)
            U = np.linalg.solve(A, bc[:, None] * vc)
            W = np.linalg.solve(A, bc[:, None] * kc * np.exp(G)[:, None])
            new = U - W @ S[head]
            out[rows, head] = (qc * np.exp(G)[:, None]) @ S[head] + ((qc @ kc.T) * D) @ new
            S[head] = S[head] * np.exp(G[-1]) + (kc * np.exp(G[-1] - G)[:, None]).T @ new
    return out, S


def delta_rule(q, k, v, g, beta, state=None, form=None):
    form = form or DELTA_RULE
    if form == "chunked":
        return delta_rule_chunked(q, k, v, g, beta, state)
    if form == "recurrent":
        return delta_rule_recurrent(q, k, v, g, beta, state)
    raise ValueError(f"delta rule form {form!r} (chunked or recurrent)")


def gated_delta_net(layer, n, c, conv_state=None, recurrent_state=None, form=None):
    """Linear-attention mixer over the rows n, continuing from conv_state [K-1, conv_dim] and
    recurrent_state [v_heads, dk, dv] (zeros when None). Returns (output [T, hidden], conv_state,
    recurrent_state) after these rows."""
    T = n.shape[0]
    mixed, z, b, a = linear_attention_inputs(layer, n, c)
    if conv_state is None:
        conv_state = np.zeros((c.conv_kernel - 1, c.conv_dim))
    mixed, conv_state = causal_conv(mixed, layer["linear_attn.conv1d"], conv_state)
    q = mixed[:, :c.key_dim].reshape(T, c.num_k_heads, c.head_k_dim)
    k = mixed[:, c.key_dim:2 * c.key_dim].reshape(T, c.num_k_heads, c.head_k_dim)
    v = mixed[:, 2 * c.key_dim:].reshape(T, c.num_v_heads, c.head_v_dim)
    beta = sigmoid(b)
    g = -np.exp(layer["linear_attn.A_log"].astype(COMPUTE)) * softplus(a + layer["linear_attn.dt_bias"].astype(COMPUTE))
    r = c.num_v_heads // c.num_k_heads
    # Value head j reads key head j // r (repeat_interleave), as grouped query attention does.
    q, k = np.repeat(l2_normalise(q), r, axis=1), np.repeat(l2_normalise(k), r, axis=1)
    o, recurrent_state = delta_rule(q, k, v, g, beta, recurrent_state, form)
    o = rms_norm(o, layer["linear_attn.norm"], c.rms_norm_eps) * silu(z.reshape(T, c.num_v_heads, c.head_v_dim))
    return linear(o.reshape(T, c.value_dim), layer["linear_attn.out_proj"]), conv_state, recurrent_state


def sparse_moe_block(layer, m, c):
    """Routed experts plus the gated shared expert. Returns (out, experts [T, k], margins [T])."""
    experts, weights, margin = moe.route_softmax_then_top_k(linear(m, layer["mlp.gate"]), c.num_experts_per_tok,
                                                            c.norm_topk_prob)
    out = moe.mix_experts(m, experts, weights, lambda e, rows: swiglu_mlp(layer["experts"][e], rows))
    shared = swiglu_mlp(layer["shared_expert"], m) * sigmoid(linear(m, layer["mlp.shared_expert_gate"]))
    return out + shared, experts, margin


# ---------------------------------------------------------------------------------------------
# Forward, prefill and decode
# ---------------------------------------------------------------------------------------------

@dataclass
class HybridCache:
    """What decoding keeps, per layer: {"conv": [K-1, conv_dim], "state": [v_heads, dk, dv]} for a
    linear layer, {"k", "v": [positions, kv_heads, hd]} for a full one; `length` positions so far."""
    layers: list
    length: int = 0


def decoder_layer(layer, h, positions, c, i, entry, record, form=None):
    """One layer over the rows h at `positions`, continuing from entry (its cache entry, updated)."""
    n = zero_centred_rms_norm(h, layer["input_layernorm"], c.rms_norm_eps)
    if c.is_linear(i):
        mixed, entry["conv"], entry["state"] = gated_delta_net(layer, n, c, entry.get("conv"), entry.get("state"), form)
    else:
        past = (entry["k"], entry["v"]) if "k" in entry else None
        mixed, (entry["k"], entry["v"]) = gated_attention(layer, n, positions, c, past)
    h = h + mixed
    m = zero_centred_rms_norm(h, layer["post_attention_layernorm"], c.rms_norm_eps)
    if not c.is_sparse(i):
        return h + swiglu_mlp(layer, m)
    out, experts, margin = sparse_moe_block(layer, m, c)
    if record is not None:
        record.add(i, experts, margin)
    return h + out


def run_layers(model, tokens, cache, record=None, form=None):
    c = model.config
    h = qwen3.embed(model, tokens)
    positions = cache.length + np.arange(h.shape[0])
    hidden_states = [h]
    for i, layer in enumerate(model.layers):
        h = decoder_layer(layer, h, positions, c, i, cache.layers[i], record, form)
        hidden_states.append(h)
    cache.length += h.shape[0]
    logits = linear(zero_centred_rms_norm(h, model.norm, c.rms_norm_eps), model.lm_head)
    return logits, hidden_states


def new_cache(model):
    return HybridCache(layers=[{} for _ in model.layers])


def prefill(model, tokens, form=None):
    """Forward over tokens at positions 0..T-1 that also returns the cache to decode on from."""
    cache = new_cache(model)
    logits, hidden_states = run_layers(model, tokens, cache, form=form)
    return logits, hidden_states, cache


def decode_step(model, token, cache):
    """One token at position cache.length from the saved states (the recurrent form of the delta
    rule, as HF's single-token decode runs it). Returns (logits [vocab], cache updated in place)."""
    logits, _ = run_layers(model, [token], cache, form="recurrent")
    return logits[0], cache


def forward_with_routing(model, tokens, form=None):
    record = moe.RoutingRecord()
    logits, hidden_states = run_layers(model, tokens, new_cache(model), record, form)
    return logits, hidden_states, record


def forward(model, tokens):
    """Full causal forward over tokens at positions 0..T-1; returns (logits [T, vocab],
    hidden_states) with hidden_states[i + 1] the raw residual stream after layer i."""
    logits, hidden_states, _ = forward_with_routing(model, tokens)
    return logits, hidden_states


def greedy_continuation(model, tokens, num_new):
    return qwen3.greedy_continuation(model, tokens, num_new, forward)


def routing_info(model, tokens):
    """PREFIX.json's "moe" for the MoE families; nothing for dense Qwen3.5."""
    if not any(model.config.is_sparse(i) for i in range(model.config.num_hidden_layers)):
        return {}
    return {"moe": forward_with_routing(model, tokens)[2].as_json()}


def main(argv=None):
    global DELTA_RULE
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--recurrent" in argv:
        argv.remove("--recurrent")
        DELTA_RULE = "recurrent"
    return qwen3.run_cli(argv, "Qwen3.5 / Qwen3.5-MoE / Qwen3-Next", load_model, forward, extra_info=routing_info)


if __name__ == "__main__":
    sys.exit(main())
