#!/usr/bin/python3
"""Writes a tiny random DFlash drafter directory for a given (tiny) target directory, in the
z-lab layout of docs/dflash.md §3, for the self-checks of dflash_reference.py.

    /usr/bin/python3 tests/reference/make_dflash_checkpoint.py --target DIR --out DIR \
        [--layers 2] [--block-size 16] [--seed 0] [--dtype BF16]

config.json: the drafter's Qwen3 keys (its layers are Qwen3 layers whatever the target's family), architectures ["DFlashDraftModel"], block_size (top level,
or inside dflash_config), num_target_layers, dflash_config {mask_token_id, target_layer_ids};
optionally rope_scaling (e.g. a gpt-oss target's YaRN), attention_bias, and sliding-window layers
(layer_types, use_sliding_window, sliding_window) as dflash_reference.py reads them.
MASK is the target's last embedding row (vocab_size - 1), beyond any tokenizer id the checks use.
model.safetensors: fc.weight [hidden, K * hidden], hidden_norm.weight, norm.weight and
layers.{i}.* with Qwen3 layer names (q/k/v/o biases when attention_bias), no "model." prefix.
"""

import argparse
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_reference import write_checkpoint  # noqa: E402
from dflash_reference import default_target_layer_ids  # noqa: E402


def drafter_config(target_config, num_layers=2, block_size=16, target_layer_ids=None, num_heads=None,
                   num_kv_heads=None, head_dim=None, intermediate_size=None, rope_theta=None,
                   write_target_layer_ids=True, block_size_in_dflash_config=False, rope_scaling=None,
                   attention_bias=False, layer_types=None, sliding_window=None, max_position_embeddings=None):
    """Shapes default to the target's (any family); the checks override some so that a reader
    taking them from the target instead of the drafter fails. rope_scaling: a rope_scaling dict
    for the drafter's own RoPE (none by default); attention_bias: q/k/v/o biases in its layers;
    layer_types with sliding_window: sliding-window layers (use_sliding_window true, as
    Qwen3Config needs for the window to apply)."""
    t = target_config
    target_theta = t.get("rope_theta", (t.get("rope_parameters") or {}).get("rope_theta"))
    target_head_dim = t.get("head_dim") or t["hidden_size"] // t["num_attention_heads"]
    L = t["num_hidden_layers"]
    ids = target_layer_ids if target_layer_ids is not None else default_target_layer_ids(L, num_layers)
    config = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3",
        "hidden_size": t["hidden_size"],
        "intermediate_size": intermediate_size or t["intermediate_size"],
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads or t["num_attention_heads"],
        "num_key_value_heads": num_kv_heads or t["num_key_value_heads"],
        "head_dim": head_dim or target_head_dim,
        "rope_theta": rope_theta or target_theta,
        "rms_norm_eps": t["rms_norm_eps"],
        "vocab_size": t["vocab_size"],
        "hidden_act": "silu", "attention_bias": attention_bias, "tie_word_embeddings": False,
        "num_target_layers": L,
        "dflash_config": {"mask_token_id": t["vocab_size"] - 1},
    }
    if rope_scaling is not None:
        config["rope_scaling"] = rope_scaling
    if max_position_embeddings is not None:
        config["max_position_embeddings"] = max_position_embeddings
    if layer_types is not None:
        config["layer_types"] = list(layer_types)
        config["use_sliding_window"] = sliding_window is not None
        config["sliding_window"] = sliding_window
    if write_target_layer_ids:
        config["dflash_config"]["target_layer_ids"] = list(ids)
    if block_size_in_dflash_config:
        config["dflash_config"]["block_size"] = block_size
    else:
        config["block_size"] = block_size
    return config


def random_drafter_weights(config, rng, zero_layers=False):
    """Random weights (norm weights not all ones, so a skipped norm shows); with zero_layers every
    layers.* tensor is zero, so each layer is the identity and the drafter predicts from the
    embedding of its input row alone."""
    H, I, hd = config["hidden_size"], config["intermediate_size"], config["head_dim"]
    nh, nkv = config["num_attention_heads"], config["num_key_value_heads"]
    K = len(config["dflash_config"].get("target_layer_ids")
            or default_target_layer_ids(config["num_target_layers"], config["num_hidden_layers"]))

    def matrix(rows, cols):
        return rng.standard_normal((rows, cols)) / math.sqrt(cols)

    def norm_weight(n):
        return 1.0 + 0.3 * rng.standard_normal(n)

    w = {"fc.weight": matrix(H, K * H), "hidden_norm.weight": norm_weight(H)}
    for i in range(config["num_hidden_layers"]):
        p = f"layers.{i}."
        w[p + "input_layernorm.weight"] = norm_weight(H)
        w[p + "self_attn.q_proj.weight"] = 2.0 * matrix(nh * hd, H)
        w[p + "self_attn.k_proj.weight"] = 2.0 * matrix(nkv * hd, H)
        w[p + "self_attn.v_proj.weight"] = matrix(nkv * hd, H)
        w[p + "self_attn.o_proj.weight"] = matrix(H, nh * hd)
        w[p + "self_attn.q_norm.weight"] = norm_weight(hd)
        w[p + "self_attn.k_norm.weight"] = norm_weight(hd)
        w[p + "post_attention_layernorm.weight"] = norm_weight(H)
        w[p + "mlp.gate_proj.weight"] = matrix(I, H)
        w[p + "mlp.up_proj.weight"] = matrix(I, H)
        w[p + "mlp.down_proj.weight"] = matrix(H, I)
        if config["attention_bias"]:
            for proj, n in (("q_proj", nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd), ("o_proj", H)):
                w[p + f"self_attn.{proj}.bias"] = 0.5 * rng.standard_normal(n)
        if zero_layers:
            for name in list(w):
                if name.startswith(p):
                    w[name] = np.zeros_like(w[name])
    w["norm.weight"] = norm_weight(H)
    return {k: v.astype(np.float32) for k, v in w.items()}


def make_drafter(target_dir, out_dir, seed=0, dtype="BF16", zero_layers=False, **config_options):
    """Writes the drafter directory; returns (config dict, {tensor name: float32 values stored})."""
    with open(os.path.join(target_dir, "config.json"), "r", encoding="utf-8") as f:
        target_config = json.load(f)
    config = drafter_config(target_config, **config_options)
    weights = random_drafter_weights(config, np.random.default_rng(seed), zero_layers)
    return config, write_checkpoint(out_dir, config, weights, dtype)


def main(argv=None):
    parser = argparse.ArgumentParser(description="write a tiny random DFlash drafter for a target")
    parser.add_argument("--target", required=True, help="target checkpoint directory")
    parser.add_argument("--out", required=True, help="drafter directory to write")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="BF16", choices=["F32", "F16", "BF16"])
    args = parser.parse_args(argv)
    make_drafter(args.target, args.out, seed=args.seed, dtype=args.dtype,
                 num_layers=args.layers, block_size=args.block_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
