#!/usr/bin/python3
"""Self-check of the NumPy DFlash reference (dflash_reference.py): builds tiny random targets and
drafters, then checks properties that a bug in the reference would break.

    /usr/bin/python3 tests/reference/check_dflash_reference.py     # exits non-zero on any failure

Losslessness alone says nothing about the drafter (any drafter is lossless), so the drafter's
logits are also compared with a second implementation written differently on purpose, in the
style of the public z-lab code: context features rebuilt from scratch every step from the
token-by-token target of check_reference.py, k_proj applied to [context ; block] concatenated,
RoPE at positions 0..start+B-1, one row and one head at a time.
The drafters deliberately differ from their targets in heads, head_dim and rope_theta, and tap
layers out of order, so that reading any of these from the wrong place shows as a large difference.
"""

import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dflash_reference as dflash  # noqa: E402
import qwen3_reference as qwen3  # noqa: E402
import target_reference as targets  # noqa: E402
from check_reference import tiny_config, random_weights, write_checkpoint, slow_forward  # noqa: E402
from make_dflash_checkpoint import make_drafter  # noqa: E402
from safetensors_numpy import load_safetensors  # noqa: E402

FLOAT64_TOL = 1e-9
failures = []


def check(condition, what):
    print(("PASS  " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def max_rel_diff(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


# ---------------------------------------------------------------------------------------------
# The second implementation of one draft step
# ---------------------------------------------------------------------------------------------

def slow_draft_logits(target_weights, target_config, drafter_weights, drafter_config, layer_ids,
                      committed, x, block_size, target_forward=slow_forward, pair_frequency=None):
    """Drafter logits of rows 1..B-1 for a block at start = len(committed), from raw tensor dicts.
    target_forward: the target family's token-by-token forward; pair_frequency(i): the drafter's
    RoPE speed of pair i when it is not plain theta^(-2i/head_dim)."""
    start = len(committed)
    _, taps = target_forward(target_weights, target_config, committed)  # taps[t, layer]: after layer
    D = {k: v.astype(np.float64) for k, v in drafter_weights.items()}
    T = {k: v.astype(np.float64) for k, v in target_weights.items()}
    embedding = T["model.embed_tokens.weight"]
    lm_head = T.get("lm_head.weight", embedding)
    hd, nh, nkv = drafter_config["head_dim"], drafter_config["num_attention_heads"], drafter_config["num_key_value_heads"]
    eps, theta, half = drafter_config["rms_norm_eps"], drafter_config["rope_theta"], drafter_config["head_dim"] // 2
    mask = drafter_config["dflash_config"]["mask_token_id"]

    def rmsnorm_vector(v, w):
        return w * (v / math.sqrt(float(np.dot(v, v)) / len(v) + eps))

    def rotate_pairs(v, position):
        out = v.copy()
        for i in range(half):
            angle = position / theta ** (2 * i / hd) if pair_frequency is None else position * pair_frequency(i)
            c, s = math.cos(angle), math.sin(angle)
            out[i] = v[i] * c - v[i + half] * s
            out[i + half] = v[i] * s + v[i + half] * c
        return out

    def affine(name, v_in):  # W v (+ b when the drafter has attention biases)
        y = D[name + ".weight"] @ v_in
        return y + D[name + ".bias"] if name + ".bias" in D else y

    context = [rmsnorm_vector(D["fc.weight"] @ np.concatenate([taps[t, i] for i in layer_ids]), D["hidden_norm.weight"])
               for t in range(start)]
    rows = [embedding[x].copy()] + [embedding[mask].copy() for _ in range(block_size - 1)]
    for layer in range(drafter_config["num_hidden_layers"]):
        p = f"layers.{layer}."
        normed = [rmsnorm_vector(r, D[p + "input_layernorm.weight"]) for r in rows]
        kv_inputs = context + normed  # sequence positions 0..start+B-1
        keys, values = [], []
        for position, v_in in enumerate(kv_inputs):
            k_all, v_all = affine(p + "self_attn.k_proj", v_in), affine(p + "self_attn.v_proj", v_in)
            keys.append([rotate_pairs(rmsnorm_vector(k_all[j * hd:(j + 1) * hd], D[p + "self_attn.k_norm.weight"]), position)
                         for j in range(nkv)])
            values.append([v_all[j * hd:(j + 1) * hd] for j in range(nkv)])
        new_rows = []
        for i, n in enumerate(normed):
            q_all = affine(p + "self_attn.q_proj", n)
            heads_out = []
            for h in range(nh):
                kv_head = (h * nkv) // nh
                q = rotate_pairs(rmsnorm_vector(q_all[h * hd:(h + 1) * hd], D[p + "self_attn.q_norm.weight"]), start + i)
                scores = [float(np.dot(q, keys[j][kv_head])) / math.sqrt(hd) for j in range(len(keys))]
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                heads_out.append(sum((e[j] / sum(e)) * values[j][kv_head] for j in range(len(keys))))
            r = rows[i] + affine(p + "self_attn.o_proj", np.concatenate(heads_out))
            m = rmsnorm_vector(r, D[p + "post_attention_layernorm.weight"])
            gate = D[p + "mlp.gate_proj.weight"] @ m
            r = r + D[p + "mlp.down_proj.weight"] @ (gate / (1.0 + np.exp(-gate)) * (D[p + "mlp.up_proj.weight"] @ m))
            new_rows.append(r)
        rows = new_rows
    return np.array([lm_head @ rmsnorm_vector(r, D["norm.weight"]) for r in rows[1:]])


# ---------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------

def make_target(model_dir, rng, num_heads, num_kv_heads, tied, dtype, num_layers=6, theta=50.0):
    config = dict(tiny_config(num_heads, num_kv_heads, tied, theta=theta), num_hidden_layers=num_layers)
    stored = write_checkpoint(model_dir, config, random_weights(config, rng, with_lm_head=not tied), dtype)
    return config, stored


def cache_for(target, drafter, committed):
    """The draft context cache as the loop would hold it with `committed` in the target."""
    cache = dflash.DraftContextCache(drafter)
    _, hidden_states = targets.forward(target, committed)
    dflash.inject_committed(cache, drafter, hidden_states, np.arange(len(committed)))
    return cache


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

def check_default_layer_ids():
    got = dflash.default_target_layer_ids(36, 5)
    check(got == [1, 9, 17, 25, 33], f"(e) default target_layer_ids for L=36, K=5 are 1, 9, 17, 25, 33 (got {got})")
    got = dflash.default_target_layer_ids(28, 5)
    check(got == [1, 7, 13, 19, 25], f"(e) default target_layer_ids for L=28, K=5 are 1, 7, 13, 19, 25 (got {got})")
    got = dflash.default_target_layer_ids(6, 3)
    check(got == [1, 2, 3], f"(e) default target_layer_ids for L=6, K=3 are 1, 2, 3 (got {got})")


def check_accept_longest_prefix():
    cases = [([5, 6, 7], [5, 6, 7, 8], 3), ([5, 6, 7], [5, 9, 7, 8], 1), ([5, 6, 7], [4, 6, 7, 8], 0),
             ([5], [5, 1], 1), ([1, 2, 3], [1, 2, 9, 3], 2)]
    ok = all(dflash.accept_longest_prefix(d, y) == a for d, y, a in cases)
    check(ok, "acceptance: a = longest k with d_i == y_{i-1} for all i <= k (a later match after a miss does not count)")


def check_loading(tmp, target_dir, drafter_dir, drafter_config):
    drafter = dflash.load_drafter(drafter_dir)
    c = drafter.config
    check(c.target_layer_ids == tuple(drafter_config["dflash_config"]["target_layer_ids"])
          and c.block_size == drafter_config["block_size"] and c.mask_token_id == drafter_config["vocab_size"] - 1
          and c.layers.head_dim == drafter_config["head_dim"] and c.layers.rope_theta == drafter_config["rope_theta"],
          "load: target_layer_ids, block_size, mask_token_id, head_dim and rope_theta come from the drafter config")
    n_tensors = 3 + 11 * drafter_config["num_hidden_layers"]
    check(drafter.fc.shape == (drafter_config["hidden_size"], len(c.target_layer_ids) * drafter_config["hidden_size"])
          and len(drafter.layers) == drafter_config["num_hidden_layers"],
          f"load: fc is [hidden, K*hidden], {n_tensors} tensors for {drafter_config['num_hidden_layers']} layers")

    def refused(label, config_change=None, rename=lambda name: name, needle=""):
        d = os.path.join(tmp, "bad_" + label.replace(" ", "_"))
        config = dict(drafter_config, **(config_change or {}))
        weights = {rename(k): v for k, v in load_safetensors(drafter_dir).items() if rename(k) is not None}
        write_checkpoint(d, config, weights, "F32")
        try:
            dflash.load_drafter(d)
            ok = False
        except (ValueError, KeyError) as e:
            ok = needle in str(e)
        check(ok, f"load: refuses {label}, naming {needle}")

    refused("a DFlash2DraftModel", {"architectures": ["DFlash2DraftModel"]}, needle="DFlashDraftModel")
    refused("a missing mask_token_id", {"dflash_config": {"target_layer_ids": [1, 3]}}, needle="mask_token_id")
    refused("attention_bias without bias tensors", {"attention_bias": True}, needle="attention_bias")
    refused("sliding-window layers", {"use_sliding_window": True}, needle="use_sliding_window")
    refused("a target layer beyond num_target_layers",
            {"dflash_config": dict(drafter_config["dflash_config"], target_layer_ids=[1, 6])}, needle="target_layer_ids")
    refused("a missing fc.weight", rename=lambda k: None if k == "fc.weight" else k, needle="fc.weight")
    refused("target-style names (model.layers.*)", rename=lambda k: "model." + k if k.startswith("layers.") else k,
            needle="layers.0.")

    target = qwen3.load_model(target_dir)
    for label, block_size in (("block size 1", 1), ("a block size above the trained one", drafter_config["block_size"] + 1)):
        try:
            dflash.check_pair(target, drafter, block_size)
            ok = False
        except ValueError:
            ok = True
        check(ok, f"pair: refuses {label}")


def check_one_step(name, target_dir, target_config, target_stored, drafter_dir, drafter_config, drafter_stored,
                   layer_ids, committed, x, block_size):
    target = qwen3.load_model(target_dir)
    drafter = dflash.load_drafter(drafter_dir, num_target_layers=target.config.num_hidden_layers)
    check(list(drafter.config.target_layer_ids) == layer_ids, f"{name}: taps layers {layer_ids}")
    draft, logits = dflash.draft_block(target, drafter, cache_for(target, drafter, committed), len(committed), x, block_size)
    slow = slow_draft_logits(target_stored, target_config, drafter_stored, drafter_config, layer_ids, committed, x, block_size)
    d = max_rel_diff(logits, slow)
    check(logits.shape == (block_size - 1, target_config["vocab_size"]) and d < FLOAT64_TOL,
          f"{name}: draft logits [B-1={block_size - 1}, vocab] equal the z-lab-style implementation (rel diff {d:.1e})")
    check(draft == [int(np.argmax(r)) for r in slow], f"{name}: draft tokens are the argmax of rows 1..B-1")


def check_non_causal(target, drafter, committed, x):
    """(c) every block row sees every other block row."""
    start = len(committed)
    cache = cache_for(target, drafter, committed)
    _, logits = dflash.draft_block(target, drafter, cache, start, x, 8)

    mask = drafter.config.mask_token_id
    other_embedding = target.embed_tokens.copy()
    other_embedding[mask] = -other_embedding[mask]
    other_target = dataclasses.replace(target, embed_tokens=other_embedding)
    _, other = dflash.draft_block(other_target, drafter, cache, start, x, 8)
    check(max_rel_diff(other[0], logits[0]) > 1e-3, "(c) changing the MASK embedding row changes the logits of row 1")

    # Only the last block row's input changes: a causal block would leave row 1 as it was.
    positions = np.arange(start, start + 8)
    block_hidden = qwen3.embed(target, [x] + [mask] * 7)
    base = dflash.drafter_forward(drafter, block_hidden, positions, cache.rows_before(start))
    perturbed_hidden = block_hidden.copy()
    perturbed_hidden[7] += 1.0
    perturbed = dflash.drafter_forward(drafter, perturbed_hidden, positions, cache.rows_before(start))
    check(max_rel_diff(perturbed[1], base[1]) > 1e-3, "(c) changing only the input of row 7 changes the output of row 1 (rows see later rows)")

    _, shorter = dflash.draft_block(target, drafter, cache, start, x, 4)
    check(max_rel_diff(shorter[0], logits[0]) > 1e-3, "(c) row 1 of a 4-row block differs from row 1 of an 8-row block (later MASK rows are seen)")


def check_context_positions(target, drafter, committed, x, rng):
    """(d) a block at `start` reads the context rows of positions < start only."""
    start = len(committed)
    cache = cache_for(target, drafter, committed)
    _, logits = dflash.draft_block(target, drafter, cache, start, x, 8)
    hidden = drafter.config.layers.hidden_size
    cache.append(drafter, rng.standard_normal((5, hidden)), np.arange(start, start + 5))
    _, with_later_rows = dflash.draft_block(target, drafter, cache, start, x, 8)
    check(np.array_equal(with_later_rows, logits), "(d) context rows at positions start..start+4 leave the draft logits bit-identical")

    cache = cache_for(target, drafter, committed)
    cache.keys[0] = cache.keys[0].copy()
    cache.keys[0][start - 1] += 1.0
    _, changed = dflash.draft_block(target, drafter, cache, start, x, 8)
    check(max_rel_diff(changed, logits) > 1e-6, "(d) control: a changed context row at position start-1 does change them")

    cache = cache_for(target, drafter, committed)
    _, at_earlier = dflash.draft_block(target, drafter, cache, start - 2, x, 8)
    _, trimmed = dflash.draft_block(target, drafter, cache_for(target, drafter, committed[:-2]), start - 2, x, 8)
    d = max_rel_diff(at_earlier, trimmed)
    check(d < 1e-12, f"(d) a block at start-2 over a longer cache equals one over a cache of start-2 rows (rel diff {d:.1e})")


def check_lossless(name, target, drafter, prompts, block_sizes, num_steps):
    """(a) generated tokens = the target's plain greedy continuation, and each step's acceptance is
    what the greedy sequence implies."""
    for prompt in prompts:
        for B in block_sizes:
            result = dflash.speculative_generate(target, drafter, prompt, B, num_steps)
            generated, steps = result["generated"], result["steps"]
            greedy = targets.greedy_continuation(target, prompt, len(generated))
            label = f"{name}: prompt of {len(prompt)}, B={B}"
            taus = [s["accepted"] + 1 for s in steps]
            check(generated == greedy, f"{label}: {len(generated)} speculative tokens equal plain greedy decoding (tau {taus})")

            full = prompt + greedy
            consistent = len(generated) == 1 + sum(taus) and len(steps) == num_steps
            for s in steps:
                expected_a = dflash.accept_longest_prefix(s["draft"], full[s["start"] + 1:])
                consistent &= (s["x"] == full[s["start"]] and len(s["draft"]) == B - 1
                               and s["accepted"] == expected_a and s["bonus"] == full[s["start"] + expected_a + 1])
            check(consistent, f"{label}: per step x, accepted and bonus match the greedy sequence at start..start+B")

            cache = result["cache"]
            in_target = prompt + generated[:-1]
            fresh = cache_for(target, drafter, in_target)
            d = max(max_rel_diff(a, b) for a, b in zip(cache.keys + cache.values, fresh.keys + fresh.values))
            check(np.array_equal(cache.positions, np.arange(len(in_target))) and d < 1e-10,
                  f"{label}: context cache = injection of every committed position, no rollback needed (rel diff {d:.1e})")


def check_acceptance(tmp, rng):
    """(b) drafters whose layers are zero predict from the MASK embedding alone: lossless anyway,
    and on a target that always says the same token, every draft is accepted (tau = B)."""
    target_dir = os.path.join(tmp, "target_constant")
    config = dict(tiny_config(4, 2, False), num_hidden_layers=6)
    weights = random_weights(config, rng, with_lm_head=True)
    H, favourite = config["hidden_size"], 7
    direction = rng.standard_normal(H)
    direction /= np.linalg.norm(direction)
    # Every embedding row carries a large shared component, layers add little, and lm_head's row
    # `favourite` reads that component: the target says `favourite` whatever the context.
    weights["model.embed_tokens.weight"] = (weights["model.embed_tokens.weight"] + 4.0 * math.sqrt(H) * direction).astype(np.float32)
    for i in range(config["num_hidden_layers"]):
        for proj in ("self_attn.o_proj", "mlp.down_proj"):
            weights[f"model.layers.{i}.{proj}.weight"] *= np.float32(0.05)
    weights["lm_head.weight"][favourite] = (3.0 * math.sqrt(H) * direction).astype(np.float32)
    write_checkpoint(target_dir, config, weights, "F32")
    target = qwen3.load_model(target_dir)
    prompt = [3, 14, 15, 92, 65]
    check(qwen3.greedy_continuation(target, prompt, 12) == [favourite] * 12,
          f"(b) setup: the constant target's greedy continuation is token {favourite} repeated")

    drafter_dir = os.path.join(tmp, "drafter_zero_layers")
    make_drafter(target_dir, drafter_dir, seed=5, dtype="F32", zero_layers=True, num_layers=2, block_size=16)
    drafter = dflash.load_drafter(drafter_dir)
    mask = drafter.config.mask_token_id
    embedding_only = int(np.argmax(qwen3.linear(qwen3.rms_norm(target.embed_tokens[mask].astype(np.float64), drafter.norm,
                                                               drafter.config.layers.rms_norm_eps), target.lm_head)))
    for B in (2, 4, 8, 16):
        result = dflash.speculative_generate(target, drafter, prompt, B, 4)
        steps = result["steps"]
        check(all(s["draft"] == [embedding_only] * (B - 1) for s in steps),
              f"(b) B={B}: a zero-layer drafter drafts lm_head(norm(embedding[MASK])) = {embedding_only} on every row")
        check(all(s["accepted"] == B - 1 for s in steps) and len(result["generated"]) == 1 + 4 * B
              and result["generated"] == [favourite] * (1 + 4 * B),
              f"(b) B={B}: when the target agrees, every draft is accepted (tau = {B} each step) and the output is still greedy")

    other_embedding = target.embed_tokens.copy()
    other_embedding[mask] = -other_embedding[mask]
    contrarian = dataclasses.replace(target, embed_tokens=other_embedding)  # the target never reads row MASK
    result = dflash.speculative_generate(contrarian, drafter, prompt, 8, 4)
    check(all(s["accepted"] == 0 for s in result["steps"]) and result["generated"] == [favourite] * 5,
          "(b) control: a drafter that never drafts the target's token accepts nothing (tau = 1) and stays lossless")
    return target


def check_partial_acceptance(target, drafter, prompt):
    """The loop under every acceptance length: an oracle drafter copies the greedy continuation
    and spoils row k of step s (no row: all accepted), so step s must accept exactly k."""
    B = 6
    planned = [0, 3, B - 1, 1, 4, 2, B - 1, 0]
    full = prompt + targets.greedy_continuation(target, prompt, 1 + len(planned) * B)
    seen = []

    def oracle_draft_block(target_, drafter_, cache, start, last_token, block_size):
        k = planned[len(seen)]
        seen.append((start, last_token == full[start], np.array_equal(cache.positions, np.arange(start))))
        draft = list(full[start + 1:start + block_size])
        if k < block_size - 1:
            draft[k] = (draft[k] + 1) % 100
        return draft, np.zeros((block_size - 1, target_.config.vocab_size))

    real_draft_block = dflash.draft_block
    dflash.draft_block = oracle_draft_block
    try:
        result = dflash.speculative_generate(target, drafter, prompt, B, len(planned))
    finally:
        dflash.draft_block = real_draft_block
    accepted = [s["accepted"] for s in result["steps"]]
    check(accepted == planned, f"loop: an oracle drafter spoiled at row k is accepted k rows (got {accepted}, planned {planned})")
    generated = result["generated"]
    check(generated == full[len(prompt):len(prompt) + len(generated)] and len(generated) == 1 + sum(a + 1 for a in planned),
          "loop: under mixed acceptance the output is the greedy continuation, a + 1 tokens per step")
    starts = [len(prompt)] + [len(prompt) + sum(a + 1 for a in planned[:i + 1]) for i in range(len(planned) - 1)]
    check([s for s, _, _ in seen] == starts and all(x_ok and cache_ok for _, x_ok, cache_ok in seen),
          "loop: each step starts at prompt + committed, x is the token at start, the cache holds exactly positions < start")


def check_cli(target_dir, drafter_dir, target, prompt, block_size, num_steps, tmp):
    prefix = os.path.join(tmp, "cli_out")
    cmd = [sys.executable, os.path.join(HERE, "dflash_reference.py"), "--target", target_dir, "--drafter", drafter_dir,
           "--tokens", ",".join(map(str, prompt)), "--steps", str(num_steps), "--block-size", str(block_size), "--out", prefix]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        check(False, f"cli: ran ({run.stderr.strip()[-300:]})")
        return
    drafter = dflash.load_drafter(drafter_dir)
    expected = dflash.speculative_generate(target, drafter, prompt, block_size, num_steps)
    info = json.load(open(prefix + ".json"))
    check(info["steps"] == expected["steps"] and info["generated"] == expected["generated"]
          and all(set(s) == {"start", "x", "draft", "accepted", "bonus"} for s in info["steps"]),
          "cli: json steps {start, x, draft, accepted, bonus} and generated equal speculative_generate")
    V = target.config.vocab_size
    logits = np.fromfile(prefix + ".draft_logits.f32", dtype="<f4")
    check(logits.size == num_steps * (block_size - 1) * V
          and np.allclose(logits.reshape(num_steps, block_size - 1, V), expected["draft_logits"], rtol=1e-6, atol=1e-6),
          f"cli: draft_logits.f32 is float32 [S={num_steps}, B-1={block_size - 1}, vocab={V}] equal to the function's")
    bad = subprocess.run(cmd[:-4] + ["--block-size", "99", "--out", prefix + "_bad"], capture_output=True, text=True)
    check(bad.returncode != 0 and "block size" in bad.stderr, "cli: a block size above the drafter's block_size is refused")


def main():
    rng = np.random.default_rng(20250101)
    with tempfile.TemporaryDirectory() as tmp:
        check_default_layer_ids()
        check_accept_longest_prefix()

        # Target A: GQA, tied, bf16. Drafter A: different heads/head_dim/theta, taps out of order.
        target_a_dir = os.path.join(tmp, "target_a")
        target_a_config, target_a_stored = make_target(target_a_dir, rng, 4, 2, True, "BF16")
        drafter_a_dir = os.path.join(tmp, "drafter_a")
        drafter_a_config, drafter_a_stored = make_drafter(
            target_a_dir, drafter_a_dir, seed=11, dtype="BF16", num_layers=2, block_size=16, target_layer_ids=[4, 1],
            num_heads=2, num_kv_heads=1, head_dim=8, intermediate_size=40, rope_theta=80.0)
        # Target B: MQA, untied lm_head, f16. Drafter B: 3 layers, default taps, block_size in dflash_config.
        target_b_dir = os.path.join(tmp, "target_b")
        target_b_config, target_b_stored = make_target(target_b_dir, rng, 4, 1, False, "F16", theta=30.0)
        drafter_b_dir = os.path.join(tmp, "drafter_b")
        drafter_b_config, drafter_b_stored = make_drafter(
            target_b_dir, drafter_b_dir, seed=12, dtype="F32", num_layers=3, block_size=16, write_target_layer_ids=False,
            block_size_in_dflash_config=True, num_heads=4, num_kv_heads=2, head_dim=12, rope_theta=70.0)

        check_loading(tmp, target_a_dir, drafter_a_dir, drafter_a_config)
        drafter_b = dflash.load_drafter(drafter_b_dir)
        check(drafter_b.config.target_layer_ids == (1, 2, 3) and drafter_b.config.block_size == 16,
              "load: without target_layer_ids the default (1, 2, 3 for L=6, K=3) is used; block_size read from dflash_config")

        committed = [int(t) for t in rng.integers(0, 100, size=11)]
        for B in (2, 8, 16):
            check_one_step(f"step A B={B}", target_a_dir, target_a_config, target_a_stored, drafter_a_dir, drafter_a_config,
                           drafter_a_stored, [4, 1], committed, 42, B)
        check_one_step("step B B=16", target_b_dir, target_b_config, target_b_stored, drafter_b_dir, drafter_b_config,
                       drafter_b_stored, [1, 2, 3], committed[:6], 17, 16)
        check_one_step("step A start=1", target_a_dir, target_a_config, target_a_stored, drafter_a_dir, drafter_a_config,
                       drafter_a_stored, [4, 1], committed[:1], 5, 4)

        target_a = qwen3.load_model(target_a_dir)
        drafter_a = dflash.load_drafter(drafter_a_dir)
        check_non_causal(target_a, drafter_a, committed, 42)
        check_context_positions(target_a, drafter_a, committed, 42, rng)

        prompts = [[int(t) for t in rng.integers(0, 100, size=n)] for n in (1, 5, 9)]
        check_lossless("lossless A", target_a, drafter_a, prompts, (2, 4, 8, 16), 5)
        target_b = qwen3.load_model(target_b_dir)
        check_lossless("lossless B", target_b, drafter_b, prompts[1:2], (2, 4, 8, 16), 5)

        zero_dir = os.path.join(tmp, "drafter_a_zero_layers")
        make_drafter(target_a_dir, zero_dir, seed=3, dtype="BF16", zero_layers=True, num_layers=2, block_size=16)
        check_lossless("(b) zero-layer drafter on A", target_a, dflash.load_drafter(zero_dir), prompts[1:], (2, 4, 8, 16), 5)
        check_acceptance(tmp, rng)

        check_partial_acceptance(target_a, drafter_a, prompts[1])

        result = dflash.speculative_generate(target_a, drafter_a, prompts[1], 8, 10, max_new_tokens=4)
        check(result["generated"] == qwen3.greedy_continuation(target_a, prompts[1], 4),
              "max_new_tokens: generation stops at N tokens, equal to the first N greedy tokens")

        check_cli(target_a_dir, drafter_a_dir, target_a, prompts[1], 8, 3, tmp)

    print(f"\n{len(failures)} failure(s)" if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
