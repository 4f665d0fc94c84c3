#!/usr/bin/python3
"""Self-check of the NumPy Llama reference (llama_reference.py) and of the RoPE scaling it uses
(rope_reference.py): builds tiny random Llama checkpoints in Python, then checks properties that a
bug in the reference would break.

    /usr/bin/python3 tests/reference/check_llama_reference.py     # exits non-zero on any failure

The strongest check compares the reference against a second implementation written differently
on purpose (one token at a time with a KV cache, per-head loops, matrix-vector products, RoPE pair
by pair with each pair's frequency worked out on its own). The Llama 3 inverse frequencies are
also checked on chosen values whose answer is worked out by hand, region by region.
The tiny models use a small rope theta and a small original context, so that every wavelength
region of Llama 3 RoPE is populated and scaling changes the logits at a dozen tokens.
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
import llama_reference as llama  # noqa: E402
import qwen3_reference as qwen3  # noqa: E402
import rope_reference as rope  # noqa: E402
import target_reference as targets  # noqa: E402
from check_reference import write_checkpoint  # noqa: E402
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
# Tiny random Llama checkpoints
# ---------------------------------------------------------------------------------------------

LLAMA3_TINY = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}
LINEAR_TINY = {"rope_type": "linear", "factor": 3.0}


def tiny_llama_config(num_heads, num_kv_heads, tied, attention_bias=False, mlp_bias=False, scaling=None,
                      rope_style="rope_scaling", theta=50.0, head_dim=16, num_layers=3):
    """scaling: None or a rope_scaling dict; rope_style "rope_parameters" writes transformers 5's
    form (theta inside the dict). head_dim None leaves the key out (hidden / heads is meant)."""
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads, "num_key_value_heads": num_kv_heads,
        "rms_norm_eps": 1e-5, "vocab_size": 101, "tie_word_embeddings": tied,
        "hidden_act": "silu", "attention_bias": attention_bias, "mlp_bias": mlp_bias,
        "max_position_embeddings": 512, "torch_dtype": "bfloat16",
    }
    if head_dim is not None:
        config["head_dim"] = head_dim  # != 32 / heads: a derived head_dim cannot load these checkpoints
    if rope_style == "rope_parameters":
        config["rope_parameters"] = dict(scaling or {"rope_type": "default"}, rope_theta=theta)
    else:
        config["rope_theta"] = theta
        config["rope_scaling"] = scaling
    return config


def config_head_dim(config):
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def random_llama_weights(config, rng, with_lm_head):
    H, I, V = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    nh, nkv, hd = config["num_attention_heads"], config["num_key_value_heads"], config_head_dim(config)

    def matrix(rows, cols):
        return rng.standard_normal((rows, cols)) / math.sqrt(cols)

    def norm_weight(n):
        return 1.0 + 0.3 * rng.standard_normal(n)  # not all ones, so a skipped norm is visible

    w = {"model.embed_tokens.weight": rng.standard_normal((V, H))}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm_weight(H)
        w[p + "self_attn.q_proj.weight"] = 2.0 * matrix(nh * hd, H)  # sharper attention patterns
        w[p + "self_attn.k_proj.weight"] = 2.0 * matrix(nkv * hd, H)
        w[p + "self_attn.v_proj.weight"] = matrix(nkv * hd, H)
        w[p + "self_attn.o_proj.weight"] = matrix(H, nh * hd)
        w[p + "post_attention_layernorm.weight"] = norm_weight(H)
        w[p + "mlp.gate_proj.weight"] = matrix(I, H)
        w[p + "mlp.up_proj.weight"] = matrix(I, H)
        w[p + "mlp.down_proj.weight"] = matrix(H, I)
        if config["attention_bias"]:
            for proj, n in (("q_proj", nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd), ("o_proj", H)):
                w[p + f"self_attn.{proj}.bias"] = 0.5 * rng.standard_normal(n)
        if config["mlp_bias"]:
            for proj, n in (("gate_proj", I), ("up_proj", I), ("down_proj", H)):
                w[p + f"mlp.{proj}.bias"] = 0.5 * rng.standard_normal(n)
    w["model.norm.weight"] = norm_weight(H)
    if with_lm_head:
        w["lm_head.weight"] = matrix(V, H)
    return {k: v.astype(np.float32) for k, v in w.items()}


def make_llama(model_dir, rng, dtype, **config_options):
    config = tiny_llama_config(**config_options)
    stored = write_checkpoint(model_dir, config, random_llama_weights(config, rng, not config["tie_word_embeddings"]), dtype)
    return config, stored


# ---------------------------------------------------------------------------------------------
# A second implementation, written differently: token by token with a KV cache, W @ x products,
# per-head Python loops, RoPE pair by pair. It reads the raw tensor dict and the config dict.
# ---------------------------------------------------------------------------------------------

def pair_frequency(i, head_dim, config):
    """Rotation speed of pair i, from the config dict, one pair at a time."""
    params = config.get("rope_parameters") or config.get("rope_scaling") or {}
    theta = params.get("rope_theta", config.get("rope_theta"))
    base = 1.0 / theta ** (2 * i / head_dim)
    kind = params.get("rope_type", "default")
    if kind == "default":
        return base
    if kind == "linear":
        return base / params["factor"]
    original, low, high = params["original_max_position_embeddings"], params["low_freq_factor"], params["high_freq_factor"]
    wavelength = 2 * math.pi / base
    if wavelength < original / high:
        return base
    if wavelength > original / low:
        return base / params["factor"]
    s = (original / wavelength - low) / (high - low)
    return (1 - s) * base / params["factor"] + s * base


def slow_llama_forward(weights, config, tokens):
    H, hd = config["hidden_size"], config_head_dim(config)
    nh, nkv, L, eps = config["num_attention_heads"], config["num_key_value_heads"], config["num_hidden_layers"], config["rms_norm_eps"]
    half = hd // 2
    freqs = [pair_frequency(i, hd, config) for i in range(half)]
    W = {k: v.astype(np.float64) for k, v in weights.items()}
    lm_head = W.get("lm_head.weight", W["model.embed_tokens.weight"])

    def rmsnorm_vector(x, w):
        return w * (x / math.sqrt(float(np.dot(x, x)) / len(x) + eps))

    def affine(name, x):
        y = W[name + ".weight"] @ x
        return y + W[name + ".bias"] if name + ".bias" in W else y

    def rotate_pairs(x, position):
        out = x.copy()
        for i in range(half):
            c, s = math.cos(position * freqs[i]), math.sin(position * freqs[i])
            out[i] = x[i] * c - x[i + half] * s
            out[i + half] = x[i] * s + x[i + half] * c
        return out

    keys = [[] for _ in range(L)]
    values = [[] for _ in range(L)]
    logits, taps = [], []
    for position, token in enumerate(tokens):
        x = W["model.embed_tokens.weight"][token].copy()
        after_layer = []
        for layer in range(L):
            p = f"model.layers.{layer}."
            n = rmsnorm_vector(x, W[p + "input_layernorm.weight"])
            q_all, k_all, v_all = (affine(p + f"self_attn.{m}_proj", n) for m in "qkv")
            keys[layer].append([rotate_pairs(k_all[j * hd:(j + 1) * hd], position) for j in range(nkv)])
            values[layer].append([v_all[j * hd:(j + 1) * hd] for j in range(nkv)])
            heads_out = []
            for h in range(nh):
                kv_head = (h * nkv) // nh
                q = rotate_pairs(q_all[h * hd:(h + 1) * hd], position)
                scores = [float(np.dot(q, keys[layer][t][kv_head])) / math.sqrt(hd) for t in range(position + 1)]
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                total = sum(e)
                heads_out.append(sum((e[t] / total) * values[layer][t][kv_head] for t in range(position + 1)))
            x = x + affine(p + "self_attn.o_proj", np.concatenate(heads_out))
            m = rmsnorm_vector(x, W[p + "post_attention_layernorm.weight"])
            gate, up = affine(p + "mlp.gate_proj", m), affine(p + "mlp.up_proj", m)
            x = x + affine(p + "mlp.down_proj", gate / (1.0 + np.exp(-gate)) * up)
            after_layer.append(x.copy())
        logits.append(lm_head @ rmsnorm_vector(x, W["model.norm.weight"]))
        taps.append(after_layer)
    return np.array(logits), np.array(taps)  # [T, V], [T, L, H]


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

def check_llama3_frequencies():
    """The three regions of Llama 3 RoPE on frequencies chosen by their wavelength, answers by hand:
    original 64, low_freq_factor 1, high_freq_factor 4, factor 8, so high_wavelen = 16 and
    low_wavelen = 64."""
    s = rope.RopeScaling("llama3", 8.0, 1.0, 4.0, 64)
    wavelengths = np.array([8.0, 16.0, 32.0, 48.0, 64.0, 128.0])
    got = rope.llama3_scaled(2 * math.pi / wavelengths, s)
    f = 2 * math.pi / wavelengths
    # 32: original/wavelen = 2, smooth = (2 - 1) / (4 - 1) = 1/3; 48: 4/3, smooth = 1/9.
    want = [f[0], f[1], (2 / 3) * f[2] / 8 + (1 / 3) * f[2], (8 / 9) * f[3] / 8 + (1 / 9) * f[3], f[4] / 8, f[5] / 8]
    check(np.allclose(got[[0, 5]], [want[0], want[5]], rtol=1e-15),
          "llama3 rope: wavelength 8 < 16 is kept, wavelength 128 > 64 is divided by the factor")
    check(np.allclose(got[2:4], want[2:4], rtol=1e-15),
          "llama3 rope: wavelengths 32 and 48 are blended with smooth = 1/3 and 1/9")
    check(np.allclose(got[[1, 4]], [want[1], want[4]], rtol=1e-15),
          "llama3 rope: the blend meets both neighbours at wavelength 16 (kept) and 64 (divided)")

    # Llama 3.1 8B: theta 500000, head_dim 128, factor 8, 1, 4, 8192. Pair i has wavelength
    # 2 pi 500000^(i/64): kept while it is < 2048, i.e. i < 64 ln(2048 / 2 pi) / ln(500000) = 28.2;
    # divided once it is > 8192, i.e. i > 64 ln(8192 / 2 pi) / ln(500000) = 34.98.
    theta, hd = 500000.0, 128
    scaled = rope.inverse_frequencies(hd, theta, rope.RopeScaling("llama3", 8.0, 1.0, 4.0, 8192))
    plain = rope.inverse_frequencies(hd, theta)
    kept = [i for i in range(64) if scaled[i] == plain[i]]
    divided = [i for i in range(64) if abs(scaled[i] - plain[i] / 8) <= 1e-15 * plain[i]]
    check(kept == list(range(29)) and divided == list(range(35, 64)),
          f"llama3 rope, Llama 3.1 8B settings: pairs 0..28 kept, 35..63 divided by 8 (kept {kept[-1]}, divided from {divided[0]})")
    check(all(plain[i] / 8 < scaled[i] < plain[i] for i in range(29, 35)), "llama3 rope: pairs 29..34 lie between")
    check(np.allclose(rope.inverse_frequencies(hd, theta, rope.RopeScaling("llama3", 1.0, 1.0, 4.0, 8192)), plain,
                      rtol=1e-15, atol=0),
          "llama3 rope with factor 1 is plain RoPE")
    check(np.allclose(rope.inverse_frequencies(16, 50.0, rope.RopeScaling("linear", 3.0)), rope.inverse_frequencies(16, 50.0) / 3,
                      rtol=1e-15), "linear rope divides every frequency by the factor")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 2, 16))
    check(np.allclose(qwen3.apply_rope(x, [0, 3, 7, 12], 50.0, rope.RopeScaling("linear", 4.0)),
                      qwen3.apply_rope(x, [0, 0.75, 1.75, 3.0], 50.0), atol=1e-14),
          "linear rope at position p is plain rope at position p / factor")


def check_model(name, model_dir, config, stored, tokens):
    model = llama.load_model(model_dir)
    stored_back = load_safetensors(model_dir)
    check(all(np.array_equal(stored_back[k], v) for k, v in stored.items()), f"{name}: every tensor reads back exactly")
    check(isinstance(targets.load_target(model_dir), llama.LlamaModel), f"{name}: model_type llama loads as a Llama target")

    logits, hidden = llama.forward(model, tokens)
    check(logits.shape == (len(tokens), config["vocab_size"]) and len(hidden) == config["num_hidden_layers"] + 1,
          f"{name}: forward gives logits [T, vocab] and L+1 hidden states")
    slow_logits, slow_taps = slow_llama_forward(stored, config, tokens)
    d = max_rel_diff(logits, slow_logits)
    check(d < FLOAT64_TOL, f"{name}: logits equal the token-by-token KV-cache implementation (rel diff {d:.1e})")
    d = max(max_rel_diff(hidden[i + 1], slow_taps[:, i, :]) for i in range(config["num_hidden_layers"]))
    check(d < FLOAT64_TOL, f"{name}: hidden_states[i+1] equal the residual after layer i of that implementation (rel diff {d:.1e})")

    longer, longer_hidden = llama.forward(model, tokens + [7, 3, 99])
    d = max(max_rel_diff(longer[:len(tokens)], logits),
            max(max_rel_diff(a[:len(tokens)], b) for a, b in zip(longer_hidden, hidden)))
    check(d < 1e-12, f"{name}: prefix rows unchanged when tokens are appended (rel diff {d:.1e})")

    greedy = llama.greedy_continuation(model, tokens, 5)
    full, _ = llama.forward(model, tokens + greedy)
    chain = [int(np.argmax(full[len(tokens) - 1 + j])) for j in range(5)]
    check(greedy == chain and targets.greedy_continuation(model, tokens, 5) == greedy,
          f"{name}: greedy continuation {greedy} equals argmax of the forward {chain}")
    return model, logits, greedy


def check_cli(name, script, model_dir, config, tokens, logits, hidden, greedy):
    prefix = os.path.join(model_dir, "out_" + script.split("_")[0])
    taps = [config["num_hidden_layers"] - 1, 0]  # out of order on purpose: list order, not layer order
    cmd = [sys.executable, os.path.join(HERE, script), "--model", model_dir, "--tokens", ",".join(map(str, tokens)),
           "--greedy", "5", "--taps", ",".join(map(str, taps)), "--out", prefix]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        check(False, f"{name}: {script} ran ({run.stderr.strip()[-300:]})")
        return
    info = json.load(open(prefix + ".json"))
    T, V, Hs = len(tokens), config["vocab_size"], config["hidden_size"]
    file_logits = np.fromfile(prefix + ".logits.f32", dtype="<f4")
    file_taps = np.fromfile(prefix + ".taps.f32", dtype="<f4")
    expected_taps = np.concatenate([hidden[i + 1] for i in taps], axis=-1)
    check(info["vocab_size"] == V and info["rows"] == T and info["greedy"] == greedy
          and info["taps"]["shape"] == [T, len(taps) * Hs]
          and file_logits.size == T * V and np.allclose(file_logits.reshape(T, V), logits, rtol=1e-6, atol=1e-6)
          and file_taps.size == T * len(taps) * Hs
          and np.allclose(file_taps.reshape(T, len(taps) * Hs), expected_taps, rtol=1e-6, atol=1e-6),
          f"{name}: {script} writes the json, logits and taps files of the forward")


def refused(tmp, label, config, weights, needle, loader=llama.load_model):
    d = os.path.join(tmp, "bad_" + label.replace(" ", "_"))
    write_checkpoint(d, config, weights, "F32")
    try:
        loader(d)
        ok = False
    except (ValueError, KeyError) as e:
        ok = needle in str(e)
    check(ok, f"config: {label} is refused, naming {needle}")


def check_config_reading(tmp, config, stored):
    refused(tmp, "rope type dynamic", dict(config, rope_scaling={"rope_type": "dynamic", "factor": 2.0}), stored, "dynamic")
    refused(tmp, "rope type longrope", dict(config, rope_scaling={"type": "longrope", "factor": 2.0}), stored, "longrope")
    refused(tmp, "llama3 rope without low_freq_factor",
            dict(config, rope_scaling={k: v for k, v in LLAMA3_TINY.items() if k != "low_freq_factor"}), stored, "low_freq_factor")
    refused(tmp, "attention_bias without bias tensors", dict(config, attention_bias=True), stored, "q_proj.bias")
    refused(tmp, "model_type mistral", dict(config, model_type="mistral"), stored, "mistral", loader=targets.load_target)

    d = os.path.join(tmp, "defaults")
    write_checkpoint(d, {k: v for k, v in config.items() if k not in ("head_dim", "num_key_value_heads", "rope_theta",
                                                                      "rope_scaling", "rms_norm_eps")}, {}, "F32")
    c = llama.read_llama_config(d)
    check(c.head_dim == 32 // config["num_attention_heads"] and c.num_key_value_heads == config["num_attention_heads"]
          and c.rope_theta == 10000.0 and c.rope_scaling is None and c.rms_norm_eps == 1e-6
          and not c.attention_bias and not c.mlp_bias,
          "config: HF LlamaConfig defaults: head_dim = hidden / heads, MHA, theta 10000, eps 1e-6, no scaling, no biases")
    d = os.path.join(tmp, "old_style_type")
    write_checkpoint(d, dict(config, rope_scaling={"type": "linear", "factor": 2.0}), {}, "F32")
    check(llama.read_llama_config(d).rope_scaling == rope.RopeScaling("linear", 2.0),
          "config: the older rope_scaling {\"type\": \"linear\"} spelling is read")


def main():
    rng = np.random.default_rng(20260101)
    tokens = [int(t) for t in rng.integers(0, 101, size=12)]
    with tempfile.TemporaryDirectory() as tmp:
        check_llama3_frequencies()

        variants = [
            # name, dtype, config options
            ("bf16 GQA 4q/2kv tied llama3", "BF16", dict(num_heads=4, num_kv_heads=2, tied=True, scaling=LLAMA3_TINY)),
            ("f32 MHA untied both biases linear", "F32",
             dict(num_heads=4, num_kv_heads=4, tied=False, attention_bias=True, mlp_bias=True, scaling=LINEAR_TINY,
                  rope_style="rope_parameters")),
            ("bf16 MQA 4q/1kv untied attention bias llama3 derived head_dim", "BF16",
             dict(num_heads=4, num_kv_heads=1, tied=False, attention_bias=True, scaling=LLAMA3_TINY, head_dim=None,
                  rope_style="rope_parameters", theta=20.0)),
            ("f32 GQA 4q/2kv tied mlp bias plain rope", "F32", dict(num_heads=4, num_kv_heads=2, tied=True, mlp_bias=True)),
        ]
        results = {}
        for name, dtype, options in variants:
            model_dir = os.path.join(tmp, name.replace(" ", "_").replace("/", "-"))
            config, stored = make_llama(model_dir, rng, dtype, **options)
            model, logits, greedy = check_model(name, model_dir, config, stored, tokens)
            results[name] = (model_dir, config, stored, logits, greedy)

        name = "bf16 GQA 4q/2kv tied llama3"
        model_dir, config, stored, logits, greedy = results[name]
        hidden = llama.forward(llama.load_model(model_dir), tokens)[1]
        check_cli(name, "llama_reference.py", model_dir, config, tokens, logits, hidden, greedy)
        check_cli(name, "target_reference.py", model_dir, config, tokens, logits, hidden, greedy)

        # The scaling is read and matters at this length: plain RoPE gives other logits.
        plain_dir = os.path.join(tmp, "llama3_as_plain")
        write_checkpoint(plain_dir, dict(config, rope_scaling=None), stored, "F32")
        d = max_rel_diff(llama.forward(llama.load_model(plain_dir), tokens)[0], logits)
        check(d > 1e-3, f"llama3 rope: the same weights with plain RoPE give other logits at 12 tokens (rel diff {d:.1e})")
        factor_one_dir = os.path.join(tmp, "llama3_factor_one")
        write_checkpoint(factor_one_dir, dict(config, rope_scaling=dict(LLAMA3_TINY, factor=1.0)), stored, "F32")
        d = max_rel_diff(llama.forward(llama.load_model(factor_one_dir), tokens)[0],
                         llama.forward(llama.load_model(plain_dir), tokens)[0])
        check(d < 1e-12, f"llama3 rope with factor 1 gives plain RoPE's logits (rel diff {d:.1e})")

        # GQA = MHA with each kv head repeated for its group of consecutive query heads.
        group, hd = config["num_attention_heads"] // config["num_key_value_heads"], config["head_dim"]
        expanded = dict(stored)
        for i in range(config["num_hidden_layers"]):
            for proj in ("k_proj", "v_proj"):
                key = f"model.layers.{i}.self_attn.{proj}.weight"
                expanded[key] = np.concatenate([stored[key][(h // group) * hd:(h // group + 1) * hd]
                                                for h in range(config["num_attention_heads"])])
        mha_dir = os.path.join(tmp, "gqa_expanded_to_mha")
        write_checkpoint(mha_dir, dict(config, num_key_value_heads=config["num_attention_heads"]), expanded, "F32")
        d = max_rel_diff(llama.forward(llama.load_model(mha_dir), tokens)[0], logits)
        check(d < 1e-12, f"gqa: equals MHA with kv heads repeated per consecutive query group (rel diff {d:.1e})")

        # Tied = untied with lm_head.weight a copy of the embedding.
        untied_dir = os.path.join(tmp, "untied_copy")
        write_checkpoint(untied_dir, dict(config, tie_word_embeddings=False),
                         dict(stored, **{"lm_head.weight": stored["model.embed_tokens.weight"]}), "F32")
        d = max_rel_diff(llama.forward(llama.load_model(untied_dir), tokens)[0], logits)
        check(d < 1e-12, f"lm_head: tied equals untied with lm_head.weight = embedding (rel diff {d:.1e})")

        # Biases: all-zero biases are no biases; the configured biases are all used.
        zero_dir = os.path.join(tmp, "zero_biases")
        zero = dict(stored)
        for i in range(config["num_hidden_layers"]):
            p = f"model.layers.{i}."
            for proj, n in (("self_attn.q_proj", 4 * hd), ("self_attn.k_proj", 2 * hd), ("self_attn.v_proj", 2 * hd),
                            ("self_attn.o_proj", 32), ("mlp.gate_proj", 48), ("mlp.up_proj", 48), ("mlp.down_proj", 32)):
                zero[p + proj + ".bias"] = np.zeros(n, dtype=np.float32)
        write_checkpoint(zero_dir, dict(config, attention_bias=True, mlp_bias=True), zero, "F32")
        d = max_rel_diff(llama.forward(llama.load_model(zero_dir), tokens)[0], logits)
        check(d < 1e-12, f"bias: zero attention and MLP biases equal no biases (rel diff {d:.1e})")
        for bias in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                     "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            one = dict(zero)
            key = f"model.layers.1.{bias}.bias"
            one[key] = np.full_like(zero[key], 0.5)
            one_dir = os.path.join(tmp, "one_bias")
            write_checkpoint(one_dir, dict(config, attention_bias=True, mlp_bias=True), one, "F32")
            d = max_rel_diff(llama.forward(llama.load_model(one_dir), tokens)[0], logits)
            # (A k bias would cancel in softmax without RoPE; rotated, it differs from key to key.)
            check(d > 1e-4, f"bias: a {bias} bias of layer 1 changes the logits (rel diff {d:.1e})")

        check_config_reading(tmp, config, stored)

    print(f"\n{len(failures)} failure(s)" if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
