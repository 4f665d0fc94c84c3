#!/usr/bin/python3
"""Self-check of the NumPy DFlash reference (dflash_reference.py) on Llama targets: tiny random
Llama targets (biases, llama3 RoPE scaling) with tiny drafters, checked as
check_dflash_reference.py checks Qwen3 pairs.

    /usr/bin/python3 tests/reference/check_llama_dflash_reference.py     # exits non-zero on any failure

The drafter's layers are Qwen3 layers whatever the target's family (q_norm/k_norm, no biases), and
its RoPE is what its own config.json says: one drafter here carries llama3 RoPE scaling and q/k/v/o
biases of its own, the other plain RoPE and no biases, so a drafter reading the target's RoPE settings shows as a large difference.
The draft logits are compared with the z-lab-style implementation of check_dflash_reference.py,
fed by the token-by-token Llama target of check_llama_reference.py.
"""

import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dflash_reference as dflash  # noqa: E402
import llama_reference as llama  # noqa: E402
import rope_reference as rope  # noqa: E402
import target_reference as targets  # noqa: E402
from check_dflash_reference import (check, failures, max_rel_diff, slow_draft_logits, cache_for,  # noqa: E402
                                    check_lossless, check_partial_acceptance, check_cli)
from check_llama_reference import make_llama, slow_llama_forward, pair_frequency  # noqa: E402
from check_reference import write_checkpoint  # noqa: E402
from make_dflash_checkpoint import make_drafter  # noqa: E402

FLOAT64_TOL = 1e-9
DRAFTER_LLAMA3 = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 2.0,
                  "original_max_position_embeddings": 48}
TARGET_LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 64}


def check_one_step(name, target_dir, target_config, target_stored, drafter_dir, drafter_config, drafter_stored,
                   committed, x, block_size):
    target = targets.load_target(target_dir)
    drafter = dflash.load_drafter(drafter_dir, num_target_layers=target.config.num_hidden_layers)
    layer_ids = list(drafter.config.target_layer_ids)
    draft, logits = dflash.draft_block(target, drafter, cache_for(target, drafter, committed), len(committed), x, block_size)
    hd = drafter_config["head_dim"]
    slow = slow_draft_logits(target_stored, target_config, drafter_stored, drafter_config, layer_ids, committed, x,
                             block_size, target_forward=slow_llama_forward,
                             pair_frequency=lambda i: pair_frequency(i, hd, drafter_config))
    d = max_rel_diff(logits, slow)
    check(logits.shape == (block_size - 1, target_config["vocab_size"]) and d < FLOAT64_TOL,
          f"{name}: draft logits [B-1={block_size - 1}, vocab] equal the z-lab-style implementation (rel diff {d:.1e})")
    check(draft == [int(np.argmax(r)) for r in slow], f"{name}: draft tokens are the argmax of rows 1..B-1")
    return logits


def main():
    rng = np.random.default_rng(20260202)
    with tempfile.TemporaryDirectory() as tmp:
        # Target: Llama, GQA, untied, attention and MLP biases, llama3 RoPE, 6 layers.
        target_dir = os.path.join(tmp, "llama_target")
        target_config, target_stored = make_llama(
            target_dir, rng, "BF16", num_heads=4, num_kv_heads=2, tied=False, attention_bias=True, mlp_bias=True,
            scaling=TARGET_LLAMA3, num_layers=6)
        # Drafter A: its own heads, head_dim, theta and llama3 scaling, q/k/v/o biases; taps out of order.
        drafter_a_dir = os.path.join(tmp, "drafter_a")
        drafter_a_config, drafter_a_stored = make_drafter(
            target_dir, drafter_a_dir, seed=21, dtype="BF16", num_layers=2, block_size=16, target_layer_ids=[4, 1],
            num_heads=2, num_kv_heads=1, head_dim=8, intermediate_size=40, rope_theta=30.0, rope_scaling=DRAFTER_LLAMA3,
            attention_bias=True)
        # Drafter B: default taps, plain RoPE of the target's theta (no scaling although the target has it).
        drafter_b_dir = os.path.join(tmp, "drafter_b")
        drafter_b_config, drafter_b_stored = make_drafter(
            target_dir, drafter_b_dir, seed=22, dtype="F32", num_layers=3, block_size=8, write_target_layer_ids=False)

        target = targets.load_target(target_dir)
        drafter_a = dflash.load_drafter(drafter_a_dir)
        drafter_b = dflash.load_drafter(drafter_b_dir)
        check(isinstance(target, llama.LlamaModel), "load: the target is read as a Llama target by its model_type")
        check(drafter_a.config.layers.rope_scaling == rope.RopeScaling("llama3", 4.0, 1.0, 2.0, 48)
              and drafter_a.config.layers.rope_theta == 30.0 and drafter_b.config.layers.rope_scaling is None,
              "load: each drafter's RoPE (theta, scaling) comes from its own config, not the target's")
        check(all("self_attn.q_norm" in layer and "self_attn.k_norm" in layer for layer in drafter_a.layers),
              "load: the drafter's layers are Qwen3 layers (q_norm, k_norm) under a Llama target")
        check(all(f"self_attn.{m}_proj.bias" in layer for layer in drafter_a.layers for m in "qkvo")
              and not any(k.endswith(".bias") for layer in drafter_b.layers for k in layer),
              "load: drafter A's attention_bias brings its q/k/v/o biases, drafter B has none")

        committed = [int(t) for t in rng.integers(0, 100, size=11)]
        for B in (2, 8, 16):
            logits_a = check_one_step(f"llama step A B={B}", target_dir, target_config, target_stored, drafter_a_dir,
                                      drafter_a_config, drafter_a_stored, committed, 42, B)
        check_one_step("llama step B B=8", target_dir, target_config, target_stored, drafter_b_dir, drafter_b_config,
                       drafter_b_stored, committed[:6], 17, 8)
        check_one_step("llama step A start=1", target_dir, target_config, target_stored, drafter_a_dir, drafter_a_config,
                       drafter_a_stored, committed[:1], 5, 4)

        # The drafter's own RoPE scaling is used: without it the same weights draft other logits.
        plain_dir = os.path.join(tmp, "drafter_a_plain_rope")
        make_drafter(target_dir, plain_dir, seed=21, dtype="BF16", num_layers=2, block_size=16, target_layer_ids=[4, 1],
                     num_heads=2, num_kv_heads=1, head_dim=8, intermediate_size=40, rope_theta=30.0, attention_bias=True)
        drafter_plain = dflash.load_drafter(plain_dir)
        _, plain_logits = dflash.draft_block(target, drafter_plain, cache_for(target, drafter_plain, committed),
                                             len(committed), 42, 16)
        check(max_rel_diff(plain_logits, logits_a) > 1e-3,
              "drafter RoPE: the same drafter without its llama3 scaling drafts other logits")

        # The drafter's biases are used, the k/v ones on the context rows too: zeroing only the k and
        # v biases of its first layer changes the draft logits.
        without = dict(drafter_a_stored)
        for m in "kv":
            without[f"layers.0.self_attn.{m}_proj.bias"] = np.zeros_like(without[f"layers.0.self_attn.{m}_proj.bias"])
        without_dir = os.path.join(tmp, "drafter_a_without_kv_bias")
        write_checkpoint(without_dir, drafter_a_config, without, "F32")
        drafter_without = dflash.load_drafter(without_dir)
        _, without_logits = dflash.draft_block(target, drafter_without, cache_for(target, drafter_without, committed),
                                               len(committed), 42, 16)
        check(max_rel_diff(without_logits, logits_a) > 1e-3, "drafter biases: zeroing layer 0's k/v biases changes the drafts")

        prompts = [[int(t) for t in rng.integers(0, 100, size=n)] for n in (1, 5, 9)]
        check_lossless("llama lossless A", target, drafter_a, prompts, (2, 4, 8, 16), 5)
        check_lossless("llama lossless B", target, drafter_b, prompts[1:2], (2, 4, 8), 5)
        zero_dir = os.path.join(tmp, "drafter_zero_layers")
        make_drafter(target_dir, zero_dir, seed=3, dtype="BF16", zero_layers=True, num_layers=2, block_size=16)
        check_lossless("llama lossless, zero-layer drafter", target, dflash.load_drafter(zero_dir), prompts[2:], (4, 16), 4)

        # Random drafters are never right, so the loop under every acceptance length is run with an
        # oracle drafter that copies the Llama target's greedy continuation and spoils chosen rows.
        check_partial_acceptance(target, drafter_a, prompts[1])

        check_cli(target_dir, drafter_a_dir, target, prompts[1], 8, 3, tmp)

    print(f"\n{len(failures)} failure(s)" if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
