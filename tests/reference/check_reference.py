#!/usr/bin/python3
"""Self-check of the NumPy Qwen3 reference: builds tiny random checkpoints in Python (safetensors
bytes written here, by hand), then checks properties that a bug in the reference would break.

    /usr/bin/python3 tests/reference/check_reference.py     # exits non-zero on any failure

The strongest check compares the reference against a second implementation written differently
on purpose (one token at a time with a KV cache, per-head loops, matrix-vector products, RoPE pair
by pair); if torch is importable, a third one in torch in the Hugging Face style joins in.
The tiny models use head_dim != hidden/heads and a small rope theta so that a derived head_dim or a
wrong RoPE pairing shows up as a shape error or a large difference, not as noise.
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
import qwen3_reference as ref  # noqa: E402
from safetensors_numpy import load_safetensors, load_safetensors_file  # noqa: E402

# Both sides compute in float64; differences come from summation order only.
FLOAT64_TOL = 1e-9

# ---------------------------------------------------------------------------------------------
# Writing safetensors by hand
# ---------------------------------------------------------------------------------------------


def float32_to_bf16_bits(values):
    """Round-to-nearest-even of float32 to bf16 (no NaNs in our data)."""
    bits = np.asarray(values, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2")


def encode_tensor(dtype, values):
    """Returns (bytes, the float32 values those bytes hold; for U8 the bytes themselves)."""
    if dtype == "U8":  # raw bytes (MXFP4 blocks and scales), never converted
        stored = np.asarray(values)
        if stored.dtype != np.uint8:
            raise ValueError("U8 tensors are written from uint8 arrays")
        return stored.tobytes(), stored.copy()
    values = np.asarray(values, dtype=np.float32)
    if dtype == "F32":
        return values.astype("<f4").tobytes(), values.copy()
    if dtype == "F16":
        stored = values.astype("<f2")
        return stored.tobytes(), stored.astype(np.float32)
    if dtype == "BF16":
        bits = float32_to_bf16_bits(values)
        held = np.array([struct_bf16(b) for b in bits.ravel()], dtype=np.float32).reshape(values.shape)
        return bits.tobytes(), held
    raise ValueError(dtype)


def struct_bf16(bits):
    # Independent of the reader's shift-and-view: go through Python's struct.
    import struct
    return struct.unpack("<f", struct.pack("<I", int(bits) << 16))[0]


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (dtype, float32 array)}; returns {name: float32 values actually stored}."""
    header, blobs, stored, offset = {}, [], {}, 0
    for name, (dtype, values) in tensors.items():
        blob, held = encode_tensor(dtype, values)
        header[name] = {"dtype": dtype, "shape": list(np.shape(values)), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        stored[name] = held
        offset += len(blob)
    if metadata is not None:
        header["__metadata__"] = metadata
    header_bytes = json.dumps(header).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)  # the format recommends 8-byte alignment
    with open(path, "wb") as f:
        f.write(len(header_bytes).to_bytes(8, "little"))
        f.write(header_bytes)
        for blob in blobs:
            f.write(blob)
    return stored


# ---------------------------------------------------------------------------------------------
# Tiny random Qwen3 checkpoints
# ---------------------------------------------------------------------------------------------


def tiny_config(num_heads, num_kv_heads, tied, rope_style="rope_theta", theta=50.0):
    config = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3,
        "num_attention_heads": num_heads, "num_key_value_heads": num_kv_heads,
        "head_dim": 16,  # != 32 / heads: a derived head_dim cannot load these checkpoints
        "rms_norm_eps": 1e-6, "vocab_size": 101, "tie_word_embeddings": tied,
        "hidden_act": "silu", "attention_bias": False, "torch_dtype": "bfloat16",
    }
    if rope_style == "rope_theta":
        config["rope_theta"] = theta
    else:
        config["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    return config


def random_weights(config, rng, with_lm_head):
    H, I, V, hd = config["hidden_size"], config["intermediate_size"], config["vocab_size"], config["head_dim"]
    nh, nkv = config["num_attention_heads"], config["num_key_value_heads"]

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
        w[p + "self_attn.q_norm.weight"] = norm_weight(hd)
        w[p + "self_attn.k_norm.weight"] = norm_weight(hd)
        w[p + "post_attention_layernorm.weight"] = norm_weight(H)
        w[p + "mlp.gate_proj.weight"] = matrix(I, H)
        w[p + "mlp.up_proj.weight"] = matrix(I, H)
        w[p + "mlp.down_proj.weight"] = matrix(H, I)
        if config.get("attention_bias"):
            for proj, n in (("q_proj", nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd), ("o_proj", H)):
                w[p + f"self_attn.{proj}.bias"] = 0.5 * rng.standard_normal(n)
    w["model.norm.weight"] = norm_weight(H)
    if with_lm_head:
        w["lm_head.weight"] = matrix(V, H)
    return {k: v.astype(np.float32) for k, v in w.items()}


def write_checkpoint(model_dir, config, weights, dtype, shards=1):
    """Writes config.json and one file or `shards` shards with an index; returns the stored values."""
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    if shards == 1:
        return write_safetensors(os.path.join(model_dir, "model.safetensors"),
                                 {k: (dtype, v) for k, v in weights.items()}, {"format": "pt"})
    names = list(weights)
    stored, weight_map = {}, {}
    for s in range(shards):
        shard_name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: (dtype, weights[n]) for n in names[s::shards]}
        stored.update(write_safetensors(os.path.join(model_dir, shard_name), part, {"format": "pt"}))
        weight_map.update({n: shard_name for n in part})
    with open(os.path.join(model_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    return stored


# ---------------------------------------------------------------------------------------------
# A second implementation, written differently: token by token with a KV cache, W @ x products,
# per-head Python loops, RoPE pair by pair. It reads the raw tensor dict and the config dict.
# ---------------------------------------------------------------------------------------------


def slow_forward(weights, config, tokens):
    H, hd = config["hidden_size"], config["head_dim"]
    nh, nkv, L = config["num_attention_heads"], config["num_key_value_heads"], config["num_hidden_layers"]
    eps = config["rms_norm_eps"]
    theta = config.get("rope_theta", config.get("rope_parameters", {}).get("rope_theta"))
    half = hd // 2
    W = {k: v.astype(np.float64) for k, v in weights.items()}
    lm_head = W.get("lm_head.weight", W["model.embed_tokens.weight"])

    def rmsnorm_vector(x, w):
        return w * (x / math.sqrt(float(np.dot(x, x)) / len(x) + eps))

    def rotate_pairs(x, position):
        out = x.copy()
        for i in range(half):
            angle = position / theta ** (2 * i / hd)
            c, s = math.cos(angle), math.sin(angle)
            out[i] = x[i] * c - x[i + half] * s
            out[i + half] = x[i] * s + x[i + half] * c
        return out

    keys = [[] for _ in range(L)]    # keys[layer][position] -> [nkv][hd]
    values = [[] for _ in range(L)]
    logits, taps = [], []
    for position, token in enumerate(tokens):
        x = W["model.embed_tokens.weight"][token].copy()
        after_layer = []
        for layer in range(L):
            p = f"model.layers.{layer}."
            n = rmsnorm_vector(x, W[p + "input_layernorm.weight"])
            q_all = W[p + "self_attn.q_proj.weight"] @ n + W.get(p + "self_attn.q_proj.bias", 0.0)
            k_all = W[p + "self_attn.k_proj.weight"] @ n + W.get(p + "self_attn.k_proj.bias", 0.0)
            v_all = W[p + "self_attn.v_proj.weight"] @ n + W.get(p + "self_attn.v_proj.bias", 0.0)
            keys[layer].append([rotate_pairs(rmsnorm_vector(k_all[j * hd:(j + 1) * hd], W[p + "self_attn.k_norm.weight"]), position)
                                for j in range(nkv)])
            values[layer].append([v_all[j * hd:(j + 1) * hd] for j in range(nkv)])
            heads_out = []
            for h in range(nh):
                kv_head = (h * nkv) // nh
                q = rotate_pairs(rmsnorm_vector(q_all[h * hd:(h + 1) * hd], W[p + "self_attn.q_norm.weight"]), position)
                scores = [float(np.dot(q, keys[layer][t][kv_head])) / math.sqrt(hd) for t in range(position + 1)]
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                total = sum(e)
                heads_out.append(sum((e[t] / total) * values[layer][t][kv_head] for t in range(position + 1)))
            x = x + W[p + "self_attn.o_proj.weight"] @ np.concatenate(heads_out) + W.get(p + "self_attn.o_proj.bias", 0.0)
            m = rmsnorm_vector(x, W[p + "post_attention_layernorm.weight"])
            gate = W[p + "mlp.gate_proj.weight"] @ m
            up = W[p + "mlp.up_proj.weight"] @ m
            x = x + W[p + "mlp.down_proj.weight"] @ (gate / (1.0 + np.exp(-gate)) * up)
            after_layer.append(x.copy())
        logits.append(lm_head @ rmsnorm_vector(x, W["model.norm.weight"]))
        taps.append(after_layer)
    return np.array(logits), np.array(taps)  # [T, V], [T, L, H]


def torch_forward(torch, weights, config, tokens):
    """Hugging Face style: whole sequence, repeat_interleave for GQA, rotate_half, SDPA causal."""
    F = torch.nn.functional
    H, hd = config["hidden_size"], config["head_dim"]
    nh, nkv, eps = config["num_attention_heads"], config["num_key_value_heads"], config["rms_norm_eps"]
    theta = config.get("rope_theta", config.get("rope_parameters", {}).get("rope_theta"))
    W = {k: torch.from_numpy(v.astype(np.float64)) for k, v in weights.items()}
    lm_head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    T = len(tokens)

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def rotate_half(x):
        return torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], dim=-1)

    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x = W["model.embed_tokens.weight"][torch.tensor(tokens)]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        n = rms(x, W[p + "input_layernorm.weight"])
        q = F.linear(n, W[p + "self_attn.q_proj.weight"], W.get(p + "self_attn.q_proj.bias")).view(T, nh, hd).transpose(0, 1)
        k = F.linear(n, W[p + "self_attn.k_proj.weight"], W.get(p + "self_attn.k_proj.bias")).view(T, nkv, hd).transpose(0, 1)
        v = F.linear(n, W[p + "self_attn.v_proj.weight"], W.get(p + "self_attn.v_proj.bias")).view(T, nkv, hd).transpose(0, 1)
        q = rms(q, W[p + "self_attn.q_norm.weight"])
        k = rms(k, W[p + "self_attn.k_norm.weight"])
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(nh // nkv, dim=0)
        v = v.repeat_interleave(nh // nkv, dim=0)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + F.linear(att.transpose(0, 1).reshape(T, nh * hd), W[p + "self_attn.o_proj.weight"], W.get(p + "self_attn.o_proj.bias"))
        m = rms(x, W[p + "post_attention_layernorm.weight"])
        x = x + (F.silu(m @ W[p + "mlp.gate_proj.weight"].T) * (m @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
    return (rms(x, W["model.norm.weight"]) @ lm_head.T).numpy()


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

failures = []


def check(condition, what):
    print(("PASS  " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def max_rel_diff(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def check_reader_known_bit_patterns(tmp):
    import struct
    path = os.path.join(tmp, "known.safetensors")
    bf16 = struct.pack("<6H", 0x3F80, 0xC000, 0x3FC0, 0x0000, 0x8000, 0x7F80)  # 1, -2, 1.5, 0, -0, inf
    f16 = struct.pack("<3H", 0x3C00, 0xC000, 0x3555)                          # 1, -2, 0.333251953125
    f32 = struct.pack("<2f", 0.1, -3.5)
    data = bf16 + f16 + f32
    header = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
        "b": {"dtype": "F16", "shape": [3], "data_offsets": [12, 18]},
        "c": {"dtype": "F32", "shape": [2], "data_offsets": [18, 26]},  # unaligned on purpose
    }
    hb = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + data)
    t = load_safetensors(path)
    a_ok = (t["a"].dtype == np.float32 and t["a"].shape == (2, 3)
            and t["a"].ravel()[:4].tolist() == [1.0, -2.0, 1.5, 0.0]
            and math.copysign(1.0, t["a"].ravel()[4]) == -1.0 and t["a"].ravel()[5] == np.inf)
    check(a_ok, "reader: BF16 bit patterns decode to 1, -2, 1.5, 0, -0, inf in shape [2,3]")
    check(t["b"].tolist() == [1.0, -2.0, 0.333251953125], "reader: F16 bit patterns decode exactly")
    check(t["c"].tolist() == [np.float32(0.1), -3.5], "reader: F32 values at an unaligned offset read exactly")
    check(sorted(t) == ["a", "b", "c"], "reader: __metadata__ is not returned as a tensor")


def check_reader_refuses_bad_files(tmp):
    for label, entry in [("offsets not matching shape", {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}),
                         ("offsets beyond the data", {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}),
                         ("unsupported dtype I64", {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]})]:
        path = os.path.join(tmp, "bad.safetensors")
        hb = json.dumps({"x": entry}).encode()
        with open(path, "wb") as f:
            f.write(len(hb).to_bytes(8, "little") + hb + bytes(8))
        try:
            load_safetensors_file(path)
            refused = False
        except ValueError:
            refused = True
        check(refused, f"reader: refuses a tensor with {label}")


def check_model(name, model_dir, config, stored, tokens, torch):
    model = ref.load_model(model_dir)
    stored_back = load_safetensors(model_dir)
    check(all(np.array_equal(stored_back[k], v) for k, v in stored.items()),
          f"{name}: every tensor reads back as the exact value written")

    logits, hidden = ref.forward(model, tokens)
    check(logits.shape == (len(tokens), config["vocab_size"]) and len(hidden) == config["num_hidden_layers"] + 1,
          f"{name}: forward gives logits [T, vocab] and L+1 hidden states")

    slow_logits, slow_taps = slow_forward(stored, config, tokens)
    d = max_rel_diff(logits, slow_logits)
    check(d < FLOAT64_TOL, f"{name}: logits equal the token-by-token KV-cache implementation (rel diff {d:.1e})")
    d = max(max_rel_diff(hidden[i + 1], slow_taps[:, i, :]) for i in range(config["num_hidden_layers"]))
    check(d < FLOAT64_TOL, f"{name}: hidden_states[i+1] equal the residual after layer i of that implementation (rel diff {d:.1e})")

    if torch is not None:
        d = max_rel_diff(logits, torch_forward(torch, stored, config, tokens))
        check(d < FLOAT64_TOL, f"{name}: logits equal the torch implementation (rel diff {d:.1e})")

    # Causality: appending tokens cannot change earlier rows.
    longer, longer_hidden = ref.forward(model, tokens + [7, 3, 99])
    d = max(max_rel_diff(longer[:len(tokens)], logits),
            max(max_rel_diff(a[:len(tokens)], b) for a, b in zip(longer_hidden, hidden)))
    check(d < 1e-12, f"{name}: prefix rows unchanged when tokens are appended (rel diff {d:.1e})")
    first, _ = ref.forward(model, tokens[:1])
    check(max_rel_diff(first[0], logits[0]) < 1e-12, f"{name}: row 0 equals a forward over the first token alone")

    # Greedy continuation is the argmax chain of one forward over prompt + continuation.
    greedy = ref.greedy_continuation(model, tokens, 5)
    full, _ = ref.forward(model, tokens + greedy)
    chain = [int(np.argmax(full[len(tokens) - 1 + j])) for j in range(5)]
    check(greedy == chain, f"{name}: greedy continuation {greedy} equals argmax of the forward {chain}")

    # Command line: the files hold the same numbers, in the documented layout.
    prefix = os.path.join(model_dir, "out")
    taps = [config["num_hidden_layers"] - 1, 0]  # out of order on purpose: list order, not layer order
    cmd = [sys.executable, os.path.join(HERE, "qwen3_reference.py"), "--model", model_dir,
           "--tokens", ",".join(map(str, tokens)), "--greedy", "5",
           "--taps", ",".join(map(str, taps)), "--out", prefix]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        check(False, f"{name}: CLI ran ({run.stderr.strip()[-300:]})")
        return model, logits
    info = json.load(open(prefix + ".json"))
    T, V, Hs = len(tokens), config["vocab_size"], config["hidden_size"]
    file_logits = np.fromfile(prefix + ".logits.f32", dtype="<f4")
    file_taps = np.fromfile(prefix + ".taps.f32", dtype="<f4")
    check(info["vocab_size"] == V and info["rows"] == T and info["greedy"] == greedy
          and info["taps"]["layers"] == taps and info["taps"]["shape"] == [T, len(taps) * Hs],
          f"{name}: CLI json has vocab_size, rows, greedy, taps shape")
    check(file_logits.size == T * V and np.allclose(file_logits.reshape(T, V), logits, rtol=1e-6, atol=1e-6),
          f"{name}: CLI logits file is float32 [T, vocab] row-major equal to forward")
    expected_taps = np.concatenate([hidden[i + 1] for i in taps], axis=-1)
    check(file_taps.size == T * len(taps) * Hs
          and np.allclose(file_taps.reshape(T, len(taps) * Hs), expected_taps, rtol=1e-6, atol=1e-6),
          f"{name}: CLI taps file is [T, len(taps)*hidden], residual after each listed layer in list order")
    return model, logits


def check_rope():
    x = np.zeros((1, 1, 4))
    x[0, 0, 0] = 1.0
    out = ref.apply_rope(x, [1], theta=100.0)[0, 0]
    check(np.allclose(out, [math.cos(1.0), 0.0, math.sin(1.0), 0.0], atol=1e-15),
          "rope: element 0 pairs with element head_dim/2 (rotate-half), angle = position * theta^0")
    x = np.zeros((1, 1, 4))
    x[0, 0, 1] = 1.0
    out = ref.apply_rope(x, [3], theta=100.0)[0, 0]
    check(np.allclose(out, [0.0, math.cos(0.3), 0.0, math.sin(0.3)], atol=1e-15),
          "rope: element 1 rotates by position * theta^(-2/head_dim)")
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((1, 1, 16)), rng.standard_normal((1, 1, 16))
    dots = [float(np.sum(ref.apply_rope(q, [m + 5], 50.0) * ref.apply_rope(k, [m], 50.0))) for m in (0, 4, 11)]
    check(max(dots) - min(dots) < 1e-12, "rope: q.k depends only on the position difference")
    check(np.allclose(ref.apply_rope(q, [0], 50.0), q), "rope: position 0 is the identity")


def check_config_reading(tmp, config, weights):
    bad = dict(config, attention_bias=True)
    d = os.path.join(tmp, "bias")
    write_checkpoint(d, bad, weights, "F32")
    try:
        ref.load_model(d)
        refused = False
    except ValueError as e:
        refused = "attention_bias" in str(e)
    check(refused, "config: attention_bias = true without bias tensors is refused, naming the key")

    no_head_dim = {k: v for k, v in config.items() if k != "head_dim"}
    d = os.path.join(tmp, "no_head_dim")
    write_checkpoint(d, no_head_dim, weights, "F32")
    check(ref.read_qwen3_config(d).head_dim == 128,
          "config: missing head_dim takes HF's default 128, never hidden_size / heads")


def main():
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        torch = None
        print("NOTE  torch is not importable: the comparison against a torch implementation is skipped")

    rng = np.random.default_rng(20240611)
    tokens = [int(t) for t in rng.integers(0, 101, size=9)]
    with tempfile.TemporaryDirectory() as tmp:
        check_reader_known_bit_patterns(tmp)
        check_reader_refuses_bad_files(tmp)
        check_rope()

        variants = [
            # name, heads, kv heads, tied, dtype, shards, how theta is written
            ("bf16 GQA 4q/2kv tied", 4, 2, True, "BF16", 1, "rope_theta"),
            ("f32 MHA 4q/4kv untied sharded", 4, 4, False, "F32", 2, "rope_parameters"),
            ("f16 MQA 4q/1kv untied", 4, 1, False, "F16", 1, "rope_theta"),
            ("bf16 GQA 4q/2kv untied q/k/v/o biases", 4, 2, False, "BF16", 1, "rope_theta"),
        ]
        results = {}
        for name, nh, nkv, tied, dtype, shards, rope_style in variants:
            config = dict(tiny_config(nh, nkv, tied, rope_style), attention_bias="biases" in name)
            weights = random_weights(config, rng, with_lm_head=not tied)
            model_dir = os.path.join(tmp, name.replace(" ", "_").replace("/", "-"))
            stored = write_checkpoint(model_dir, config, weights, dtype, shards)
            results[name] = (config, stored, check_model(name, model_dir, config, stored, tokens, torch)[1])

        # GQA = MHA with each kv head repeated for its group of consecutive query heads.
        config, stored, gqa_logits = results["bf16 GQA 4q/2kv tied"]
        group, hd = config["num_attention_heads"] // config["num_key_value_heads"], config["head_dim"]
        expanded = dict(stored)
        for i in range(config["num_hidden_layers"]):
            for proj in ("k_proj", "v_proj"):
                key = f"model.layers.{i}.self_attn.{proj}.weight"
                expanded[key] = np.concatenate([stored[key][(h // group) * hd:(h // group + 1) * hd]
                                                for h in range(config["num_attention_heads"])])
        mha_dir = os.path.join(tmp, "gqa_expanded_to_mha")
        write_checkpoint(mha_dir, dict(config, num_key_value_heads=config["num_attention_heads"]), expanded, "F32")
        d = max_rel_diff(ref.forward(ref.load_model(mha_dir), tokens)[0], gqa_logits)
        check(d < 1e-12, f"gqa: equals MHA with kv heads repeated per consecutive query group (rel diff {d:.1e})")

        # Tied = untied with lm_head.weight a copy of the embedding; a different lm_head is used.
        untied_dir = os.path.join(tmp, "untied_copy")
        write_checkpoint(untied_dir, dict(config, tie_word_embeddings=False),
                         dict(stored, **{"lm_head.weight": stored["model.embed_tokens.weight"]}), "F32")
        d = max_rel_diff(ref.forward(ref.load_model(untied_dir), tokens)[0], gqa_logits)
        check(d < 1e-12, f"lm_head: tied equals untied with lm_head.weight = embedding (rel diff {d:.1e})")
        other_dir = os.path.join(tmp, "untied_other")
        write_checkpoint(other_dir, dict(config, tie_word_embeddings=True),
                         dict(stored, **{"lm_head.weight": -stored["model.embed_tokens.weight"]}), "F32")
        d = max_rel_diff(ref.forward(ref.load_model(other_dir), tokens)[0], -gqa_logits)
        check(d < 1e-12, "lm_head: lm_head.weight in the file is used even when the config ties")

        check_config_reading(tmp, config, stored)

    print(f"\n{len(failures)} failure(s)" if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
