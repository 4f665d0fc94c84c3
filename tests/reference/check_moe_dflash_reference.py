#!/usr/bin/python3
"""Self-check of the NumPy DFlash reference (dflash_reference.py) on mixture-of-experts targets:
Qwen3-MoE and gpt-oss (MXFP4 experts, sliding windows, sinks, YaRN), with drafters like z-lab's for
them (Qwen3 layers; for gpt-oss the target's YaRN and attention biases) and sliding-window drafter
layers (causal inside the block, windowed over the context, as z-lab's Qwen3DFlashAttention).

    /usr/bin/python3 tests/reference/check_moe_dflash_reference.py     # exits non-zero on any failure

The drafter logits are compared with a second implementation in the z-lab style (context rebuilt
every step from the token-by-token target of check_moe_reference.py, k_proj over [context ;
block], RoPE pair by pair with OpenAI's statement of YaRN, the visible keys of each row listed by
explicit rules), then the loop is checked lossless against plain greedy decoding.
"""

import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_dflash_reference as dense_checks  # noqa: E402
import dflash_reference as dflash  # noqa: E402
import target_reference as targets  # noqa: E402
from check_moe_reference import slow_forward, openai_yarn, rmsnorm_vector, rotate_pairs, max_rel_diff  # noqa: E402
from make_moe_checkpoint import make_target, make_moe_drafter  # noqa: E402
from check_reference import write_checkpoint  # noqa: E402
from safetensors_numpy import load_safetensors  # noqa: E402

FLOAT64_TOL = 1e-9
failures = []


def check(condition, what):
    print(("PASS  " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


# ---------------------------------------------------------------------------------------------
# The second implementation of one draft step
# ---------------------------------------------------------------------------------------------

def visible(layer_type, window, query_position, key_position):
    """z-lab's rule: a sliding layer is causal and sees the last `window` positions (when it has
    a window); a full layer sees everything."""
    if layer_type != "sliding_attention":
        return True
    return key_position <= query_position and (window is None or query_position - key_position < window)


def slow_draft_logits(target_stored, target_config, drafter_stored, drafter_config, committed, x, block_size):
    start = len(committed)
    _, taps, _ = slow_forward(target_stored, target_config, committed)
    D = {k: v.astype(np.float64) for k, v in drafter_stored.items()}
    embedding = target_stored["model.embed_tokens.weight"].astype(np.float64)
    lm_head = target_stored.get("lm_head.weight", target_stored["model.embed_tokens.weight"]).astype(np.float64)
    c = drafter_config
    hd, nh, nkv, eps = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"], c["rms_norm_eps"]
    layer_ids = c["dflash_config"]["target_layer_ids"]
    if c.get("rope_scaling"):
        frequency, magnitude = openai_yarn(hd, c["rope_theta"], c["rope_scaling"])
    else:
        frequency, magnitude = (lambda i: c["rope_theta"] ** (-2 * i / hd)), 1.0
    layer_types = c.get("layer_types") or ["full_attention"] * c["num_hidden_layers"]
    window = c.get("sliding_window") if c.get("use_sliding_window") else None

    def affine(name, v_in):
        y = D[name + ".weight"] @ v_in
        return y + D[name + ".bias"] if name + ".bias" in D else y

    context = [rmsnorm_vector(D["fc.weight"] @ np.concatenate([taps[t, i] for i in layer_ids]), D["hidden_norm.weight"], eps)
               for t in range(start)]
    rows = [embedding[x].copy()] + [embedding[c["dflash_config"]["mask_token_id"]].copy() for _ in range(block_size - 1)]
    for layer in range(c["num_hidden_layers"]):
        p = f"layers.{layer}."
        normed = [rmsnorm_vector(r, D[p + "input_layernorm.weight"], eps) for r in rows]
        keys, values = [], []
        for position, v_in in enumerate(context + normed):  # positions 0 .. start + B - 1
            k_all, v_all = affine(p + "self_attn.k_proj", v_in), affine(p + "self_attn.v_proj", v_in)
            keys.append([rotate_pairs(rmsnorm_vector(k_all[j * hd:(j + 1) * hd], D[p + "self_attn.k_norm.weight"], eps),
                                      position, frequency, magnitude) for j in range(nkv)])
            values.append([v_all[j * hd:(j + 1) * hd] for j in range(nkv)])
        new_rows = []
        for i, n in enumerate(normed):
            q_all = affine(p + "self_attn.q_proj", n)
            seen = [t for t in range(len(keys)) if visible(layer_types[layer], window, start + i, t)]
            heads = []
            for h in range(nh):
                kv = h * nkv // nh
                q = rotate_pairs(rmsnorm_vector(q_all[h * hd:(h + 1) * hd], D[p + "self_attn.q_norm.weight"], eps),
                                 start + i, frequency, magnitude)
                scores = [float(np.dot(q, keys[t][kv])) / math.sqrt(hd) for t in seen]
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                heads.append(sum(e[j] / sum(e) * values[t][kv] for j, t in enumerate(seen)))
            r = rows[i] + affine(p + "self_attn.o_proj", np.concatenate(heads))
            m = rmsnorm_vector(r, D[p + "post_attention_layernorm.weight"], eps)
            gate = D[p + "mlp.gate_proj.weight"] @ m
            new_rows.append(r + D[p + "mlp.down_proj.weight"] @ (gate / (1.0 + np.exp(-gate)) * (D[p + "mlp.up_proj.weight"] @ m)))
        rows = new_rows
    return np.array([lm_head @ rmsnorm_vector(r, D["norm.weight"], eps) for r in rows[1:]])


def cache_for(target, drafter, committed):
    cache = dflash.DraftContextCache(drafter)
    _, hidden_states = targets.forward(target, committed)
    dflash.inject_committed(cache, drafter, hidden_states, np.arange(len(committed)))
    return cache


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

def check_masks_by_hand():
    sliding = dflash.block_attention_mask([5, 6, 7], np.arange(5), dflash.LayerAttention(causal=True, window=3)).astype(int)
    check(sliding.tolist() == [[0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 1, 1, 1]],
          "drafter sliding layer, window 3, block at 5: row j sees positions 3+j..5+j (context then causal block)")
    causal = dflash.block_attention_mask([5, 6, 7], np.arange(5), dflash.LayerAttention(causal=True)).astype(int)
    check(causal.tolist() == [[1] * 6 + [0, 0], [1] * 7 + [0], [1] * 8], "drafter sliding layer without a window: causal only")
    full = dflash.block_attention_mask([5, 6, 7], np.arange(5), dflash.LayerAttention())
    check(full.all() and full.shape == (3, 8), "drafter full layer: every context and block row, both directions")
    both_ways = dflash.block_attention_mask([5, 6, 7], np.arange(5), dflash.LayerAttention(causal=False, window=2)).astype(int)
    check(both_ways.tolist() == [[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 1, 1]],
          "drafter non-causal window 2 (is_causal false): |query - key| < 2, as z-lab's mask")


def check_config_reading(tmp, drafter_dir, drafter_config):
    d = dflash.load_drafter(drafter_dir)
    check(d.config.layer_attention == (dflash.LayerAttention(True, 3), dflash.LayerAttention(False, None))
          and d.config.layers.rope_scaling is not None and d.config.layers.rope_scaling.rope_type == "yarn"
          and d.config.layers.attention_bias,
          "load: layer 0 sliding (causal, window 3), layer 1 full; YaRN and attention biases from the drafter's own config")

    def variant(label, change):
        path = os.path.join(tmp, "drafter_" + label)
        write_checkpoint(path, dict(drafter_config, **change), load_safetensors(drafter_dir), "F32")
        return path

    no_window = dflash.load_drafter(variant("nowindow", {"use_sliding_window": False}))
    check(no_window.config.layer_attention[0] == dflash.LayerAttention(True, None),
          "load: without use_sliding_window the window does not apply (Qwen3Config) but the layer stays causal")
    all_causal = dflash.load_drafter(variant("causal", {"is_causal": True}))
    check(all(a.causal for a in all_causal.config.layer_attention), "load: is_causal true makes every layer causal")
    for label, change, needle in (("implicit", {"layer_types": None}, "use_sliding_window"),
                                  ("chunked", {"layer_types": ["chunked_attention", "full_attention"]}, "chunked_attention"),
                                  ("count", {"layer_types": ["full_attention"]}, "layer_types"),
                                  ("scale", {"dflash_config": dict(drafter_config["dflash_config"], input_embedding_scale=2.0)},
                                   "input_embedding_scale"),
                                  ("multiplier", {"output_multiplier": 0.0}, "output_multiplier")):
        config = {k: v for k, v in dict(drafter_config, **change).items() if v is not None}
        path = os.path.join(tmp, "drafter_bad_" + label)
        write_checkpoint(path, config, load_safetensors(drafter_dir), "F32")
        try:
            dflash.load_drafter(path)
            ok = False
        except ValueError as e:
            ok = needle in str(e)
        check(ok, f"load: refuses {label} ({needle})")


# z-lab/gpt-oss-20b-DFlash's config.json as public code copies it (one copy adds the YaRN below).
GPT_OSS_20B_DFLASH = {
    "architectures": ["DFlashDraftModel"], "attention_bias": True, "attention_dropout": 0.0, "block_size": 8,
    "bos_token_id": 199998, "dflash_config": {"mask_token_id": 200000, "target_layer_ids": [1, 6, 11, 16, 21]},
    "dtype": "bfloat16", "eos_token_id": 200002, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880,
    "initial_context_length": 4096, "initializer_range": 0.02, "intermediate_size": 7680, "max_position_embeddings": 131072,
    "model_type": "gpt_oss", "num_attention_heads": 64, "num_hidden_layers": 8, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-5, "rope_theta": 150000, "vocab_size": 201088}


def check_published_drafter_config(tmp):
    for label, config in (("as copied", GPT_OSS_20B_DFLASH),
                          ("with YaRN", dict(GPT_OSS_20B_DFLASH, rope_scaling={"rope_type": "yarn", "factor": 32.0,
                                                                              "original_max_position_embeddings": 4096}))):
        path = os.path.join(tmp, "gpt_oss_20b_dflash_" + label.replace(" ", "_"))
        os.makedirs(path)
        json.dump(config, open(os.path.join(path, "config.json"), "w"))
        c = dflash.read_dflash_config(path, num_target_layers=24)
        yarn_ok = (c.layers.rope_scaling is None) if label == "as copied" else (c.layers.rope_scaling.factor == 32.0
                                                                                and c.layers.rope_scaling.truncate)
        check(c.block_size == 8 and c.mask_token_id == 200000 and c.target_layer_ids == (1, 6, 11, 16, 21)
              and c.layers.num_hidden_layers == 8 and c.layers.head_dim == 64 and c.layers.attention_bias
              and all(a == dflash.LayerAttention() for a in c.layer_attention) and yarn_ok,
              f"gpt-oss-20b-DFlash's config.json ({label}): block 8, MASK 200000, taps 1, 6, 11, 16, 21 of 24, "
              "8 full bidirectional layers with attention biases")


def check_one_step(name, target_dir, target_config, target_stored, drafter_dir, drafter_config, drafter_stored,
                   committed, x, block_size):
    target = targets.load_target(target_dir)
    drafter = dflash.load_drafter(drafter_dir, num_target_layers=target.config.num_hidden_layers)
    draft, logits = dflash.draft_block(target, drafter, cache_for(target, drafter, committed), len(committed), x, block_size)
    slow = slow_draft_logits(target_stored, target_config, drafter_stored, drafter_config, committed, x, block_size)
    d = max_rel_diff(logits, slow)
    check(logits.shape == (block_size - 1, target_config["vocab_size"]) and d < FLOAT64_TOL,
          f"{name}: draft logits [B-1={block_size - 1}, vocab] equal the z-lab-style implementation (rel diff {d:.1e})")
    check(draft == [int(np.argmax(r)) for r in slow], f"{name}: draft tokens are the argmax of rows 1..B-1")


def check_sliding_drafter(target, drafter, committed, x):
    """A drafter whose only layer slides over 3 keys: row j reads positions start+j-2 .. start+j."""
    start, B = len(committed), 6
    cache = cache_for(target, drafter, committed)
    positions = np.arange(start, start + B)
    block = targets.qwen3_reference.embed(target, [x] + [drafter.config.mask_token_id] * (B - 1))
    base = dflash.drafter_forward(drafter, block, positions, cache.rows_before(start), cache.positions_before(start))
    later = block.copy()
    later[B - 1] += 1.0
    out = dflash.drafter_forward(drafter, later, positions, cache.rows_before(start), cache.positions_before(start))
    check(max_rel_diff(out[:B - 1], base[:B - 1]) < 1e-14 and max_rel_diff(out[B - 1], base[B - 1]) > 1e-6,
          "sliding drafter: changing the last block row changes only that row (causal inside the block)")
    for position, rows_seeing in ((start - 3, []), (start - 2, [0]), (start - 1, [0, 1])):
        changed = cache_for(target, drafter, committed)
        changed.keys[0] = changed.keys[0].copy()
        changed.keys[0][position] += 1.0
        out = dflash.drafter_forward(drafter, block, positions, changed.rows_before(start), changed.positions_before(start))
        moved = [j for j in range(B) if max_rel_diff(out[j], base[j]) > 1e-9]
        check(moved == rows_seeing, f"sliding drafter window 3: context position start{position - start} is read by rows {rows_seeing}")


def check_lossless(name, target, drafter, prompts, block_sizes, num_steps):
    for prompt in prompts:
        for B in block_sizes:
            result = dflash.speculative_generate(target, drafter, prompt, B, num_steps)
            greedy = targets.greedy_continuation(target, prompt, len(result["generated"]))
            taus = [s["accepted"] + 1 for s in result["steps"]]
            check(result["generated"] == greedy and len(result["generated"]) == 1 + sum(taus),
                  f"{name}: prompt of {len(prompt)}, B={B}: {len(greedy)} speculative tokens equal plain greedy (tau {taus})")


def check_cli(target_dir, drafter_dir, target, prompt, block_size, num_steps, tmp):
    prefix = os.path.join(tmp, "cli_moe")
    run = subprocess.run([sys.executable, os.path.join(HERE, "dflash_reference.py"), "--target", target_dir, "--drafter", drafter_dir,
                          "--tokens", ",".join(map(str, prompt)), "--steps", str(num_steps), "--block-size", str(block_size),
                          "--out", prefix], capture_output=True, text=True)
    if run.returncode != 0:
        check(False, f"cli: ran ({run.stderr.strip()[-300:]})")
        return
    expected = dflash.speculative_generate(target, dflash.load_drafter(drafter_dir), prompt, block_size, num_steps)
    info = json.load(open(prefix + ".json"))
    V = target.config.vocab_size
    logits = np.fromfile(prefix + ".draft_logits.f32", dtype="<f4")
    check(info["steps"] == expected["steps"] and info["generated"] == expected["generated"]
          and logits.size == num_steps * (block_size - 1) * V
          and np.allclose(logits.reshape(num_steps, block_size - 1, V), expected["draft_logits"], rtol=1e-6, atol=1e-6),
          "cli: gpt-oss pair, json steps and generated, draft_logits.f32 [S, B-1, vocab] equal speculative_generate")


def main():
    rng = np.random.default_rng(20251126)
    with tempfile.TemporaryDirectory() as tmp:
        check_masks_by_hand()
        check_published_drafter_config(tmp)

        g_dir, g_drafter_dir = os.path.join(tmp, "gptoss"), os.path.join(tmp, "gptoss_drafter")
        g_config, g_stored = make_target("gpt-oss", g_dir, seed=7, num_layers=4)
        gd_config, gd_stored = make_moe_drafter(g_dir, g_drafter_dir, seed=8, dtype="F32", window=3, num_layers=2, block_size=8,
                                                num_heads=2, num_kv_heads=1, head_dim=8, intermediate_size=40)
        q_dir, q_drafter_dir = os.path.join(tmp, "qmoe"), os.path.join(tmp, "qmoe_drafter")
        q_config, q_stored = make_target("qwen3-moe", q_dir, seed=9, num_layers=3)
        qd_config, qd_stored = make_moe_drafter(q_dir, q_drafter_dir, seed=10, dtype="BF16", num_layers=2, block_size=16,
                                                rope_theta=300.0)

        check_config_reading(tmp, g_drafter_dir, gd_config)
        committed = [int(t) for t in rng.integers(0, 200, size=11)]
        for B in (2, 4, 8):
            check_one_step(f"gpt-oss pair B={B} (YaRN, biases, sliding layer 0)", g_dir, g_config, g_stored, g_drafter_dir,
                           gd_config, gd_stored, committed, 42, B)
        check_one_step("gpt-oss pair start=1", g_dir, g_config, g_stored, g_drafter_dir, gd_config, gd_stored, committed[:1], 5, 8)
        for B in (4, 16):
            check_one_step(f"qwen3-moe pair B={B}", q_dir, q_config, q_stored, q_drafter_dir, qd_config, qd_stored, committed, 42, B)

        one_dir = os.path.join(tmp, "gptoss_drafter_sliding")
        make_moe_drafter(g_dir, one_dir, seed=11, dtype="F32", window=3, num_layers=1, block_size=8)
        g_target = targets.load_target(g_dir)
        check_sliding_drafter(g_target, dflash.load_drafter(one_dir), committed, 42)

        prompts = [[int(t) for t in rng.integers(0, 200, size=n)] for n in (1, 6)]
        check_lossless("lossless gpt-oss", g_target, dflash.load_drafter(g_drafter_dir), prompts, (2, 4, 8), 4)
        check_lossless("lossless qwen3-moe", targets.load_target(q_dir), dflash.load_drafter(q_drafter_dir), prompts[1:], (2, 8, 16), 3)
        # Random drafters accept nothing: every acceptance length, with an oracle drafter on each family.
        dense_checks.check_partial_acceptance(g_target, dflash.load_drafter(g_drafter_dir), prompts[1])
        dense_checks.check_partial_acceptance(targets.load_target(q_dir), dflash.load_drafter(q_drafter_dir), prompts[1])
        failures.extend(dense_checks.failures)
        check_cli(g_dir, g_drafter_dir, g_target, prompts[1], 8, 3, tmp)

    print(f"\n{len(failures)} failure(s)" if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
