"""A stand-in for Hugging Face transformers, for testing tools/gpu_validation/hf_baseline.py where
transformers is not installed (tests/scripts/gpu_validation_test). It is not transformers: it offers
only the calls hf_baseline.py makes, with the behaviour the 5.x documentation describes (from_pretrained
with dtype/device_map/output_loading_info, generate with a streamer that receives the prompt and
then each new token, min_new_tokens, cache_implementation, disable_compile), over our own PyTorch
Qwen3 (tools/train/qwen3_model.py), so the harness's use of them is exercised end to end."""

import json
import os
import sys

import torch

__version__ = "5.0.0.fake"

_GENERATE_KEYS = {"input_ids", "attention_mask", "do_sample", "max_new_tokens", "min_new_tokens", "pad_token_id",
                  "streamer", "cache_implementation", "disable_compile"}


class GenerationConfig:
    def to_dict(self):
        return {"max_new_tokens": None, "cache_implementation": None, "disable_compile": False,
                "compile_config": None}


class _Config:
    def __init__(self, values):
        self._values = values
        self._attn_implementation = "sdpa"

    def to_dict(self):
        return dict(self._values)


class _CausalLM(torch.nn.Module):
    def __init__(self, inner, config):
        super().__init__()
        self.inner = inner
        self.config = _Config(config)
        self.dtype = torch.float32

    def forward(self, ids, caches, start):
        return self.inner(ids, caches=caches, start=start)[0]

    @torch.no_grad()
    def generate(self, **kwargs):
        unknown = set(kwargs) - _GENERATE_KEYS
        if unknown:
            raise ValueError(f"The following `model_kwargs` are not used by the model: {sorted(unknown)}")
        ids, streamer = kwargs["input_ids"], kwargs.get("streamer")
        if kwargs.get("do_sample", True):
            raise ValueError("the fake decodes greedily only")
        if kwargs.get("cache_implementation") not in (None, "static"):
            raise ValueError(f"unknown cache_implementation {kwargs['cache_implementation']}")
        if streamer is not None:
            streamer.put(ids.cpu())
        caches = [{} for _ in self.inner.layers]
        logits = self.forward(ids, caches, 0)
        out = [ids]
        for i in range(kwargs["max_new_tokens"]):
            token = logits[:, -1].argmax(-1, keepdim=True)
            out.append(token)
            if streamer is not None:
                streamer.put(token.cpu())
            if i + 1 < kwargs["max_new_tokens"]:
                logits = self.forward(token, caches, ids.shape[-1] + i)
        if streamer is not None:
            streamer.end()
        return torch.cat(out, dim=-1)


class AutoModelForCausalLM:
    @staticmethod
    def from_pretrained(path, dtype=None, device_map=None, output_loading_info=False, **unused):
        if unused:
            raise TypeError(f"unexpected arguments {sorted(unused)}")
        if device_map not in (None, "cpu"):
            raise ValueError("the fake runs on the CPU only")
        train = os.environ.get("FLASHQ_TRAIN_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                                                                   "tools", "train")
        sys.path.insert(0, train)
        from qwen3_model import Qwen3Model, shape_from_config
        from safetensors_io import read_safetensors

        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        if config.get("architectures") != ["Qwen3ForCausalLM"]:
            raise ValueError(f"not a Qwen3ForCausalLM: {config.get('architectures')}")
        inner = Qwen3Model(shape_from_config(config))
        tensors = read_safetensors(os.path.join(path, "model.safetensors"))
        inner.load_hf_tensors(tensors)
        if "lm_head.weight" in tensors:
            head = tensors["lm_head.weight"]
            inner.lm_head = lambda final: final @ head.t()
        model = _CausalLM(inner, config)
        info = {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": [], "error_msgs": []}
        return (model, info) if output_loading_info else model
