#!/usr/bin/python3
"""Self-check of the NumPy DFlash2 reference (dflash2_reference.py): properties a bug in it would break.

    /usr/bin/python3 tests/reference/check_dflash2_reference.py     # exits non-zero on any failure

- The convolution, against a per-element loop: taps 0..K-1 each (base + the group's dynamic
  weight) times the row o back; row 0 of a block reads nothing before it.
- An identity convolution (tap 0 of both bases 1, the rest and the projections 0) and empty
  codebooks reduce DFlash2 to DFlash: its greedy loop equals dflash_reference's, step for step.
- The selector: with codebooks the walk follows the pair terms (an answer worked out by hand);
  sampled, q is softmax(score / T) and the inverse CDF picks the candidate the uniform falls in.
- The loader refuses a DFlash config and a missing DFlash2 key, naming it.
"""

import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dflash2_reference as dflash2  # noqa: E402
import dflash_reference as dflash  # noqa: E402
import qwen3_reference as qwen3  # noqa: E402
from check_reference import tiny_config, random_weights, write_checkpoint  # noqa: E402
from make_dflash_checkpoint import make_drafter  # noqa: E402

failures = []


def check(condition, what):
    print(("PASS  " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def check_convolution(rng):
    B, H, K, g = 6, 8, 3, 4
    y = rng.standard_normal((B, H))
    dynamic = rng.standard_normal((B, K, H // g))
    base = rng.standard_normal((K, H))
    want = np.zeros((B, H))
    for t in range(B):
        for c in range(H):
            for o in range(K):
                if t - o >= 0:
                    want[t, c] += (base[o, c] + dynamic[t, o, c // g]) * y[t - o, c]
    got = dflash2.convolve(y, dynamic, base, g)
    check(np.max(np.abs(got - want)) < 1e-12, "convolve: equals the per-element definition")
    perturbed = y.copy()
    perturbed[1:] += 1.0
    check(np.allclose(dflash2.convolve(perturbed, dynamic, base, g)[0], got[0]), "convolve: row 0 reads only row 0")


def add_dflash2_tensors(config, weights, identity, rng, K=2, g=8, R=16, top_k=8):
    H, V = config["hidden_size"], config["vocab_size"]
    config = dict(config, architectures=["DFlash2DraftModel"])
    config["dflash_config"] = dict(config["dflash_config"], conv_kernel_size=K, conv_group_size=g, selector_rank=R,
                                   selector_top_k=top_k)
    weights = dict(weights)
    for i in range(config["num_hidden_layers"]):
        for sublayer in ("attention", "mlp"):
            base = np.zeros((2, K, H)) if identity else 0.3 * rng.standard_normal((2, K, H))
            base[:, 0, :] += 1.0
            projection = np.zeros((2 * K * (H // g), H)) if identity else 0.1 * rng.standard_normal((2 * K * (H // g), H))
            weights[f"layers.{i}.{sublayer}_conv.base_kernel"] = base.astype(np.float32)
            weights[f"layers.{i}.{sublayer}_conv.kernel_projection.weight"] = projection.astype(np.float32)
    scale = 0.0 if identity else 1.0
    weights["candidate_selector.hidden_projection.weight"] = rng.standard_normal((R, H)).astype(np.float32)
    for name in ("predecessor_codebook", "successor_codebook"):
        weights["candidate_selector." + name] = (scale * rng.standard_normal((V, R))).astype(np.float32)
    return config, weights


def check_reduces_to_dflash(tmp, rng):
    target_dir, drafter_dir, dflash2_dir = (os.path.join(tmp, n) for n in ("target", "drafter", "drafter2"))
    config = dict(tiny_config(4, 2, False), num_hidden_layers=4)
    write_checkpoint(target_dir, config, random_weights(config, rng, with_lm_head=True), "F32")
    drafter_config, stored = make_drafter(target_dir, drafter_dir, seed=7, dtype="F32", num_layers=2, block_size=8)
    config2, weights2 = add_dflash2_tensors(drafter_config, stored, identity=True, rng=rng)
    write_checkpoint(dflash2_dir, config2, weights2, "F32")
    target = qwen3.load_model(target_dir)
    plain = dflash.speculative_generate(target, dflash.load_drafter(drafter_dir), [5, 9, 2, 7, 11], 8, 4)
    second = dflash2.speculative_generate(target, dflash2.load_drafter(dflash2_dir), [5, 9, 2, 7, 11], 8, 4)
    check(plain["steps"] == second["steps"], "identity convolutions and empty codebooks: DFlash2's loop is DFlash's")
    check(np.max(np.abs(plain["draft_logits"] - second["draft_logits"])) < 1e-9, "and so are its logits")

    with open(os.path.join(dflash2_dir, "config.json"), encoding="utf-8") as f:
        raw = json.load(f)
    for label, change, needle in (("a DFlash config", {"architectures": ["DFlashDraftModel"]}, "DFlash2DraftModel"),
                                  ("no selector_top_k", {"dflash_config": {k: v for k, v in raw["dflash_config"].items()
                                                                           if k != "selector_top_k"}},
                                   "selector_top_k")):
        bad_dir = os.path.join(tmp, "bad_" + label.replace(" ", "_"))
        write_checkpoint(bad_dir, dict(raw, **change), weights2, "F32")
        try:
            dflash2.load_drafter(bad_dir)
            ok = False
        except ValueError as e:
            ok = needle in str(e)
        check(ok, f"load: refuses {label}, naming {needle}")
    return target, config2, weights2, dflash2_dir


def check_selector(rng):
    drafter = dflash2.DFlash2Drafter(base=None, options=dflash2.DFlash2Options(2, 1, 2, 2), convs=[],
                                     hidden_projection=np.eye(2), predecessor_codebook=np.zeros((4, 2)),
                                     successor_codebook=np.zeros((4, 2)), scores=[])
    # Tokens 0..3; unary prefers 1 then 2 at both rows. A pair term favours 3 after 1 strongly.
    logits = np.array([[0.0, 2.0, 1.0, -1.0], [0.0, 1.0, 1.5, 1.4]])
    hidden = np.array([[1.0, 0.0], [1.0, 0.0]])
    drafter.predecessor_codebook[1] = [1.0, 0.0]
    drafter.successor_codebook[3] = [5.0, 0.0]
    tokens, candidates, q, scores = dflash2.select(drafter, hidden, logits, anchor=0)
    check(tokens == [1, 3], f"select: the pair term turns the second choice from 2 to 3 after 1 (got {tokens})")
    check(candidates.tolist() == [[1, 2], [2, 3]], "select: candidates in descending logit order")
    check(np.allclose(scores[1], [1.5, 1.4 + 5.0]), "select: score = unary + <A[prev] * h, B[cand]>")
    T, u = 0.5, [0.9, 0.1]
    tokens, _, q, scores = dflash2.select(drafter, hidden, logits, anchor=0, temperature=T, uniforms=u)
    want_q0 = np.exp(np.array([2.0, 1.0]) / T) / np.exp(np.array([2.0, 1.0]) / T).sum()
    check(np.allclose(q[0], want_q0) and np.allclose(q.sum(axis=1), 1.0), "select: q = softmax(score / T)")
    check(tokens[0] == (1 if u[0] < want_q0[0] else 2), "select: the inverse CDF picks the uniform's candidate")


def main():
    rng = np.random.default_rng(0)
    check_convolution(rng)
    check_selector(rng)
    with tempfile.TemporaryDirectory() as tmp:
        check_reduces_to_dflash(tmp, rng)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
