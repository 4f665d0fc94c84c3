#!/usr/bin/python3
"""Self-check of qwen3_5_reference.py (hybrid Qwen3.5 / Qwen3.5-MoE / Qwen3-Next): hand-worked
cases for the new pieces, the two forms of the delta rule against each other, and tiny random
checkpoints (make_hybrid_checkpoint.py) decoded token by token from saved states against the
full forward.

    /usr/bin/python3 tests/reference/check_qwen3_5_reference.py     # exits non-zero on any failure
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
import qwen3_5_reference as ref  # noqa: E402
import target_reference as targets  # noqa: E402
from make_hybrid_checkpoint import make_checkpoint  # noqa: E402
from make_moe_checkpoint import write_model  # noqa: E402
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
# Pieces by hand
# ---------------------------------------------------------------------------------------------

def check_delta_rule_by_hand():
    """One head, d_k = d_v = 2, two tokens, from S0 = diag(1, 2) (q given times sqrt(2), which the
    rule's 1/sqrt(d_k) undoes):
      t1: k (1, 0), v (3, 1), g ln 0.5, beta 0.5, q (0, 1):
          S = 0.5 S0 = [[0.5, 0], [0, 1]]; S^T k = (0.5, 0); delta = 0.5 ((3, 1) - (0.5, 0)) = (1.25, 0.5);
          S = [[1.75, 0.5], [0, 1]]; o1 = S^T q = (0, 1)
      t2: k (0.6, 0.8), v (1, -1), g 0, beta 1, q (1, 0):
          S^T k = (1.05, 1.1); delta = (-0.05, -2.1); S = [[1.72, -0.76], [-0.04, -0.68]];
          o2 = (1.72, -0.76); with beta 1 and |k| = 1 the state now maps k to v exactly."""
    s2 = math.sqrt(2.0)
    q = np.array([[[0.0, s2]], [[s2, 0.0]]])
    k = np.array([[[1.0, 0.0]], [[0.6, 0.8]]])
    v = np.array([[[3.0, 1.0]], [[1.0, -1.0]]])
    g = np.array([[math.log(0.5)], [0.0]])
    beta = np.array([[0.5], [1.0]])
    S0 = np.array([[[1.0, 0.0], [0.0, 2.0]]])
    want_out = np.array([[[0.0, 1.0]], [[1.72, -0.76]]])
    want_S = np.array([[[1.72, -0.76], [-0.04, -0.68]]])
    for name, fn in (("recurrent", ref.delta_rule_recurrent), ("chunked", ref.delta_rule_chunked)):
        out, S = fn(q, k, v, g, beta, S0)
        check(np.allclose(out, want_out, atol=1e-12) and np.allclose(S, want_S, atol=1e-12)
              and np.allclose(S[0].T @ k[1, 0], v[1, 0], atol=1e-12),
              f"delta rule ({name}) on the hand-worked 1-head d=2 case: outputs (0, 1), (1.72, -0.76) and the final state")


def random_delta_inputs(rng, T, h=3, dk=8, dv=6):
    q = ref.l2_normalise(rng.standard_normal((T, h, dk)))
    k = ref.l2_normalise(rng.standard_normal((T, h, dk)))
    v = rng.standard_normal((T, h, dv))
    g = -rng.uniform(0.0, 0.3, (T, h))
    beta = rng.uniform(0.05, 1.0, (T, h))
    return q, k, v, g, beta, rng.standard_normal((h, dk, dv))


def check_chunked_equals_recurrent():
    rng = np.random.default_rng(5)
    worst = 0.0
    for T in (1, 37, 64, 65, 150):
        q, k, v, g, beta, S0 = random_delta_inputs(rng, T)
        a_out, a_S = ref.delta_rule_recurrent(q, k, v, g, beta, S0)
        b_out, b_S = ref.delta_rule_chunked(q, k, v, g, beta, S0)
        worst = max(worst, max_rel_diff(b_out, a_out), max_rel_diff(b_S, a_S))
    check(worst < 1e-10, f"chunked delta rule (chunks of 64) = recurrent for T = 1, 37, 64, 65, 150 from a nonzero "
                         f"state: outputs and final state (rel diff {worst:.1e})")
    q, k, v, g, beta, S0 = random_delta_inputs(rng, 50)
    a_out, a_S = ref.delta_rule_recurrent(q, k, v, g, beta, S0)
    b_out, b_S = ref.delta_rule_chunked(q, k, v, g, beta, S0, chunk_size=8)
    d = max(max_rel_diff(b_out, a_out), max_rel_diff(b_S, a_S))
    check(d < 1e-10, f"chunked delta rule across 7 chunks of 8 (the last one short) = recurrent (rel diff {d:.1e})")
    # Fast decay: exp(G) underflows inside a chunk, the masked exp must not overflow.
    g = -rng.uniform(5.0, 20.0, g.shape)
    with np.errstate(over="raise", invalid="raise"):
        b_out, b_S = ref.delta_rule_chunked(q, k, v, g, beta, S0)
    a_out, a_S = ref.delta_rule_recurrent(q, k, v, g, beta, S0)
    d = max(max_rel_diff(b_out, a_out), max_rel_diff(b_S, a_S))
    check(d < 1e-10, f"chunked = recurrent with decays down to exp(-20) per token, no overflow (rel diff {d:.1e})")


def check_pieces_by_hand():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 16))
    plain = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    check(np.allclose(ref.zero_centred_rms_norm(x, np.zeros(16, np.float32), 1e-6), plain, rtol=1e-14, atol=0),
          "zero-centred RMSNorm with w = 0 is plain RMS normalisation (scale 1 + w)")
    w = rng.standard_normal(16).astype(np.float32)
    check(np.allclose(ref.zero_centred_rms_norm(x, w, 1e-6), plain * (1.0 + w.astype(np.float64)), rtol=1e-14, atol=0),
          "zero-centred RMSNorm with w scales by 1 + w")

    c = ref.config_from_dict("qwen3_5", {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 2,
                                         "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 8,
                                         "vocab_size": 10, "rope_parameters": {"rope_type": "default", "rope_theta": 100.0,
                                                                               "partial_rotary_factor": 0.25}})
    x = rng.standard_normal((6, 2, 16))
    positions = np.arange(6) + 3
    y = ref.apply_partial_rope(x, positions, c)
    want = x.copy()
    for t, pos in enumerate(positions):
        for i in range(2):  # rotary dim 4: pairs (0, 2) and (1, 3), frequencies 100^(-2i/4)
            a = pos * 100.0 ** (-2 * i / 4)
            x0, x1 = x[t, :, i], x[t, :, i + 2]
            want[t, :, i], want[t, :, i + 2] = x0 * math.cos(a) - x1 * math.sin(a), x1 * math.cos(a) + x0 * math.sin(a)
    check(c.rotary_dim == 4 and np.array_equal(y[..., 4:], x[..., 4:]) and np.allclose(y, want, atol=1e-13),
          "partial RoPE (factor 0.25, head_dim 16): the last 12 dims untouched, the first 4 rotated in pairs (i, i+2) "
          "at frequencies of a 4-wide head")

    # Depthwise causal conv, K = 3, one channel: out[t] = silu(w0 x[t-2] + w1 x[t-1] + w2 x[t]).
    wconv = np.array([[[0.5, -1.0, 2.0]]], dtype=np.float32)
    xs = np.array([[1.0], [2.0], [-1.0], [0.5]])
    out, state = ref.causal_conv(xs, wconv, np.array([[4.0], [3.0]]))
    pre = np.array([0.5 * 4 - 3 + 2 * 1, 0.5 * 3 - 1 + 2 * 2, 0.5 * 1 - 2 - 2, 0.5 * 2 + 1 + 1])
    check(np.allclose(out[:, 0], pre / (1 + np.exp(-pre)), atol=1e-14) and np.array_equal(state[:, 0], [-1.0, 0.5]),
          "causal conv1d (K = 3): the last tap meets the current row, the saved state is the last 2 inputs")
    g = -np.exp(np.log(2.0)) * np.logaddexp(0.0, 0.3 + -0.3)
    check(abs(g - (-2.0 * math.log(2.0))) < 1e-15 and abs(ref.sigmoid(-1e6)) == 0.0 and ref.sigmoid(0.0) == 0.5,
          "g = -exp(A_log) softplus(a + dt_bias) = -2 ln 2 for A = 2, a + dt_bias = 0; sigmoid(-1e6) is exactly 0")


# ---------------------------------------------------------------------------------------------
# Random checkpoints
# ---------------------------------------------------------------------------------------------

def check_decode(name, model, tokens, split):
    """Prefill tokens[:split] (chunked), then one decode step per remaining token from the saved
    conv state, recurrent state and KV cache: every row's logits equal the full forward's."""
    full, _ = ref.forward(model, tokens)
    logits, _, cache = ref.prefill(model, tokens[:split])
    rows = [logits]
    c = model.config
    shapes_ok = all((e["conv"].shape == (c.conv_kernel - 1, c.conv_dim) and e["state"].shape == (c.num_v_heads, c.head_k_dim, c.head_v_dim))
                    if c.is_linear(i) else e["k"].shape == (split, c.num_key_value_heads, c.head_dim)
                    for i, e in enumerate(cache.layers))
    for t in tokens[split:]:
        row, cache = ref.decode_step(model, t, cache)
        rows.append(row[None])
    d = max_rel_diff(np.concatenate(rows), full)
    check(shapes_ok and cache.length == len(tokens) and d < FLOAT64_TOL,
          f"{name}: prefill of {split} then {len(tokens) - split} decode steps from the saved conv [K-1, conv_dim], "
          f"recurrent [v_heads, dk, dv] states and KV cache = the full forward (rel diff {d:.1e})")
    return full


def check_model(name, model_dir, config, tokens):
    model = ref.load_model(model_dir)
    full = check_decode(name, model, tokens, 3)
    logits, hidden, record = ref.forward_with_routing(model, tokens)
    longer, longer_hidden = ref.forward(model, tokens + [7, 3, 99])
    d = max(max_rel_diff(longer[:len(tokens)], logits),
            max(max_rel_diff(a[:len(tokens)], b) for a, b in zip(longer_hidden, hidden)))
    check(d < 1e-12, f"{name}: causal, prefix rows unchanged when tokens are appended (rel diff {d:.1e})")
    greedy = ref.greedy_continuation(model, tokens, 4)
    chain, _ = ref.forward(model, tokens + greedy)
    check(greedy == [int(np.argmax(chain[len(tokens) - 1 + j])) for j in range(4)], f"{name}: greedy continuation = argmax chain")
    if any(model.config.is_sparse(i) for i in range(model.config.num_hidden_layers)):
        check(record.min_margin > 1e-5, f"{name}: routing well away from ties (min margin {record.min_margin:.2e})")

    taps = [model.config.num_hidden_layers - 1, 0]
    for script in ("qwen3_5_reference.py", "target_reference.py"):
        prefix = os.path.join(model_dir, "out_" + script[:-3])
        run = subprocess.run([sys.executable, os.path.join(HERE, script), "--model", model_dir, "--tokens", ",".join(map(str, tokens)),
                              "--greedy", "4", "--taps", ",".join(map(str, taps)), "--out", prefix], capture_output=True, text=True)
        if run.returncode != 0:
            check(False, f"{name}: {script} ran ({run.stderr.strip()[-300:]})")
            continue
        info = json.load(open(prefix + ".json"))
        T, V, H = len(tokens), model.config.vocab_size, model.config.hidden_size
        file_logits = np.fromfile(prefix + ".logits.f32", dtype="<f4")
        file_taps = np.fromfile(prefix + ".taps.f32", dtype="<f4")
        check(info["greedy"] == greedy and info["taps"]["shape"] == [T, 2 * H] and info.get("moe") == ref.routing_info(model, tokens).get("moe")
              and file_logits.size == T * V and np.allclose(file_logits.reshape(T, V), full, rtol=1e-6, atol=1e-6)
              and np.allclose(file_taps.reshape(T, 2 * H), np.concatenate([hidden[i + 1] for i in taps], -1), rtol=1e-6, atol=1e-6),
              f"{name}: {script} writes logits [T, vocab], taps in list order, greedy (and the routing record)")
    return model, full


def check_recurrent_form(tmp):
    """A prompt over two chunks through a whole model: --recurrent gives the chunked forward's logits."""
    d_dir = os.path.join(tmp, "q35_long")
    make_checkpoint("qwen3_5", d_dir, seed=3, num_layers=2, layer_types=["linear_attention", "full_attention"])
    model = ref.load_model(d_dir)
    tokens = [int(t) for t in np.random.default_rng(2).integers(0, model.config.vocab_size, 70)]
    chunked, _, _ = ref.forward_with_routing(model, tokens, form="chunked")
    recurrent, _, _ = ref.forward_with_routing(model, tokens, form="recurrent")
    d = max_rel_diff(chunked, recurrent)
    check(d < FLOAT64_TOL, f"qwen3_5, 70 tokens (two chunks): the chunked forward = the recurrent one (rel diff {d:.1e})")
    prefix = os.path.join(tmp, "rec")
    run = subprocess.run([sys.executable, os.path.join(HERE, "qwen3_5_reference.py"), "--model", d_dir, "--recurrent",
                          "--tokens", ",".join(map(str, tokens[:10])), "--out", prefix], capture_output=True, text=True)
    ok = run.returncode == 0 and np.allclose(np.fromfile(prefix + ".logits.f32", dtype="<f4").reshape(10, -1),
                                             ref.forward(model, tokens[:10])[0], rtol=1e-6, atol=1e-6)
    check(ok, "qwen3_5_reference.py --recurrent writes the same logits")


def check_gate(tmp):
    """A gate of -1e6 (zero weights, bias -1e6 on the gate half of q_proj) silences the attention:
    the mixer's output is o_proj's bias alone."""
    d_dir = os.path.join(tmp, "q35_bias")
    make_checkpoint("qwen3_5", d_dir, seed=4, num_layers=1, layer_types=["full_attention"], attention_bias=True)
    model = ref.load_model(d_dir)
    c = model.config
    layer = dict(model.layers[0])
    gate_rows = np.zeros(2 * c.num_attention_heads * c.head_dim, dtype=bool)
    for h in range(c.num_attention_heads):
        gate_rows[h * 2 * c.head_dim + c.head_dim:(h + 1) * 2 * c.head_dim] = True
    n = np.random.default_rng(0).standard_normal((5, c.hidden_size))
    base, _ = ref.gated_attention(layer, n, np.arange(5), c)
    layer["self_attn.q_proj"] = np.where(gate_rows[:, None], 0.0, layer["self_attn.q_proj"]).astype(np.float32)
    layer["self_attn.q_proj.bias"] = np.where(gate_rows, -1e6, layer["self_attn.q_proj.bias"]).astype(np.float32)
    silenced, _ = ref.gated_attention(layer, n, np.arange(5), c)
    check(np.abs(base - layer["self_attn.o_proj.bias"]).max() > 1e-3
          and np.array_equal(silenced, np.broadcast_to(layer["self_attn.o_proj.bias"].astype(np.float64), silenced.shape)),
          "gated attention: a gate of -1e6 makes the attention output zero (only o_proj's bias is left)")


def grouped_from_split(qkv, z, b, a, c):
    """Qwen3-Next's in_proj_qkvz / in_proj_ba rows from Qwen3.5's split rows, by row index: key head j
    gets [q_j, k_j, v of its r value heads, z of them] and [b of them, a of them]."""
    nk, dk, dv, r = c.num_k_heads, c.head_k_dim, c.head_v_dim, c.num_v_heads // c.num_k_heads
    qkvz_rows, ba_rows = [], []
    for j in range(nk):
        qkvz_rows += [qkv[j * dk:(j + 1) * dk], qkv[c.key_dim + j * dk:c.key_dim + (j + 1) * dk],
                      qkv[2 * c.key_dim + j * r * dv:2 * c.key_dim + (j + 1) * r * dv], z[j * r * dv:(j + 1) * r * dv]]
        ba_rows += [b[j * r:(j + 1) * r], a[j * r:(j + 1) * r]]
    return np.concatenate(qkvz_rows), np.concatenate(ba_rows)


def check_grouped_layout(model):
    c = model.config
    layer = model.layers[0]
    qkvz, ba = grouped_from_split(layer["linear_attn.in_proj_qkv"], layer["linear_attn.in_proj_z"],
                                  layer["linear_attn.in_proj_b"], layer["linear_attn.in_proj_a"], c)
    grouped = {k: v for k, v in layer.items() if not k.startswith("linear_attn.in_proj")}
    grouped.update({"linear_attn.in_proj_qkvz": qkvz, "linear_attn.in_proj_ba": ba})
    n = np.random.default_rng(3).standard_normal((9, c.hidden_size))
    want = ref.gated_delta_net(layer, n, c)
    got = ref.gated_delta_net(grouped, n, dataclasses.replace(c, family="qwen3_next"))
    d = max(max_rel_diff(x, y) for x, y in zip(got, want))
    check(c.num_v_heads // c.num_k_heads == 2 and d < 1e-12,
          f"Qwen3-Next's grouped in_proj_qkvz / in_proj_ba = Qwen3.5's split projections on the same rows rearranged "
          f"(2 value heads per key head; output and both states, rel diff {d:.1e})")


def check_layouts(tmp):
    for family in ("qwen3_5", "qwen3_5_moe"):
        text_dir, mm_dir = os.path.join(tmp, family + "_text"), os.path.join(tmp, family + "_mm")
        make_checkpoint(family, text_dir, seed=6)
        mm_config, _ = make_checkpoint(family, mm_dir, seed=6, multimodal=True)
        a, _ = ref.forward(ref.load_model(text_dir), [3, 1, 4, 1, 5])
        b, _ = ref.forward(ref.load_model(mm_dir), [3, 1, 4, 1, 5])
        names = load_safetensors(mm_dir)
        check(np.array_equal(a, b) and targets.family_of(mm_dir) is ref and mm_config["text_config"]["model_type"] == family + "_text"
              and any(k.startswith("model.visual.") for k in names) and any(k.startswith("mtp.") for k in names),
              f"{family}: the multimodal layout (model.language_model.*, text_config, visual and mtp tensors skipped) "
              "gives the text-only layout's logits")
    # Qwen3.5-MoE's fused experts against the same values written per expert.
    stored = load_safetensors(os.path.join(tmp, "qwen3_5_moe_text"))
    split = {}
    for name, values in stored.items():
        if name.endswith("mlp.experts.gate_up_proj"):
            p, I = name[:-len("gate_up_proj")], values.shape[1] // 2
            for e in range(values.shape[0]):
                split[f"{p}{e}.gate_proj.weight"] = ("F32", values[e, :I])
                split[f"{p}{e}.up_proj.weight"] = ("F32", values[e, I:])
        elif name.endswith("mlp.experts.down_proj"):
            p = name[:-len("down_proj")]
            for e in range(values.shape[0]):
                split[f"{p}{e}.down_proj.weight"] = ("F32", values[e])
        else:
            split[name] = ("F32", values)
    per_expert = os.path.join(tmp, "qwen3_5_moe_per_expert")
    write_model(per_expert, json.load(open(os.path.join(tmp, "qwen3_5_moe_text", "config.json"))), split)
    a, _ = ref.forward(ref.load_model(os.path.join(tmp, "qwen3_5_moe_text")), [3, 1, 4, 1, 5])
    b, _ = ref.forward(ref.load_model(per_expert), [3, 1, 4, 1, 5])
    check(np.array_equal(a, b), "qwen3_5_moe: fused experts (gate_up_proj [E, 2I, H], gate rows first) = per-expert tensors")


def check_configs(tmp):
    base = {"hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4, "vocab_size": 10, "intermediate_size": 8,
            "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 4, "shared_expert_intermediate_size": 4}
    c = ref.config_from_dict("qwen3_next", dict(base, full_attention_interval=3))
    check([i for i, t in enumerate(c.layer_types) if t == "full_attention"] == [2, 5]
          and ref.config_from_dict("qwen3_next", base).layer_types == ("linear_attention",) * 3 + ("full_attention",) + ("linear_attention",) * 3 + ("full_attention",),
          "layer plan without layer_types: layer i full when (i + 1) % full_attention_interval == 0 (default 4)")
    check(c.head_dim == 256 and c.rotary_dim == 64 and c.num_key_value_heads == 2 and c.num_k_heads == 16
          and c.num_v_heads == 32 and c.head_k_dim == 128 and c.conv_kernel == 4 and c.norm_topk_prob
          and all(c.is_sparse(i) for i in range(8)),
          "Qwen3-Next defaults: head_dim 256, rotary dim 64 (factor 0.25), 2 kv heads, 16/32 linear heads of 128, "
          "kernel 4, norm_topk_prob, every layer sparse")
    c = ref.config_from_dict("qwen3_5_moe", dict(base, norm_topk_prob=False))
    check(c.norm_topk_prob and all(c.is_sparse(i) for i in range(8)) and c.num_key_value_heads == 4,
          "Qwen3.5-MoE: every layer sparse, top-k always renormalised (its config has no norm_topk_prob), 4 kv heads by default")
    c = ref.config_from_dict("qwen3_next", dict(base, mlp_only_layers=[1], norm_topk_prob=False))
    check(not c.is_sparse(1) and c.is_sparse(0) and not c.norm_topk_prob, "Qwen3-Next: mlp_only_layers dense, norm_topk_prob read")

    def refused(label, raw, family, needle):
        try:
            ref.config_from_dict(family, raw)
            check(False, f"refused: {label}")
        except ValueError as e:
            check(needle in str(e), f"refused: {label} ({e})")
    refused("an unknown layer type", dict(base, layer_types=["sliding_attention"] * 8), "qwen3_next", "layer_types")
    refused("attn_output_gate false", dict(base, attn_output_gate=False), "qwen3_5", "attn_output_gate")
    refused("a missing moe size", {k: v for k, v in base.items() if k != "shared_expert_intermediate_size"}, "qwen3_5_moe",
            "shared_expert_intermediate_size")
    path = os.path.join(tmp, "other")
    os.makedirs(path)
    json.dump(dict(base, model_type="qwen3_vl"), open(os.path.join(path, "config.json"), "w"))
    try:
        ref.read_config(path)
        check(False, "refused: model_type qwen3_vl")
    except ValueError as e:
        check("qwen3_vl" in str(e), "refused: model_type qwen3_vl is not a hybrid Qwen")


def main():
    check_delta_rule_by_hand()
    check_chunked_equals_recurrent()
    check_pieces_by_hand()
    with tempfile.TemporaryDirectory() as tmp:
        tokens = [5, 17, 3, 99, 42, 8, 150, 1, 64]
        for family, options in (("qwen3_5", {}), ("qwen3_5_moe", {}), ("qwen3_next", {"mlp_only_layers": (1,)})):
            d_dir = os.path.join(tmp, family)
            config, _ = make_checkpoint(family, d_dir, seed=1, **options)
            model, _ = check_model(family, d_dir, config, tokens)
            if family == "qwen3_5":
                check_grouped_layout(model)
        mm_dir = os.path.join(tmp, "qwen3_5_moe_multimodal")
        make_checkpoint("qwen3_5_moe", mm_dir, seed=2, multimodal=True, tied=True)
        check_model("qwen3_5_moe multimodal, tied", mm_dir, None, tokens)
        check_recurrent_form(tmp)
        check_gate(tmp)
        check_layouts(tmp)
        check_configs(tmp)
    print(f"\n{len(failures)} failure(s)" if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
