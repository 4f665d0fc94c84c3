"""A small Qwen3 (dense) model in plain PyTorch, written to match docs/dflash.md §1 and the tensor names
and config.json keys of Hugging Face's Qwen3ForCausalLM, which worker/model/qwen3.cpp loads.

Per layer, pre-norm:
    n = input_layernorm(h);  h += o_proj(attn(rope(q_norm(q_proj n)), rope(k_norm(k_proj n)), v_proj n))
    m = post_attention_layernorm(h);  h += down_proj(silu(gate_proj m) * up_proj m)
then final = norm(h), logits = lm_head(final) (tied to the embedding here).

The attention and RoPE helpers are shared with the DFlash drafter (dflash_drafter.py).
"""

import dataclasses
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class Qwen3Shape:
    vocab_size: int = 4096
    hidden_size: int = 256
    intermediate_size: int = 768
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 64
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    max_position: int = 512


class RMSNorm(nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * self.weight.float()).to(x.dtype)


def rope_tables(positions, head_dim, theta):
    """cos and sin of shape [..., head_dim] for integer `positions` (rotate-half layout)."""
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = positions.float().unsqueeze(-1) * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):
    """x: [batch, heads, rows, head_dim]; cos/sin: [batch, rows, head_dim]. Element i pairs with
    i + head_dim/2 (NeoX / rotate-half)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1)


def attend(q, k, v, visible):
    """q: [b, hq, rows, d]; k, v: [b, hkv, keys, d]; visible: bool [b or 1, rows, keys].
    Query head h uses KV head h // (hq / hkv), as Hugging Face's repeat_kv does."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~visible.unsqueeze(1), float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


class Qwen3Layer(nn.Module):
    def __init__(self, s: Qwen3Shape):
        super().__init__()
        self.s = s
        q_width, kv_width = s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim
        self.input_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self.q_proj = nn.Linear(s.hidden_size, q_width, bias=False)
        self.k_proj = nn.Linear(s.hidden_size, kv_width, bias=False)
        self.v_proj = nn.Linear(s.hidden_size, kv_width, bias=False)
        self.o_proj = nn.Linear(q_width, s.hidden_size, bias=False)
        self.q_norm = RMSNorm(s.head_dim, s.rms_norm_eps)
        self.k_norm = RMSNorm(s.head_dim, s.rms_norm_eps)
        self.gate_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.up_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.down_proj = nn.Linear(s.intermediate_size, s.hidden_size, bias=False)

    def split_heads(self, x, heads):
        b, rows, _ = x.shape
        return x.view(b, rows, heads, self.s.head_dim).transpose(1, 2)

    def query(self, n, cos, sin):
        return apply_rope(self.q_norm(self.split_heads(self.q_proj(n), self.s.num_heads)), cos, sin)

    def key_value(self, n, cos, sin):
        """Keys (k_norm, then RoPE) and raw values of rows `n`, as [b, hkv, rows, head_dim]."""
        k = apply_rope(self.k_norm(self.split_heads(self.k_proj(n), self.s.num_kv_heads)), cos, sin)
        return k, self.split_heads(self.v_proj(n), self.s.num_kv_heads)

    def finish(self, h, attention_out):
        b, _, rows, _ = attention_out.shape
        h = h + self.o_proj(attention_out.transpose(1, 2).reshape(b, rows, -1))
        m = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m))

    def forward(self, h, cos, sin, visible, cache=None):
        """cache: None, or a dict holding this layer's earlier 'k' and 'v' (extended in place)."""
        n = self.input_layernorm(h)
        q = self.query(n, cos, sin)
        k, v = self.key_value(n, cos, sin)
        if cache is not None:
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        return self.finish(h, attend(q, k, v, visible))


class Qwen3Model(nn.Module):
    def __init__(self, s: Qwen3Shape):
        super().__init__()
        self.s = s
        self.embed_tokens = nn.Embedding(s.vocab_size, s.hidden_size)
        self.layers = nn.ModuleList(Qwen3Layer(s) for _ in range(s.num_layers))
        self.norm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self.reset_parameters()

    def reset_parameters(self):
        std = 0.02
        nn.init.normal_(self.embed_tokens.weight, std=std)
        for layer in self.layers:
            for proj in (layer.q_proj, layer.k_proj, layer.v_proj, layer.gate_proj, layer.up_proj):
                nn.init.normal_(proj.weight, std=std)
            # Residual-branch outputs scaled down with depth (GPT-2's habit) keep early training stable.
            for proj in (layer.o_proj, layer.down_proj):
                nn.init.normal_(proj.weight, std=std / math.sqrt(2 * self.s.num_layers))

    def lm_head(self, final):
        return final @ self.embed_tokens.weight.t()  # tied LM head

    def forward(self, ids, taps=(), caches=None, start=0):
        """ids: [b, rows] at positions start..start+rows-1, causal over any cached rows.
        Returns (logits [b, rows, vocab], {layer id: residual stream after that layer})."""
        b, rows = ids.shape
        positions = torch.arange(start, start + rows).unsqueeze(0).expand(b, rows)
        cos, sin = rope_tables(positions, self.s.head_dim, self.s.rope_theta)
        keys = start + rows
        visible = torch.arange(keys).unsqueeze(0) <= (start + torch.arange(rows)).unsqueeze(1)
        h = self.embed_tokens(ids)
        tapped = {}
        for i, layer in enumerate(self.layers):
            h = layer(h, cos, sin, visible.unsqueeze(0), None if caches is None else caches[i])
            if i in taps:
                tapped[i] = h
        return self.lm_head(self.norm(h)), tapped

    @torch.no_grad()
    def generate_greedy(self, prompts, steps, taps=()):
        """prompts: [b, P] ids (all the same length). Returns ([b, steps] greedy tokens, features):
        features [b, P + steps - 1, len(taps) * hidden] are the tapped residual streams of every
        row that went through the model (the last token is chosen but never run)."""
        caches = [{} for _ in self.layers]
        logits, tapped = self(prompts, taps=taps, caches=caches)
        features = [torch.cat([tapped[i] for i in taps], dim=-1)] if taps else []
        token = logits[:, -1].argmax(-1, keepdim=True)
        out = [token]
        start = prompts.shape[1]
        for _ in range(steps - 1):
            logits, tapped = self(token, taps=taps, caches=caches, start=start)
            if taps:
                features.append(torch.cat([tapped[i] for i in taps], dim=-1))
            start += 1
            token = logits[:, -1].argmax(-1, keepdim=True)
            out.append(token)
        return torch.cat(out, dim=1), (torch.cat(features, dim=1) if taps else None)

    # --- Hugging Face layout -----------------------------------------------------------------

    def hf_tensors(self):
        t = {"model.embed_tokens.weight": self.embed_tokens.weight, "model.norm.weight": self.norm.weight}
        for i, layer in enumerate(self.layers):
            t.update(layer_tensors(layer, f"model.layers.{i}."))
        return t

    def load_hf_tensors(self, tensors):
        self.embed_tokens.weight.data.copy_(tensors["model.embed_tokens.weight"])
        self.norm.weight.data.copy_(tensors["model.norm.weight"])
        for i, layer in enumerate(self.layers):
            load_layer_tensors(layer, f"model.layers.{i}.", tensors)

    def hf_config(self, bos_id, eos_id, dtype_name):
        s = self.s
        return {
            "architectures": ["Qwen3ForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": bos_id,
            "eos_token_id": eos_id,
            "head_dim": s.head_dim,
            "hidden_act": "silu",
            "hidden_size": s.hidden_size,
            "initializer_range": 0.02,
            "intermediate_size": s.intermediate_size,
            "max_position_embeddings": s.max_position,
            "max_window_layers": s.num_layers,
            "model_type": "qwen3",
            "num_attention_heads": s.num_heads,
            "num_hidden_layers": s.num_layers,
            "num_key_value_heads": s.num_kv_heads,
            "rms_norm_eps": s.rms_norm_eps,
            "rope_scaling": None,
            "rope_theta": s.rope_theta,
            "sliding_window": None,
            "tie_word_embeddings": True,
            "torch_dtype": dtype_name,
            "use_cache": True,
            "use_sliding_window": False,
            "vocab_size": s.vocab_size,
        }


def shape_from_config(config):
    return Qwen3Shape(
        vocab_size=config["vocab_size"],
        hidden_size=config["hidden_size"],
        intermediate_size=config["intermediate_size"],
        num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"],
        num_kv_heads=config["num_key_value_heads"],
        head_dim=config["head_dim"],
        rope_theta=config["rope_theta"],
        rms_norm_eps=config["rms_norm_eps"],
        max_position=config["max_position_embeddings"],
    )


_LAYER_NAMES = {
    "input_layernorm.weight": "input_layernorm",
    "post_attention_layernorm.weight": "post_attention_layernorm",
    "self_attn.q_proj.weight": "q_proj",
    "self_attn.k_proj.weight": "k_proj",
    "self_attn.v_proj.weight": "v_proj",
    "self_attn.o_proj.weight": "o_proj",
    "self_attn.q_norm.weight": "q_norm",
    "self_attn.k_norm.weight": "k_norm",
    "mlp.gate_proj.weight": "gate_proj",
    "mlp.up_proj.weight": "up_proj",
    "mlp.down_proj.weight": "down_proj",
}


def layer_tensors(layer, prefix):
    return {prefix + name: getattr(layer, attr).weight for name, attr in _LAYER_NAMES.items()}


def load_layer_tensors(layer, prefix, tensors):
    for name, attr in _LAYER_NAMES.items():
        getattr(layer, attr).weight.data.copy_(tensors[prefix + name])


def load_target(directory):
    """The exported target directory back as a Qwen3Model (float32)."""
    from safetensors_io import read_safetensors

    with open(f"{directory}/config.json") as f:
        config = json.load(f)
    model = Qwen3Model(shape_from_config(config))
    model.load_hf_tensors(read_safetensors(f"{directory}/model.safetensors"))
    return model, config
