#!/usr/bin/python3
"""Writes tiny random hybrid Qwen3.5 / Qwen3.5-MoE / Qwen3-Next checkpoints in Hugging Face layout,
for the self-checks of qwen3_5_reference.py.

    /usr/bin/python3 tests/reference/make_hybrid_checkpoint.py --family qwen3_5|qwen3_5_moe|qwen3_next \
        --out DIR [--layers 4] [--seed 0] [--dtype BF16] [--multimodal]

The config keys are the published ones (Qwen3_5TextConfig / Qwen3_5MoeTextConfig / Qwen3NextConfig):
layer_types (linear_attention with every 4th layer full_attention), linear_* sizes, head_dim,
partial_rotary_factor 0.25 (in rope_parameters for Qwen3.5, with mrope_section, at top level for
Qwen3-Next), the MoE sizes and shared_expert_intermediate_size.
  --multimodal (Qwen3.5 only): architectures ["Qwen3_5ForConditionalGeneration"] (or the MoE one),
    model_type qwen3_5 / qwen3_5_moe with the text config in text_config (model_type *_text), the
    language model under model.language_model.*, lm_head.weight at top level, and a few
    model.visual.* and mtp.* tensors that a text forward never reads.
  otherwise: the text-only layout (Qwen3_5ForCausalLM, model_type qwen3_5_text, or
    Qwen3NextForCausalLM / qwen3_next), tensors under model.*.
Linear layers: Qwen3.5's in_proj_qkv / in_proj_z / in_proj_b / in_proj_a, Qwen3-Next's grouped
in_proj_qkvz / in_proj_ba; conv1d.weight [conv_dim, 1, K], A_log, dt_bias, norm.weight (around 1:
not zero-centred). Zero-centred norms are stored around 0. Experts: per-expert tensors for
Qwen3-Next, fused gate_up_proj / down_proj for Qwen3.5-MoE (as the published files hold them).
Weights are scaled so that activations stay O(1). No tokenizer is written.
"""

import argparse
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_moe_checkpoint import write_model, _matrix  # noqa: E402

FAMILIES = ("qwen3_5", "qwen3_5_moe", "qwen3_next")


def text_config(family, num_layers=4, hidden=64, num_heads=4, num_kv_heads=2, head_dim=16, intermediate=96,
                linear_k_heads=2, linear_v_heads=4, linear_k_dim=8, linear_v_dim=12, conv_kernel=4,
                num_experts=6, top_k=2, moe_intermediate=24, shared_intermediate=32, vocab=151, tied=False,
                theta=1000.0, layer_types=None, attention_bias=False, norm_topk_prob=True, mlp_only_layers=()):
    """The text model's config keys at a tiny size (rotary dim 4 of head_dim 16)."""
    if layer_types is None:
        layer_types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(num_layers)]
    config = {
        "attention_bias": attention_bias, "attention_dropout": 0.0, "eos_token_id": 2, "full_attention_interval": 4,
        "head_dim": head_dim, "hidden_act": "silu", "hidden_size": hidden, "initializer_range": 0.02,
        "layer_types": list(layer_types), "linear_conv_kernel_dim": conv_kernel, "linear_key_head_dim": linear_k_dim,
        "linear_num_key_heads": linear_k_heads, "linear_num_value_heads": linear_v_heads,
        "linear_value_head_dim": linear_v_dim, "max_position_embeddings": 4096, "num_attention_heads": num_heads,
        "num_hidden_layers": num_layers, "num_key_value_heads": num_kv_heads, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": tied, "use_cache": True, "vocab_size": vocab,
    }
    if family == "qwen3_next":
        config.update({"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "rope_theta": theta,
                       "partial_rotary_factor": 0.25, "rope_scaling": None, "intermediate_size": intermediate,
                       "decoder_sparse_step": 1, "mlp_only_layers": list(mlp_only_layers), "norm_topk_prob": norm_topk_prob,
                       "num_experts": num_experts, "num_experts_per_tok": top_k, "moe_intermediate_size": moe_intermediate,
                       "shared_expert_intermediate_size": shared_intermediate, "router_aux_loss_coef": 0.001,
                       "output_router_logits": False})
        return config
    config.update({"attn_output_gate": True, "mtp_num_hidden_layers": 1,
                   "rope_parameters": {"mrope_interleaved": True, "mrope_section": [1, 1, 0], "rope_type": "default",
                                       "rope_theta": theta, "partial_rotary_factor": 0.25}})
    if family == "qwen3_5":
        config.update({"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text",
                       "intermediate_size": intermediate})
    else:
        config.update({"architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe_text",
                       "num_experts": num_experts, "num_experts_per_tok": top_k, "moe_intermediate_size": moe_intermediate,
                       "shared_expert_intermediate_size": shared_intermediate, "router_aux_loss_coef": 0.001})
    return config


def multimodal_config(text):
    """Qwen3.5's composite config around a text config."""
    moe = text["model_type"] == "qwen3_5_moe_text"
    inner = {k: v for k, v in text.items() if k != "architectures"}
    return {"architectures": ["Qwen3_5MoeForConditionalGeneration" if moe else "Qwen3_5ForConditionalGeneration"],
            "model_type": "qwen3_5_moe" if moe else "qwen3_5", "image_token_id": 248056, "video_token_id": 248057,
            "vision_start_token_id": 248053, "vision_end_token_id": 248054,
            "tie_word_embeddings": text["tie_word_embeddings"], "text_config": inner,
            "vision_config": {"model_type": "qwen3_5_moe" if moe else "qwen3_5", "depth": 1, "hidden_size": 16,
                              "out_hidden_size": text["hidden_size"], "patch_size": 16, "spatial_merge_size": 2}}


def _zero_centred(rng, n):
    return 0.3 * rng.standard_normal(n)  # scale 1 + w: not all ones, so a skipped norm shows


def _sparse(config, i):
    if config["model_type"].startswith("qwen3_5_moe"):
        return True
    return (config.get("num_experts", 0) > 0 and i not in config.get("mlp_only_layers", [])
            and (i + 1) % config.get("decoder_sparse_step", 1) == 0)


def text_tensors(config, rng, family):
    """{short name: float64 values} of the language model (names without the model prefix)."""
    H, V, hd = config["hidden_size"], config["vocab_size"], config["head_dim"]
    nh, nkv = config["num_attention_heads"], config["num_key_value_heads"]
    nk, nv = config["linear_num_key_heads"], config["linear_num_value_heads"]
    dk, dv, K = config["linear_key_head_dim"], config["linear_value_head_dim"], config["linear_conv_kernel_dim"]
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    w = {"embed_tokens.weight": rng.standard_normal((V, H))}
    for i, kind in enumerate(config["layer_types"]):
        p = f"layers.{i}."
        w[p + "input_layernorm.weight"] = _zero_centred(rng, H)
        w[p + "post_attention_layernorm.weight"] = _zero_centred(rng, H)
        if kind == "full_attention":
            w[p + "self_attn.q_proj.weight"] = _matrix(rng, 2 * nh * hd, H, 2.0)
            w[p + "self_attn.k_proj.weight"] = _matrix(rng, nkv * hd, H, 2.0)
            w[p + "self_attn.v_proj.weight"] = _matrix(rng, nkv * hd, H)
            w[p + "self_attn.o_proj.weight"] = _matrix(rng, H, nh * hd)
            w[p + "self_attn.q_norm.weight"] = _zero_centred(rng, hd)
            w[p + "self_attn.k_norm.weight"] = _zero_centred(rng, hd)
            if config["attention_bias"]:
                for proj, n in (("q_proj", 2 * nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd), ("o_proj", H)):
                    w[p + f"self_attn.{proj}.bias"] = 0.5 * rng.standard_normal(n)
        else:
            a = p + "linear_attn."
            if family == "qwen3_next":
                w[a + "in_proj_qkvz.weight"] = _matrix(rng, 2 * key_dim + 2 * value_dim, H)
                w[a + "in_proj_ba.weight"] = _matrix(rng, 2 * nv, H)
            else:
                w[a + "in_proj_qkv.weight"] = _matrix(rng, conv_dim, H)
                w[a + "in_proj_z.weight"] = _matrix(rng, value_dim, H)
                w[a + "in_proj_b.weight"] = _matrix(rng, nv, H)
                w[a + "in_proj_a.weight"] = _matrix(rng, nv, H)
            w[a + "conv1d.weight"] = rng.standard_normal((conv_dim, 1, K)) / math.sqrt(K)
            w[a + "A_log"] = np.log(rng.uniform(0.5, 4.0, nv))  # decay rates like trained ones, not 0..16
            w[a + "dt_bias"] = 0.5 * rng.standard_normal(nv)
            w[a + "norm.weight"] = 1.0 + 0.3 * rng.standard_normal(dv)
            w[a + "out_proj.weight"] = _matrix(rng, H, value_dim)
        if _sparse(config, i):
            E, I, Is = config["num_experts"], config["moe_intermediate_size"], config["shared_expert_intermediate_size"]
            w[p + "mlp.gate.weight"] = _matrix(rng, E, H, 3.0)  # spread router probabilities: clear top-k
            if family == "qwen3_5_moe":
                w[p + "mlp.experts.gate_up_proj"] = np.stack([_matrix(rng, 2 * I, H) for _ in range(E)])
                w[p + "mlp.experts.down_proj"] = np.stack([_matrix(rng, H, I) for _ in range(E)])
            else:
                for e in range(E):
                    w[p + f"mlp.experts.{e}.gate_proj.weight"] = _matrix(rng, I, H)
                    w[p + f"mlp.experts.{e}.up_proj.weight"] = _matrix(rng, I, H)
                    w[p + f"mlp.experts.{e}.down_proj.weight"] = _matrix(rng, H, I)
            w[p + "mlp.shared_expert.gate_proj.weight"] = _matrix(rng, Is, H)
            w[p + "mlp.shared_expert.up_proj.weight"] = _matrix(rng, Is, H)
            w[p + "mlp.shared_expert.down_proj.weight"] = _matrix(rng, H, Is)
            w[p + "mlp.shared_expert_gate.weight"] = _matrix(rng, 1, H, 2.0)
        else:
            I = config["intermediate_size"]
            w[p + "mlp.gate_proj.weight"] = _matrix(rng, I, H)
            w[p + "mlp.up_proj.weight"] = _matrix(rng, I, H)
            w[p + "mlp.down_proj.weight"] = _matrix(rng, H, I)
    w["norm.weight"] = _zero_centred(rng, H)
    return w


def make_checkpoint(family, out_dir, seed=0, dtype="BF16", multimodal=False, **options):
    """Writes a random checkpoint; returns (config.json dict, {tensor name: float32 values stored})."""
    if family not in FAMILIES:
        raise ValueError(f"family {family!r} (known: {', '.join(FAMILIES)})")
    if multimodal and family == "qwen3_next":
        raise ValueError("--multimodal: Qwen3-Next has no multimodal checkpoint")
    rng = np.random.default_rng(seed)
    text = text_config(family, **options)
    prefix = "model.language_model." if multimodal else "model."
    weights = {prefix + name: values for name, values in text_tensors(text, rng, family).items()}
    if not text["tie_word_embeddings"]:
        weights["lm_head.weight"] = _matrix(rng, text["vocab_size"], text["hidden_size"])
    config = text
    if multimodal:
        config = multimodal_config(text)
        # Never read by a text forward: a stand-in for the vision tower and the MTP head.
        weights["model.visual.patch_embed.proj.weight"] = rng.standard_normal((16, 3, 2, 16, 16))
        weights["model.visual.merger.linear_fc2.weight"] = _matrix(rng, text["hidden_size"], 64)
        weights["mtp.fc.weight"] = _matrix(rng, text["hidden_size"], 2 * text["hidden_size"])
        weights["mtp.norm.weight"] = _zero_centred(rng, text["hidden_size"])
    tensors = {name: (dtype, np.asarray(values, dtype=np.float32)) for name, values in weights.items()}
    return config, write_model(out_dir, config, tensors)


def main(argv=None):
    parser = argparse.ArgumentParser(description="write a tiny random Qwen3.5 / Qwen3.5-MoE / Qwen3-Next checkpoint (HF layout)")
    parser.add_argument("--family", required=True, choices=FAMILIES)
    parser.add_argument("--out", required=True, help="directory to write")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="BF16", choices=["F32", "F16", "BF16"])
    parser.add_argument("--multimodal", action="store_true", help="Qwen3.5's ForConditionalGeneration layout")
    args = parser.parse_args(argv)
    make_checkpoint(args.family, args.out, seed=args.seed, dtype=args.dtype, multimodal=args.multimodal,
                    num_layers=args.layers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
