#!/usr/bin/python3
"""Self-check of the NumPy mixture-of-experts references (qwen3_moe_reference.py, gptoss_reference.py
and their parts mxfp4_reference.py, yarn_reference.py, moe_reference.py): hand-worked cases for
each new piece, then tiny random checkpoints (make_moe_checkpoint.py) compared with a second
implementation written differently on purpose.

    /usr/bin/python3 tests/reference/check_moe_reference.py     # exits non-zero on any failure

The second implementation runs one token at a time with a KV cache, one head and one expert at a
time with matrix-vector products, decodes MXFP4 from the E2M1 bit layout (sign, exponent,
mantissa) instead of a table, sorts experts with Python's sorted, rotates RoPE pair by pair with
YaRN written the way OpenAI's gpt-oss reference code states it, and applies a sliding window by
reading only the last W cached keys.
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
import gptoss_reference as gptoss  # noqa: E402
import moe_reference as moe  # noqa: E402
import mxfp4_reference as mxfp4  # noqa: E402
import qwen3_moe_reference as qmoe  # noqa: E402
import qwen3_reference as qwen3  # noqa: E402
import rope_reference as rope  # noqa: E402
import target_reference as targets  # noqa: E402
import yarn_reference as yarn  # noqa: E402
from make_moe_checkpoint import make_target, write_model, gptoss_config, gptoss_tensors, gptoss_yarn  # noqa: E402
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
# The second implementation
# ---------------------------------------------------------------------------------------------

def e2m1_value(nibble):
    """FP4 E2M1 from its bits: sign bit 3, exponent bits 2..1 (bias 1), mantissa bit 0; exponent 0
    is subnormal (m * 0.5)."""
    sign = -1.0 if nibble & 8 else 1.0
    exponent, mantissa = (nibble >> 1) & 3, nibble & 1
    magnitude = mantissa * 0.5 if exponent == 0 else (1.0 + 0.5 * mantissa) * 2.0 ** (exponent - 1)
    return sign * magnitude


def slow_decode(blocks, scales):
    """[..., rows, G, 16] bytes and [..., rows, G] scales -> [..., rows, G * 32], element by element
    order written out: input column 32 g + 2 j is byte j's low nibble, 32 g + 2 j + 1 its high one."""
    table = np.array([e2m1_value(n) for n in range(16)])
    G = blocks.shape[-2]
    out = np.zeros(blocks.shape[:-2] + (G * 32,))
    for g in range(G):
        factor = 2.0 ** (scales[..., g].astype(np.float64) - 127.0)
        for j in range(16):
            byte = blocks[..., g, j]
            out[..., 32 * g + 2 * j] = table[byte % 16] * factor
            out[..., 32 * g + 2 * j + 1] = table[byte // 16] * factor
    return out


def rmsnorm_vector(x, w, eps):
    return w * (x / math.sqrt(float(np.dot(x, x)) / len(x) + eps))


def rotate_pairs(x, position, frequency, magnitude=1.0):
    half = len(x) // 2
    out = x.copy()
    for i in range(half):
        c, s = math.cos(position * frequency(i)), math.sin(position * frequency(i))
        out[i] = magnitude * (x[i] * c - x[i + half] * s)
        out[i + half] = magnitude * (x[i] * s + x[i + half] * c)
    return out


def openai_yarn(head_dim, theta, rope_scaling):
    """(frequency(i), concentration) as OpenAI's gpt-oss code states YaRN: d_half = head_dim / 2,
    low/high = d_half ln(original / (beta 2 pi)) / ln(base), ramp = (i - low) / (high - low)
    clamped, mask = 1 - ramp, inv_freq = interpolation (1 - mask) + extrapolation mask, cos and sin
    times 0.1 ln(factor) + 1. transformers adds the truncate option (floor / ceil, default true;
    gpt-oss writes false) and keeps low >= 0, high <= head_dim - 1."""
    s = rope_scaling
    d_half = head_dim / 2
    low = d_half * math.log(s["original_max_position_embeddings"] / (s["beta_fast"] * 2 * math.pi)) / math.log(theta)
    high = d_half * math.log(s["original_max_position_embeddings"] / (s["beta_slow"] * 2 * math.pi)) / math.log(theta)
    if s.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)

    def frequency(i):
        base_frequency = theta ** (2 * i / head_dim)
        mask = 1.0 - min(max((i - low) / (high - low), 0.0), 1.0)
        return (1.0 / (s["factor"] * base_frequency)) * (1.0 - mask) + (1.0 / base_frequency) * mask

    return frequency, 0.1 * math.log(s["factor"]) + 1.0


def slow_forward(weights, config, tokens):
    """Either family, token by token. Returns (logits [T, V], taps [T, L, H], experts per layer
    [L][T] as lists of expert ids, or None for a dense layer)."""
    gpt = config["model_type"] == "gpt_oss"
    W = {k: (v if v.dtype == np.uint8 else v.astype(np.float64)) for k, v in weights.items()}
    H, hd, L = config["hidden_size"], config["head_dim"], config["num_hidden_layers"]
    nh, nkv, eps = config["num_attention_heads"], config["num_key_value_heads"], config["rms_norm_eps"]
    theta, k_top = config["rope_theta"], config["num_experts_per_tok"]
    if gpt:
        frequency, magnitude = openai_yarn(hd, theta, config["rope_scaling"])
        experts = {}
        for i in range(L):
            p = f"model.layers.{i}.mlp.experts."
            experts[i] = (slow_decode(W[p + "gate_up_proj_blocks"], W[p + "gate_up_proj_scales"]),
                          slow_decode(W[p + "down_proj_blocks"], W[p + "down_proj_scales"]))
    else:
        frequency, magnitude = (lambda i: theta ** (-2 * i / hd)), 1.0
    lm_head = W.get("lm_head.weight", W["model.embed_tokens.weight"])

    def affine(name, x):
        y = W[name + ".weight"] @ x
        return y + W[name + ".bias"] if name + ".bias" in W else y

    def sparse(i):
        return gpt or (i not in config["mlp_only_layers"] and (i + 1) % config["decoder_sparse_step"] == 0)

    keys, values = [[] for _ in range(L)], [[] for _ in range(L)]
    logits, taps, chosen = [], [], [[] if sparse(i) else None for i in range(L)]
    for position, token in enumerate(tokens):
        x = W["model.embed_tokens.weight"][token].copy()
        after = []
        for i in range(L):
            p = f"model.layers.{i}."
            n = rmsnorm_vector(x, W[p + "input_layernorm.weight"], eps)
            q_all, k_all, v_all = affine(p + "self_attn.q_proj", n), affine(p + "self_attn.k_proj", n), affine(p + "self_attn.v_proj", n)
            head_keys = []
            for j in range(nkv):
                kj = k_all[j * hd:(j + 1) * hd]
                if not gpt:
                    kj = rmsnorm_vector(kj, W[p + "self_attn.k_norm.weight"], eps)
                head_keys.append(rotate_pairs(kj, position, frequency, magnitude))
            keys[i].append(head_keys)
            values[i].append([v_all[j * hd:(j + 1) * hd] for j in range(nkv)])
            window = config["sliding_window"] if gpt and config["layer_types"][i] == "sliding_attention" else None
            first = 0 if window is None else max(0, position - window + 1)
            heads = []
            for h in range(nh):
                kv = h * nkv // nh
                qh = q_all[h * hd:(h + 1) * hd]
                if not gpt:
                    qh = rmsnorm_vector(qh, W[p + "self_attn.q_norm.weight"], eps)
                qh = rotate_pairs(qh, position, frequency, magnitude)
                scores = [float(np.dot(qh, keys[i][t][kv])) / math.sqrt(hd) for t in range(first, position + 1)]
                sink = [float(W[p + "self_attn.sinks"][h])] if gpt else []
                top = max(scores + sink)
                e = [math.exp(s - top) for s in scores + sink]
                heads.append(sum(e[t] / sum(e) * values[i][first + t][kv] for t in range(len(scores))))
            x = x + affine(p + "self_attn.o_proj", np.concatenate(heads))
            m = rmsnorm_vector(x, W[p + "post_attention_layernorm.weight"], eps)
            if gpt:
                router = W[p + "mlp.router.weight"] @ m + W[p + "mlp.router.bias"]
                picked = sorted(range(len(router)), key=lambda e: (-router[e], e))[:k_top]
                exps = [math.exp(router[e] - router[picked[0]]) for e in picked]
                gate_up_w, down_w = experts[i]
                mix = np.zeros(H)
                for e, weight in zip(picked, exps):
                    gate_up = gate_up_w[e] @ m + W[p + "mlp.experts.gate_up_proj_bias"][e]
                    limit = config["swiglu_limit"]
                    out = np.zeros(gate_up_w.shape[1] // 2)
                    for c in range(len(out)):
                        g, u = min(gate_up[2 * c], limit), min(max(gate_up[2 * c + 1], -limit), limit)
                        out[c] = (u + 1.0) * g / (1.0 + math.exp(-1.702 * g))
                    mix += weight / sum(exps) * (down_w[e] @ out + W[p + "mlp.experts.down_proj_bias"][e])
                chosen[i].append(picked)
            elif sparse(i):
                router = W[p + "mlp.gate.weight"] @ m
                probabilities = np.exp(router - router.max()) / np.exp(router - router.max()).sum()
                picked = sorted(range(len(router)), key=lambda e: (-probabilities[e], e))[:k_top]
                total = sum(probabilities[e] for e in picked) if config["norm_topk_prob"] else 1.0
                mix = np.zeros(H)
                for e in picked:
                    q = f"{p}mlp.experts.{e}."
                    gate = W[q + "gate_proj.weight"] @ m
                    mix += probabilities[e] / total * (W[q + "down_proj.weight"] @ (gate / (1 + np.exp(-gate)) * (W[q + "up_proj.weight"] @ m)))
                chosen[i].append(picked)
            else:
                gate = W[p + "mlp.gate_proj.weight"] @ m
                mix = W[p + "mlp.down_proj.weight"] @ (gate / (1 + np.exp(-gate)) * (W[p + "mlp.up_proj.weight"] @ m))
            x = x + mix
            after.append(x.copy())
        logits.append(lm_head @ rmsnorm_vector(x, W["model.norm.weight"], eps))
        taps.append(after)
    return np.array(logits), np.array(taps), chosen


# ---------------------------------------------------------------------------------------------
# Hand-worked pieces
# ---------------------------------------------------------------------------------------------

def check_mxfp4_by_hand():
    # One row, one block: bytes 0x21 0xF8 0x7A then zeros; scales 127 (x1), 128 (x2), 125 (x1/4).
    block = np.zeros((3, 1, 16), dtype=np.uint8)
    block[:, 0, :3] = [0x21, 0xF8, 0x7A]
    scales = np.array([[127], [128], [125]], dtype=np.uint8)
    got = mxfp4.decode_mxfp4(block, scales)
    first_six = [0.5, 1.0, -0.0, -6.0, -1.0, 6.0]  # 0x21: low 1 -> 0.5, high 2 -> 1; 0xF8: 8 -> -0, F -> -6; 0x7A: A -> -1, 7 -> 6
    check(got.shape == (3, 32) and got[0, :6].tolist() == first_six and np.all(got[0, 6:] == 0)
          and math.copysign(1.0, got[0, 2]) == -1.0,
          "mxfp4: bytes 21 F8 7A decode to 0.5, 1, -0, -6, -1, 6 (low nibble = even element, sign bit 3)")
    check(got[1, :6].tolist() == [2 * v for v in first_six] and got[2, :6].tolist() == [v / 4 for v in first_six],
          "mxfp4: E8M0 scale 128 doubles, 125 quarters (bias 127)")
    codes = np.arange(256, dtype=np.uint8).reshape(1, 16, 16)  # every byte value once
    all_bytes = mxfp4.decode_mxfp4(codes, np.full((1, 16), 127, dtype=np.uint8))
    by_bits = np.array([[e2m1_value(b & 15), e2m1_value(b >> 4)] for b in range(256)]).reshape(1, 512)
    check(np.array_equal(all_bytes, by_bits), "mxfp4: all 256 byte values equal the E2M1 bit formula, low nibble first")
    check(mxfp4.FP4_E2M1_VALUES.tolist() == [e2m1_value(n) for n in range(16)],
          "mxfp4: the table is 0, .5, 1, 1.5, 2, 3, 4, 6 then the negatives (transformers' FP4_VALUES)")
    two_blocks = np.zeros((1, 2, 16), dtype=np.uint8)
    two_blocks[0, 1, 0] = 0x02  # block 1, byte 0, low nibble: element 32
    row = mxfp4.decode_mxfp4(two_blocks, np.array([[127, 130]], dtype=np.uint8))[0]
    check(row[32] == 8.0 and np.count_nonzero(row) == 1, "mxfp4: block g holds inputs 32g..32g+31 with its own scale (1 * 2^3 at 32)")
    for label, blocks, scale in (("scale byte 255 (NaN)", np.zeros((1, 1, 16), np.uint8), np.array([[255]], np.uint8)),
                                 ("scales of the wrong shape", np.zeros((1, 2, 16), np.uint8), np.array([[127]], np.uint8)),
                                 ("float blocks", np.zeros((1, 1, 16), np.float32), np.array([[127]], np.uint8))):
        try:
            mxfp4.decode_mxfp4(blocks, scale)
            refused = False
        except ValueError:
            refused = True
        check(refused, f"mxfp4: refuses {label}")


def check_routing_by_hand():
    experts, weights, margin = moe.route_softmax_then_top_k(np.array([[2.0, 1.0, 0.0, -1.0]]), 2, normalize=True)
    check(experts.tolist() == [[0, 1]] and np.allclose(weights, [[math.e / (math.e + 1), 1 / (math.e + 1)]], rtol=1e-14),
          "qwen3-moe routing: softmax, top 2 of [2, 1, 0, -1] are 0, 1 with e/(e+1), 1/(e+1) when renormalised")
    total = sum(math.exp(v) for v in (2.0, 1.0, 0.0, -1.0))
    _, raw_weights, _ = moe.route_softmax_then_top_k(np.array([[2.0, 1.0, 0.0, -1.0]]), 2, normalize=False)
    check(np.allclose(raw_weights, [[math.exp(2) / total, math.exp(1) / total]], rtol=1e-14)
          and abs(margin[0] - (math.exp(1) - 1.0) / total) < 1e-15,
          "qwen3-moe routing: without norm_topk_prob the weights are the full-softmax probabilities; margin p2 - p3")
    experts, weights, margin = moe.route_top_k_then_softmax(np.array([[0.5, 3.0, -1.0, 2.0]]), 2)
    check(experts.tolist() == [[1, 3]] and np.allclose(weights, [[math.e / (math.e + 1), 1 / (math.e + 1)]], rtol=1e-14)
          and margin[0] == 1.5,
          "gpt-oss routing: top 2 logits of [.5, 3, -1, 2] are 1, 3, then softmax over those two only; margin 2 - .5")
    experts, _, margin = moe.route_top_k_then_softmax(np.array([[1.0, 1.0, 0.0]]), 1)
    check(experts.tolist() == [[0]] and margin[0] == 0.0, "routing: a tie goes to the lowest expert id, with margin 0")
    record = moe.RoutingRecord()
    record.add(3, np.array([[1, 0]]), np.array([0.25]))
    record.add(5, np.array([[2, 1]]), np.array([0.5]))
    check(record.as_json() == {"layers": [3, 5], "experts": [[[1, 0]], [[2, 1]]], "min_margin": 0.25},
          "routing record: sparse layer ids, experts [layer][row][k], smallest margin")

    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    seen = []

    def expert(e, rows):
        seen.append((e, rows.shape[0]))
        return rows * (e + 1)

    out = moe.mix_experts(x, np.array([[0, 2], [2, 1], [1, 0]]), np.array([[0.5, 0.5], [0.25, 0.75], [1.0, 0.0]]), expert)
    check(np.allclose(out, [[2.0, 0.0], [0.0, 0.25 * 3 + 0.75 * 2], [2.0, 2.0]]) and sorted(seen) == [(0, 2), (1, 2), (2, 2)],
          "mix_experts: weighted sum over each row's experts, each expert run once on its rows")


def check_attention_by_hand():
    mask = gptoss.attention_mask(5, 3).astype(int).tolist()
    check(mask == [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 1, 1, 1, 0], [0, 0, 1, 1, 1]],
          "sliding window 3: each query sees 3 keys, itself and the 2 before (HF's kv > q - W, OpenAI's tril(-W))")
    check(np.array_equal(gptoss.attention_mask(4, None), np.tril(np.ones((4, 4), dtype=bool))), "full attention: causal")

    class C:  # one head, head_dim 1
        num_attention_heads = num_key_value_heads = head_dim = 1
    q, k, v = np.array([[[1.0]]]), np.array([[[math.log(3.0)]]]), np.array([[[5.0]]])
    out = gptoss.attention_with_sinks(q, k, v, np.ones((1, 1), dtype=bool), np.array([0.0]), C)
    check(abs(out[0, 0] - 5.0 * 3.0 / 4.0) < 1e-14, "sinks: one key of score ln 3 beside a sink of 0 gets weight 3/4 (out 3.75)")
    rng = np.random.default_rng(4)

    class D:
        num_attention_heads, num_key_value_heads, head_dim = 4, 2, 8
    q, k, v = rng.standard_normal((6, 4, 8)), rng.standard_normal((6, 2, 8)), rng.standard_normal((6, 2, 8))
    allowed = gptoss.attention_mask(6, 3)
    no_sink = gptoss.attention_with_sinks(q, k, v, allowed, np.full(4, -1e300), D)
    plain = qwen3.grouped_query_attention(q, k, v, allowed, D)
    check(max_rel_diff(no_sink, plain) < 1e-14, "sinks: a sink of -inf leaves ordinary GQA softmax attention")
    drowned = gptoss.attention_with_sinks(q, k, v, allowed, np.full(4, 60.0), D)
    check(np.max(np.abs(drowned)) < 1e-20, "sinks: a dominant sink takes all the weight (output ~0)")

    class E:
        swiglu_limit, swiglu_alpha = 7.0, 1.702
    experts = {"gate_up": np.array([[[2.0], [3.0], [9.0], [-9.0], [-9.0], [9.0]]]), "gate_up_bias": np.zeros((1, 6)),
               "down": np.array([[[1.0, 10.0, 100.0]]]), "down_bias": np.array([[0.5]])}
    got = gptoss.clamped_swiglu_expert(experts, 0, np.array([[1.0]]), E)[0, 0]
    want = (4 * 2 / (1 + math.exp(-1.702 * 2)) + 10 * (-6) * 7 / (1 + math.exp(-1.702 * 7))
            + 100 * 8 * -9 / (1 + math.exp(1.702 * 9)) + 0.5)
    check(abs(got - want) < 1e-12,
          "clamped SwiGLU: gate = even rows, up = odd rows; gate clamped above at 7 only, up to [-7, 7], (up + 1) g sigmoid(1.702 g)")


def check_yarn_by_hand():
    real = yarn.read_yarn(gptoss.DEFAULT_ROPE)
    low, high = yarn.correction_range(64, 150000.0, real)
    check(abs(low - 8.092779115512402) < 1e-12 and abs(high - 17.39802450158856) < 1e-12
          and abs(real.attention_factor - 1.3465735902799727) < 1e-15,
          "yarn (gpt-oss: head_dim 64, theta 150000, factor 32, original 4096, no truncation): ramp from pair "
          "8.0928 to 17.3980, attention factor 0.1 ln 32 + 1 = 1.34657")
    inv = yarn.yarn_inverse_frequencies(64, 150000.0, real)
    plain = rope.plain_inverse_frequencies(64, 150000.0)
    turns = 4096 * plain / (2 * math.pi)
    check(np.allclose(inv[:9], plain[:9], rtol=0) and np.allclose(inv[18:], plain[18:] / 32, rtol=1e-15)
          and np.all(turns[:9] > 32) and np.all(turns[18:] < 1),
          "yarn: pairs turning > beta_fast = 32 times over the original context keep their frequency, "
          "pairs turning < beta_slow = 1 time are divided by the factor")
    i = 12
    ramp = (i - low) / (high - low)
    check(abs(inv[i] - plain[i] * ((1 - ramp) + ramp / 32)) < 1e-18, "yarn: pairs between blend linearly in the pair index")
    truncated = yarn.read_yarn(dict(gptoss.DEFAULT_ROPE, truncate=True))
    check(yarn.correction_range(64, 150000.0, truncated) == (8, 18), "yarn: truncate floors low and ceils high (8, 18)")
    check(yarn.read_yarn({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 100}).truncate
          and yarn.read_yarn({"factor": 4.0, "original_max_position_embeddings": 100, "attention_factor": 0.5}).attention_factor == 0.5
          and abs(yarn.read_yarn({"factor": 4.0, "original_max_position_embeddings": 100, "mscale": 2.0,
                                  "mscale_all_dim": 1.0}).attention_factor - (0.2 * math.log(4) + 1) / (0.1 * math.log(4) + 1)) < 1e-15,
          "yarn: truncate defaults to true; attention_factor explicit, or mscale / mscale_all_dim ratio")
    check(yarn.read_yarn({"factor": None, "original_max_position_embeddings": 4096}, 131072).factor == 32.0,
          "yarn: a null factor is max_position_embeddings / original (transformers 5)")
    x = np.zeros((1, 1, 4))
    x[0, 0, 0] = 1.0
    s = yarn.YarnScaling(factor=1.0, original_max_position=64, attention_factor=2.0)
    rotated = qwen3.apply_rope(x, [1], 100.0, s)[0, 0]
    check(np.allclose(rotated, [2 * math.cos(1.0), 0.0, 2 * math.sin(1.0), 0.0], atol=1e-15),
          "yarn: cos and sin both carry the attention factor (rotate-half pairing kept)")
    try:  # rope_reference.py may learn YaRN too: then the two readings must agree
        theta, other = rope.read_rope({"rope_theta": 150000.0, "rope_scaling": gptoss.DEFAULT_ROPE})
        d = max_rel_diff(rope.inverse_frequencies(64, theta, other), inv)
        check(d < 1e-12, f"yarn: rope_reference.py's YaRN frequencies equal these (rel diff {d:.1e})")
    except ValueError:
        print("SKIP  yarn: rope_reference.py has no YaRN of its own to compare with")


# ---------------------------------------------------------------------------------------------
# Whole models
# ---------------------------------------------------------------------------------------------

def check_model(name, module, model_dir, config, stored, tokens):
    model = module.load_model(model_dir)
    back = load_safetensors(model_dir)
    check(all(np.array_equal(back[k], v) and back[k].dtype == v.dtype for k, v in stored.items()),
          f"{name}: every tensor reads back as written (float32 values, uint8 bytes)")
    logits, hidden, record = module.forward_with_routing(model, tokens)
    slow_logits, slow_taps, slow_experts = slow_forward(stored, config, tokens)
    d = max_rel_diff(logits, slow_logits)
    check(d < FLOAT64_TOL, f"{name}: logits equal the token-by-token implementation (rel diff {d:.1e})")
    d = max(max_rel_diff(hidden[i + 1], slow_taps[:, i, :]) for i in range(config["num_hidden_layers"]))
    check(d < FLOAT64_TOL, f"{name}: hidden_states[i+1] equal the residual after layer i (rel diff {d:.1e})")
    sparse_layers = [i for i, e in enumerate(slow_experts) if e is not None]
    check(record.layers == sparse_layers and all(r.tolist() == slow_experts[i] for i, r in zip(record.layers, record.experts)),
          f"{name}: sparse layers {sparse_layers} route every row to the same experts as that implementation")
    # float32 arithmetic moves a score by ~1e-7: a margin far above that routes the same in flashq.
    check(record.min_margin > 1e-5, f"{name}: routing is well away from ties (min margin {record.min_margin:.2e})")

    longer, longer_hidden = module.forward(model, tokens + [7, 3, 99])
    d = max(max_rel_diff(longer[:len(tokens)], logits), max(max_rel_diff(a[:len(tokens)], b) for a, b in zip(longer_hidden, hidden)))
    check(d < 1e-12, f"{name}: prefix rows unchanged when tokens are appended (rel diff {d:.1e})")
    greedy = module.greedy_continuation(model, tokens, 5)
    full, _ = module.forward(model, tokens + greedy)
    check(greedy == [int(np.argmax(full[len(tokens) - 1 + j])) for j in range(5)], f"{name}: greedy continuation = argmax chain")

    taps = [config["num_hidden_layers"] - 1, 0]
    for script in (module.__name__ + ".py", "target_reference.py"):
        prefix = os.path.join(model_dir, "out_" + script[:-3])
        run = subprocess.run([sys.executable, os.path.join(HERE, script), "--model", model_dir, "--tokens", ",".join(map(str, tokens)),
                              "--greedy", "5", "--taps", ",".join(map(str, taps)), "--out", prefix], capture_output=True, text=True)
        if run.returncode != 0:
            check(False, f"{name}: {script} ran ({run.stderr.strip()[-300:]})")
            continue
        info = json.load(open(prefix + ".json"))
        T, V, H = len(tokens), config["vocab_size"], config["hidden_size"]
        file_logits = np.fromfile(prefix + ".logits.f32", dtype="<f4")
        file_taps = np.fromfile(prefix + ".taps.f32", dtype="<f4")
        check(info["greedy"] == greedy and info["taps"]["shape"] == [T, 2 * H] and info["moe"] == record.as_json()
              and file_logits.size == T * V and np.allclose(file_logits.reshape(T, V), logits, rtol=1e-6, atol=1e-6)
              and np.allclose(file_taps.reshape(T, 2 * H), np.concatenate([hidden[i + 1] for i in taps], -1), rtol=1e-6, atol=1e-6),
              f"{name}: {script} writes logits [T, vocab], taps in list order, greedy and the routing record")
    return model, logits


def refused(label, load, needle, errors=(ValueError, KeyError)):
    try:
        load()
        ok = False
    except errors as e:
        ok = needle in str(e)
    check(ok, f"refuses {label}, naming {needle}")


def rewrite_config(src, dst, change):
    """A copy of checkpoint src whose config.json is changed (tensors linked, not copied)."""
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f.endswith(".safetensors") or f.endswith(".index.json"):
            os.symlink(os.path.join(src, f), os.path.join(dst, f))
    config = json.load(open(os.path.join(src, "config.json")))
    change(config)
    json.dump(config, open(os.path.join(dst, "config.json"), "w"))
    return dst


def check_qwen3_moe(tmp):
    tokens = [5, 17, 200, 3, 3, 64, 128, 9, 1, 150, 42, 77, 8, 19]
    # GQA, bf16, untied, layer 1 dense through mlp_only_layers, renormalised top 2 of 8.
    a_dir = os.path.join(tmp, "qmoe_a")
    a_config, a_stored = make_target("qwen3-moe", a_dir, seed=1, num_layers=3)
    model_a, logits_a = check_model("qwen3-moe A (mlp_only_layers [1], norm_topk_prob)", qmoe, a_dir, a_config, a_stored, tokens)
    check(model_a.config.is_sparse(0) and not model_a.config.is_sparse(1) and "mlp.gate_proj" in model_a.layers[1]
          and "experts" in model_a.layers[2], "qwen3-moe A: layer 1 is a dense MLP of intermediate_size, layers 0 and 2 sparse")
    # MHA, f32, tied, 3-of-6 experts without renormalisation, decoder_sparse_step 2, attention biases, sharded.
    b_dir = os.path.join(tmp, "qmoe_b")
    b_config, b_stored = make_target("qwen3-moe", b_dir, seed=2, dtype="F32", shards=3, num_layers=4, num_heads=4, num_kv_heads=4,
                                     head_dim=8, num_experts=6, top_k=3, norm_topk_prob=False, decoder_sparse_step=2,
                                     mlp_only_layers=(), tied=True, attention_bias=True)
    check_model("qwen3-moe B (step 2, top 3 unnormalised, biases, tied, sharded)", qmoe, b_dir, b_config, b_stored, tokens[:9])
    check([i for i in range(4) if qmoe.read_qwen3_moe_config(b_dir).is_sparse(i)] == [1, 3],
          "qwen3-moe B: decoder_sparse_step 2 makes layers 1 and 3 sparse ((i + 1) % 2 == 0)")

    renormalised = rewrite_config(a_dir, os.path.join(tmp, "qmoe_a_raw"), lambda c: c.update(norm_topk_prob=False))
    d = max_rel_diff(qmoe.forward(qmoe.load_model(renormalised), tokens)[0], logits_a)
    check(d > 1e-3, f"qwen3-moe: norm_topk_prob changes the logits (rel diff {d:.1e})")
    no_head_dim = rewrite_config(a_dir, os.path.join(tmp, "qmoe_hd"), lambda c: (c.pop("head_dim"), c.update(num_attention_heads=8,
                                                                                                          num_key_value_heads=4)))
    check(qmoe.read_qwen3_moe_config(no_head_dim).head_dim == 64 // 8,
          "qwen3-moe config: a missing head_dim is hidden_size / num_attention_heads (not Qwen3's 128)")
    local = rewrite_config(a_dir, os.path.join(tmp, "qmoe_local"), lambda c: c.update(num_local_experts=c.pop("num_experts")))
    check(qmoe.read_qwen3_moe_config(local).num_experts == 8, "qwen3-moe config: num_local_experts is read as num_experts")
    dense_dir = rewrite_config(a_dir, os.path.join(tmp, "qmoe_dense"), lambda c: c.update(num_experts=0))
    refused("qwen3-moe with num_experts 0 but no dense tensors for the would-be sparse layers",
            lambda: qmoe.load_model(dense_dir), "mlp.gate_proj")
    refused("qwen3-moe use_sliding_window", lambda: qmoe.load_model(rewrite_config(a_dir, os.path.join(tmp, "qmoe_sw"),
                                                                                    lambda c: c.update(use_sliding_window=True))),
            "use_sliding_window")
    refused("qwen3-moe top-k above the expert count", lambda: qmoe.load_model(rewrite_config(a_dir, os.path.join(tmp, "qmoe_k"),
                                                                                             lambda c: c.update(num_experts_per_tok=9))),
            "num_experts_per_tok")
    fused = os.path.join(tmp, "qmoe_fused")
    weights = {k: ("F32", v) for k, v in a_stored.items()}
    weights["model.layers.0.mlp.experts.gate_up_proj"] = ("F32", np.zeros((8, 64, 64), np.float32))
    write_model(fused, a_config, weights)
    refused("qwen3-moe fused experts", lambda: qmoe.load_model(fused), "gate_up_proj")


def check_gptoss(tmp):
    tokens = [5, 17, 200, 3, 3, 64, 128, 9, 1, 150, 42, 77, 8, 19, 11, 2, 180]
    # Alternating sliding (window 4) / full, GQA, bf16 dense, MXFP4 experts, YaRN.
    a_dir = os.path.join(tmp, "gptoss_a")
    a_config, a_stored = make_target("gpt-oss", a_dir, seed=3, num_layers=4)
    model_a, logits_a = check_model("gpt-oss A (sliding 4 / full, MXFP4, YaRN, sinks)", gptoss, a_dir, a_config, a_stored, tokens)
    m = gptoss.rms_norm(qwen3.embed(model_a, tokens), model_a.layers[0]["post_attention_layernorm.weight"], 1e-5)
    gate_up = m @ model_a.layers[0]["experts"]["gate_up"].reshape(-1, 64).T
    check(np.mean(gate_up[:, 0::2] > 7) > 0.002 and np.mean(np.abs(gate_up[:, 1::2]) > 7) > 0.002,
          "gpt-oss A: the SwiGLU clamp is reached by some gate and up values (the limit is exercised)")
    # MQA, f32, tied, 1 of 4 experts, window 2 on layers 0 and 1, no attention biases, truncated YaRN.
    b_dir = os.path.join(tmp, "gptoss_b")
    b_config, b_stored = make_target("gpt-oss", b_dir, seed=4, dtype="F32", shards=2, num_layers=3, num_heads=4, num_kv_heads=1,
                                     head_dim=8, intermediate=32, num_experts=4, top_k=1, window=2,
                                     layer_types=["sliding_attention", "sliding_attention", "full_attention"], tied=True,
                                     attention_bias=False, rope_scaling=gptoss_yarn(4.0, 64, truncate=True))
    check_model("gpt-oss B (window 2, MQA, top 1, no biases, tied, truncated YaRN, sharded)", gptoss, b_dir, b_config, b_stored, tokens[:10])

    dequantized = os.path.join(tmp, "gptoss_a_bf16")
    config = gptoss_config(num_layers=4, mxfp4_experts=False)
    write_model(dequantized, config, gptoss_tensors(config, np.random.default_rng(3), "BF16", layout="dequantized"))
    d = max_rel_diff(gptoss.forward(gptoss.load_model(dequantized), tokens)[0], logits_a)
    check(d < 1e-12, f"gpt-oss: the dequantized [E, in, out] layout of the same values gives the same logits (rel diff {d:.1e})")

    wide = rewrite_config(a_dir, os.path.join(tmp, "gptoss_wide"), lambda c: c.update(sliding_window=1000))
    d = max_rel_diff(gptoss.forward(gptoss.load_model(wide), tokens)[0], logits_a)
    check(d > 1e-3, f"gpt-oss: the window matters at {len(tokens)} tokens (window 1000 instead of 4: rel diff {d:.1e})")
    same = max_rel_diff(gptoss.forward(gptoss.load_model(wide), tokens[:4])[0], gptoss.forward(model_a, tokens[:4])[0])
    check(same < 1e-13, "gpt-oss: up to 4 tokens a window of 4 is the same as full attention")
    plain = rewrite_config(a_dir, os.path.join(tmp, "gptoss_plain"), lambda c: (c.pop("rope_scaling"),
                                                                                 c.update(rope_parameters={"rope_type": "default"})))
    d = max_rel_diff(gptoss.forward(gptoss.load_model(plain), tokens)[0], logits_a)
    check(d > 1e-3, f"gpt-oss: YaRN changes the logits against plain RoPE (rel diff {d:.1e})")

    # A single sliding layer: the output at row t depends on tokens t-W+1..t only.
    c_dir = os.path.join(tmp, "gptoss_c")
    make_target("gpt-oss", c_dir, seed=5, num_layers=1, window=3, layer_types=["sliding_attention"])
    model_c = gptoss.load_model(c_dir)
    base = gptoss.forward(model_c, tokens)[1][1]
    far = list(tokens)
    far[5] = 33  # rows 8.. see positions 6.. only
    near = list(tokens)
    near[6] = 33  # row 8 sees position 6
    check(max_rel_diff(gptoss.forward(model_c, far)[1][1][8:], base[8:]) < 1e-13
          and max_rel_diff(gptoss.forward(model_c, near)[1][1][8], base[8]) > 1e-6,
          "gpt-oss window 3: row 8 ignores position 5 and reads position 6 (keys 6, 7, 8)")

    defaults = rewrite_config(a_dir, os.path.join(tmp, "gptoss_defaults"),
                              lambda c: [c.pop(k) for k in ("head_dim", "layer_types", "rope_scaling", "sliding_window",
                                                            "attention_bias", "rope_theta", "num_key_value_heads")]
                              + [c.update(num_attention_heads=16)])
    cfg = gptoss.read_gptoss_config(defaults)
    check(cfg.head_dim == 64 and cfg.layer_types == ("sliding_attention", "full_attention") * 2 and cfg.sliding_window == 128
          and cfg.attention_bias and cfg.rope_theta == 150000.0 and cfg.num_key_value_heads == 8
          and cfg.rope_scaling == yarn.read_yarn(gptoss.DEFAULT_ROPE) and cfg.swiglu_limit == 7.0,
          "gpt-oss config defaults: head_dim 64, sliding/full alternating from layer 0, window 128, biases, "
          "theta 150000 with YaRN x32 over 4096, 8 kv heads, limit 7")
    refused("gpt-oss unknown layer type", lambda: gptoss.load_model(rewrite_config(
        a_dir, os.path.join(tmp, "g_lt"), lambda c: c.update(layer_types=["chunked_attention"] * 4))), "chunked_attention")
    refused("gpt-oss quantization other than mxfp4", lambda: gptoss.load_model(rewrite_config(
        a_dir, os.path.join(tmp, "g_q"), lambda c: c.update(quantization_config={"quant_method": "fp8"}))), "quant_method")
    refused("gpt-oss bias tensors when attention_bias is false", lambda: gptoss.load_model(rewrite_config(
        a_dir, os.path.join(tmp, "g_b"), lambda c: c.update(attention_bias=False))), "attention_bias")
    as_float = os.path.join(tmp, "gptoss_float_blocks")
    weights = {k: ("U8", v) if v.dtype == np.uint8 else ("BF16", v) for k, v in a_stored.items()}
    weights["model.layers.0.mlp.experts.down_proj_blocks"] = ("F32", a_stored["model.layers.0.mlp.experts.down_proj_blocks"].astype(np.float32))
    write_model(as_float, a_config, weights)
    refused("gpt-oss MXFP4 blocks not stored as U8", lambda: gptoss.load_model(as_float), "U8")
    refused("MXFP4 experts whose intermediate_size is not a multiple of 32", lambda: mxfp4.expected_shapes(8, 64, 48),
            "multiple of 32")


# The published config.json files (values as public code copies them), read without weights.
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
    "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
    "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": True,
    "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
    "num_key_value_heads": 4, "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936}
GPT_OSS_120B = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0, "eos_token_id": 200002,
    "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880, "initial_context_length": 4096,
    "initializer_range": 0.02, "intermediate_size": 2880, "layer_types": ["sliding_attention", "full_attention"] * 18,
    "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4,
    "num_hidden_layers": 36, "num_key_value_heads": 8, "num_local_experts": 128, "output_router_logits": False,
    "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                       "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                     "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "transformers_version": "4.55.0.dev0", "use_cache": True, "vocab_size": 201088}


def check_published_configs(tmp):
    path = os.path.join(tmp, "qwen3_30b_a3b")
    os.makedirs(path)
    json.dump(QWEN3_30B_A3B, open(os.path.join(path, "config.json"), "w"))
    c = qmoe.read_qwen3_moe_config(path)
    check(c.head_dim == 128 and c.num_key_value_heads == 4 and c.num_experts == 128 and c.num_experts_per_tok == 8
          and c.norm_topk_prob and all(c.is_sparse(i) for i in range(48)) and c.rope_scaling is None,
          "Qwen3-30B-A3B's config.json: 48 sparse layers, 8 of 128 experts renormalised, head_dim 128, 4 kv heads")
    path = os.path.join(tmp, "gpt_oss_120b")
    os.makedirs(path)
    json.dump(GPT_OSS_120B, open(os.path.join(path, "config.json"), "w"))
    c = gptoss.read_gptoss_config(path)
    check(c.num_local_experts == 128 and c.num_experts_per_tok == 4 and c.window(0) == 128 and c.window(1) is None
          and c.window(34) == 128 and c.rope_theta == 150000.0 and c.rope_scaling == yarn.read_yarn(gptoss.DEFAULT_ROPE)
          and c.swiglu_limit == 7.0 and c.attention_bias and c.head_dim == 64 and c.num_key_value_heads == 8
          and mxfp4.expected_shapes(128, 2880, 2880)["gate_up_proj_blocks"] == (128, 5760, 90, 16),
          "gpt-oss-120b's config.json: even layers slide over 128 keys, YaRN x32 over 4096 untruncated, 4 of 128 "
          "experts, gate_up blocks [128, 5760, 90, 16]")
    twenty = dict(GPT_OSS_120B, num_hidden_layers=24, num_local_experts=32,
                  layer_types=["sliding_attention", "full_attention"] * 12)
    path = os.path.join(tmp, "gpt_oss_20b")
    os.makedirs(path)
    json.dump(twenty, open(os.path.join(path, "config.json"), "w"))
    check(gptoss.read_gptoss_config(path).num_local_experts == 32, "gpt-oss-20b's shape (24 layers, 32 experts) reads")


def main():
    check_mxfp4_by_hand()
    check_routing_by_hand()
    check_attention_by_hand()
    check_yarn_by_hand()
    with tempfile.TemporaryDirectory() as tmp:
        check_published_configs(tmp)
        check_qwen3_moe(tmp)
        check_gptoss(tmp)
        check(targets.family_of(os.path.join(tmp, "gptoss_a")) is gptoss and targets.family_of(os.path.join(tmp, "qmoe_a")) is qmoe,
              "target_reference: model_type gpt_oss and qwen3_moe pick their references")
    print(f"\n{len(failures)} failure(s)" if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
