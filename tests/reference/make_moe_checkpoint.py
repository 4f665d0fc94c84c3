#!/usr/bin/python3
"""Writes tiny random mixture-of-experts checkpoints in Hugging Face layout, for the self-checks of
qwen3_moe_reference.py and gptoss_reference.py, and optionally a DFlash drafter for them.

    /usr/bin/python3 tests/reference/make_moe_checkpoint.py --family qwen3-moe|gpt-oss --out DIR \
        [--layers 3] [--experts 8] [--top-k 2] [--window 4] [--seed 0] [--dtype BF16] \
        [--drafter-out DIR] [--drafter-layers 2] [--block-size 8] [--drafter-window W]

qwen3-moe: config.json with Qwen3MoeConfig's keys (architectures ["Qwen3MoeForCausalLM"],
  model_type "qwen3_moe", num_experts, num_experts_per_tok, moe_intermediate_size, norm_topk_prob,
  decoder_sparse_step, mlp_only_layers, ...); per layer Qwen3 attention tensors, and for a sparse
  layer mlp.gate.weight [E, hidden] and mlp.experts.{e}.{gate,up,down}_proj.weight, for a dense one
  mlp.{gate,up,down}_proj.weight (the default has layer 1 dense through mlp_only_layers).
gpt-oss: config.json with GptOssConfig's keys (architectures ["GptOssForCausalLM"], model_type
  "gpt_oss", layer_types alternating sliding / full, sliding_window, YaRN rope_scaling with
  max_position_embeddings = factor * original, swiglu_limit, quantization_config mxfp4, ...);
  attention with q/k/v/o biases and self_attn.sinks, mlp.router.{weight,bias}, and the experts as
  MXFP4 blocks and scales (U8: random bytes; scales 121..125, down 119..123, so that activations
  stay near 1 and the SwiGLU clamp is reached now and then) with bf16 biases; dense tensors in
  --dtype. With layout="dequantized" (Python only) the experts are written instead as
  transformers' dequantized mlp.experts.gate_up_proj [E, H, 2I] / down_proj [E, I, H], holding
  exactly the same values.
No tokenizer is written (the C++ tests write their own next to flashq-model make-tiny's files).
The drafter (make_dflash_checkpoint.py) gets the target's RoPE (YaRN for gpt-oss, with its
max_position_embeddings), attention biases for gpt-oss as z-lab's gpt-oss drafter has, and with
--drafter-window W its first layer is a sliding-window layer of W keys.
"""

import argparse
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_reference import write_safetensors  # noqa: E402
from make_dflash_checkpoint import make_drafter  # noqa: E402
import mxfp4_reference as mxfp4  # noqa: E402

FAMILIES = ("qwen3-moe", "gpt-oss")


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

def write_model(model_dir, config, tensors, shards=1):
    """config.json and safetensors (one file, or `shards` files with an index) from
    {name: (dtype, values)}; returns {name: the values stored (float32, or uint8 for U8)}."""
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    if shards == 1:
        return write_safetensors(os.path.join(model_dir, "model.safetensors"), tensors, {"format": "pt"})
    names = list(tensors)
    stored, weight_map = {}, {}
    for s in range(shards):
        shard_name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::shards]}
        stored.update(write_safetensors(os.path.join(model_dir, shard_name), part, {"format": "pt"}))
        weight_map.update({n: shard_name for n in part})
    with open(os.path.join(model_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    return stored


def _matrix(rng, rows, cols, gain=1.0):
    return gain * rng.standard_normal((rows, cols)) / math.sqrt(cols)


def _norm_weight(rng, n):
    return 1.0 + 0.3 * rng.standard_normal(n)  # not all ones, so a skipped norm shows


def _attention(rng, p, H, nh, nkv, hd, biases, qk_norm):
    w = {p + "input_layernorm.weight": _norm_weight(rng, H),
         p + "self_attn.q_proj.weight": _matrix(rng, nh * hd, H, 2.0),  # sharper attention patterns
         p + "self_attn.k_proj.weight": _matrix(rng, nkv * hd, H, 2.0),
         p + "self_attn.v_proj.weight": _matrix(rng, nkv * hd, H),
         p + "self_attn.o_proj.weight": _matrix(rng, H, nh * hd),
         p + "post_attention_layernorm.weight": _norm_weight(rng, H)}
    if qk_norm:
        w[p + "self_attn.q_norm.weight"] = _norm_weight(rng, hd)
        w[p + "self_attn.k_norm.weight"] = _norm_weight(rng, hd)
    if biases:
        for proj, n in (("q_proj", nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd), ("o_proj", H)):
            w[p + f"self_attn.{proj}.bias"] = 0.5 * rng.standard_normal(n)
    return w


# ---------------------------------------------------------------------------------------------
# Qwen3-MoE
# ---------------------------------------------------------------------------------------------

def qwen3_moe_config(num_layers=3, hidden=64, num_heads=4, num_kv_heads=2, head_dim=16, intermediate=96,
                     moe_intermediate=32, num_experts=8, top_k=2, norm_topk_prob=True, decoder_sparse_step=1,
                     mlp_only_layers=(1,), vocab=211, tied=False, theta=1000.0, attention_bias=False):
    """Qwen3MoeConfig's keys as Qwen/Qwen3-30B-A3B's config.json writes them, at a tiny size."""
    return {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "attention_bias": attention_bias, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
        "decoder_sparse_step": decoder_sparse_step, "head_dim": head_dim, "hidden_act": "silu",
        "hidden_size": hidden, "initializer_range": 0.02, "intermediate_size": intermediate,
        "max_position_embeddings": 4096, "max_window_layers": num_layers, "mlp_only_layers": list(mlp_only_layers),
        "moe_intermediate_size": moe_intermediate, "norm_topk_prob": norm_topk_prob,
        "num_attention_heads": num_heads, "num_experts": num_experts, "num_experts_per_tok": top_k,
        "num_hidden_layers": num_layers, "num_key_value_heads": num_kv_heads, "output_router_logits": False,
        "rms_norm_eps": 1e-6, "rope_scaling": None, "rope_theta": theta, "router_aux_loss_coef": 0.001,
        "sliding_window": None, "tie_word_embeddings": tied, "torch_dtype": "bfloat16", "use_cache": True,
        "use_sliding_window": False, "vocab_size": vocab,
    }


def qwen3_moe_sparse(config, layer_idx):
    return (layer_idx not in config["mlp_only_layers"] and config["num_experts"] > 0
            and (layer_idx + 1) % config["decoder_sparse_step"] == 0)


def qwen3_moe_tensors(config, rng, dtype="BF16"):
    """{name: (dtype, float32 values)} of a random Qwen3-MoE checkpoint."""
    H, V, hd = config["hidden_size"], config["vocab_size"], config["head_dim"]
    nh, nkv, E = config["num_attention_heads"], config["num_key_value_heads"], config["num_experts"]
    I, Im = config["intermediate_size"], config["moe_intermediate_size"]
    w = {"model.embed_tokens.weight": rng.standard_normal((V, H))}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w.update(_attention(rng, p, H, nh, nkv, hd, config["attention_bias"], qk_norm=True))
        if qwen3_moe_sparse(config, i):
            w[p + "mlp.gate.weight"] = _matrix(rng, E, H, 3.0)  # spread router probabilities: clear top-k
            for e in range(E):
                w[p + f"mlp.experts.{e}.gate_proj.weight"] = _matrix(rng, Im, H)
                w[p + f"mlp.experts.{e}.up_proj.weight"] = _matrix(rng, Im, H)
                w[p + f"mlp.experts.{e}.down_proj.weight"] = _matrix(rng, H, Im)
        else:
            w[p + "mlp.gate_proj.weight"] = _matrix(rng, I, H)
            w[p + "mlp.up_proj.weight"] = _matrix(rng, I, H)
            w[p + "mlp.down_proj.weight"] = _matrix(rng, H, I)
    w["model.norm.weight"] = _norm_weight(rng, H)
    if not config["tie_word_embeddings"]:
        w["lm_head.weight"] = _matrix(rng, V, H)
    return {name: (dtype, values.astype(np.float32)) for name, values in w.items()}


# ---------------------------------------------------------------------------------------------
# gpt-oss
# ---------------------------------------------------------------------------------------------

def gptoss_yarn(factor=8.0, original=256, beta_fast=32.0, beta_slow=1.0, truncate=False):
    return {"beta_fast": beta_fast, "beta_slow": beta_slow, "factor": factor,
            "original_max_position_embeddings": original, "rope_type": "yarn", "truncate": truncate}


def gptoss_config(num_layers=4, hidden=64, num_heads=4, num_kv_heads=2, head_dim=16, intermediate=64,
                  num_experts=8, top_k=2, window=4, layer_types=None, vocab=211, tied=False, theta=1000.0,
                  rope_scaling=None, attention_bias=True, swiglu_limit=7.0, mxfp4_experts=True):
    """GptOssConfig's keys as openai/gpt-oss-20b's config.json writes them, at a tiny size.
    The default YaRN (factor 8 over an original context of 256, theta 1000, head_dim 16) blends
    pairs 1..4 and divides pairs 5..7, so that every region of the ramp shows in a short test."""
    rope_scaling = gptoss_yarn() if rope_scaling is None else rope_scaling
    if layer_types is None:
        layer_types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(num_layers)]
    config = {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
        "attention_bias": attention_bias, "attention_dropout": 0.0, "eos_token_id": 2, "pad_token_id": 3,
        "experts_per_token": top_k, "head_dim": head_dim, "hidden_act": "silu", "hidden_size": hidden,
        "initial_context_length": rope_scaling.get("original_max_position_embeddings", 4096),
        "initializer_range": 0.02, "intermediate_size": intermediate, "layer_types": list(layer_types),
        "max_position_embeddings": int(rope_scaling.get("factor", 1.0) * rope_scaling.get("original_max_position_embeddings", 4096)),
        "num_attention_heads": num_heads, "num_experts_per_tok": top_k, "num_hidden_layers": num_layers,
        "num_key_value_heads": num_kv_heads, "num_local_experts": num_experts, "output_router_logits": False,
        "rms_norm_eps": 1e-5, "rope_scaling": rope_scaling, "rope_theta": theta, "router_aux_loss_coef": 0.9,
        "sliding_window": window, "swiglu_limit": swiglu_limit, "tie_word_embeddings": tied, "use_cache": True,
        "vocab_size": vocab,
    }
    if mxfp4_experts:
        config["quantization_config"] = {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                    "model.embed_tokens", "lm_head"],
                                         "quant_method": "mxfp4"}
    return config


def random_mxfp4(rng, leading_shape, scale_range):
    """Random blocks (every byte value) and scales drawn from scale_range (inclusive)."""
    blocks = rng.integers(0, 256, size=tuple(leading_shape) + (mxfp4.BYTES_PER_BLOCK,), dtype=np.uint8)
    scales = rng.integers(scale_range[0], scale_range[1] + 1, size=tuple(leading_shape), dtype=np.uint8)
    return blocks, scales


def gptoss_tensors(config, rng, dtype="BF16", layout="mxfp4", gate_up_scales=(121, 125), down_scales=(119, 123)):
    """{name: (dtype, values)} of a random gpt-oss checkpoint: dense tensors in `dtype`, expert
    biases in BF16, expert matrices as MXFP4 (U8) or, with layout "dequantized", as the BF16
    matrices those blocks decode to, in transformers' input-major [E, in, out] layout."""
    H, V, hd, I = config["hidden_size"], config["vocab_size"], config["head_dim"], config["intermediate_size"]
    nh, nkv, E = config["num_attention_heads"], config["num_key_value_heads"], config["num_local_experts"]
    shapes = mxfp4.expected_shapes(E, H, I)
    w = {"model.embed_tokens.weight": (dtype, rng.standard_normal((V, H)))}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        dense = _attention(rng, p, H, nh, nkv, hd, config["attention_bias"], qk_norm=False)
        dense[p + "self_attn.sinks"] = 1.0 + rng.standard_normal(nh)
        dense[p + "mlp.router.weight"] = _matrix(rng, E, H, 2.0)
        dense[p + "mlp.router.bias"] = 0.5 * rng.standard_normal(E)
        w.update({name: (dtype, values) for name, values in dense.items()})
        x = p + "mlp.experts."
        gu_blocks, gu_scales = random_mxfp4(rng, shapes["gate_up_proj_scales"], gate_up_scales)
        d_blocks, d_scales = random_mxfp4(rng, shapes["down_proj_scales"], down_scales)
        if layout == "mxfp4":
            w.update({x + "gate_up_proj_blocks": ("U8", gu_blocks), x + "gate_up_proj_scales": ("U8", gu_scales),
                      x + "down_proj_blocks": ("U8", d_blocks), x + "down_proj_scales": ("U8", d_scales)})
        elif layout == "dequantized":
            w[x + "gate_up_proj"] = ("BF16", mxfp4.decode_mxfp4(gu_blocks, gu_scales).transpose(0, 2, 1))
            w[x + "down_proj"] = ("BF16", mxfp4.decode_mxfp4(d_blocks, d_scales).transpose(0, 2, 1))
        else:
            raise ValueError(f"layout {layout!r}")
        w[x + "gate_up_proj_bias"] = ("BF16", 0.5 * rng.standard_normal((E, 2 * I)))
        w[x + "down_proj_bias"] = ("BF16", 0.1 * rng.standard_normal((E, H)))
    w["model.norm.weight"] = (dtype, _norm_weight(rng, H))
    if not config["tie_word_embeddings"]:
        w["lm_head.weight"] = (dtype, _matrix(rng, V, H))
    return {name: (kind, values if kind == "U8" else np.asarray(values, dtype=np.float32))
            for name, (kind, values) in w.items()}


# ---------------------------------------------------------------------------------------------
# Both, and their drafters
# ---------------------------------------------------------------------------------------------

def make_target(family, out_dir, seed=0, dtype="BF16", shards=1, layout="mxfp4", **config_options):
    """Writes a random target; returns (config dict, {tensor name: values stored})."""
    rng = np.random.default_rng(seed)
    if family == "qwen3-moe":
        config = qwen3_moe_config(**config_options)
        tensors = qwen3_moe_tensors(config, rng, dtype)
    elif family == "gpt-oss":
        config = gptoss_config(mxfp4_experts=layout == "mxfp4", **config_options)
        tensors = gptoss_tensors(config, rng, dtype, layout)
    else:
        raise ValueError(f"family {family!r} (known: {', '.join(FAMILIES)})")
    return config, write_model(out_dir, config, tensors, shards)


def make_moe_drafter(target_dir, out_dir, seed=0, dtype="BF16", window=None, **options):
    """A random DFlash drafter for a qwen3_moe or gpt_oss target: the target's RoPE settings (and
    attention biases for gpt-oss, as z-lab's gpt-oss drafter has); with `window`, layer 0 is a
    sliding-window layer of that many keys. Returns (config dict, stored values)."""
    with open(os.path.join(target_dir, "config.json"), "r", encoding="utf-8") as f:
        target = json.load(f)
    num_layers = options.get("num_layers", 2)
    # Taps out of layer order, last layer first (z-lab's default spread needs more target layers).
    L = target["num_hidden_layers"]
    options.setdefault("target_layer_ids", [L - 1 - (i % L) for i in range(num_layers)])
    if target.get("model_type") == "gpt_oss":
        options.setdefault("rope_scaling", target.get("rope_scaling"))
        options.setdefault("max_position_embeddings", target.get("max_position_embeddings"))
        options.setdefault("attention_bias", True)
    if window is not None:
        options.setdefault("layer_types", ["sliding_attention"] + ["full_attention"] * (num_layers - 1))
        options.setdefault("sliding_window", window)
    return make_drafter(target_dir, out_dir, seed=seed, dtype=dtype, **options)


def main(argv=None):
    parser = argparse.ArgumentParser(description="write a tiny random Qwen3-MoE or gpt-oss checkpoint (HF layout)")
    parser.add_argument("--family", required=True, choices=FAMILIES)
    parser.add_argument("--out", required=True, help="target directory to write")
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--window", type=int, default=4, help="gpt-oss sliding_window")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="BF16", choices=["F32", "F16", "BF16"])
    parser.add_argument("--drafter-out", default=None, help="also write a DFlash drafter there")
    parser.add_argument("--drafter-layers", type=int, default=2)
    parser.add_argument("--block-size", type=int, default=8)
    parser.add_argument("--drafter-window", type=int, default=None, help="drafter layer 0 slides over this many keys")
    args = parser.parse_args(argv)
    options = {"num_experts": args.experts, "top_k": args.top_k}
    if args.layers is not None:
        options["num_layers"] = args.layers
    if args.family == "gpt-oss":
        options["window"] = args.window
    make_target(args.family, args.out, seed=args.seed, dtype=args.dtype, **options)
    if args.drafter_out is not None:
        make_moe_drafter(args.out, args.drafter_out, seed=args.seed + 1, dtype=args.dtype, window=args.drafter_window,
                         num_layers=args.drafter_layers, block_size=args.block_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
