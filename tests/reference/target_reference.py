#!/usr/bin/python3
"""The reference target of any supported family, chosen by config.json's model_type: "qwen3"
(qwen3_reference.py), "llama" (llama_reference.py), "qwen3_moe" (qwen3_moe_reference.py),
"gpt_oss" (gptoss_reference.py), or the hybrid "qwen3_5" / "qwen3_5_text" / "qwen3_5_moe" /
"qwen3_5_moe_text" / "qwen3_next" (qwen3_5_reference.py; for a multimodal Qwen3.5 file the
model_type of config.json's top level). Used where the family does not matter, such as the DFlash loop
of dflash_reference.py.

Command line: the same as qwen3_reference.py's, for a checkpoint of any family (PREFIX.json also holds
"moe" for the MoE families, see qwen3_moe_reference.py):
  /usr/bin/python3 tests/reference/target_reference.py --model DIR --tokens 1,2,3 \
      [--greedy N] [--taps 0,2] [--kv-cache-dtype float32|bf16] --out PREFIX
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gptoss_reference  # noqa: E402
import llama_reference  # noqa: E402
import qwen3_5_reference  # noqa: E402
import qwen3_moe_reference  # noqa: E402
import qwen3_reference  # noqa: E402

FAMILIES = {"qwen3": qwen3_reference, "llama": llama_reference, "qwen3_moe": qwen3_moe_reference,
            "gpt_oss": gptoss_reference}
FAMILIES.update({model_type: qwen3_5_reference for model_type in qwen3_5_reference.MODEL_TYPES})
# The module of each family's model class, for dispatching on a loaded model.
_MODULE_OF_MODEL = {qwen3_reference.Qwen3Model: qwen3_reference, llama_reference.LlamaModel: llama_reference,
                    qwen3_moe_reference.Qwen3MoeModel: qwen3_moe_reference, gptoss_reference.GptOssModel: gptoss_reference,
                    qwen3_5_reference.HybridModel: qwen3_5_reference}


def family_of(model_dir):
    """The reference module of the checkpoint's model_type; other types are refused by name."""
    with open(os.path.join(model_dir, "config.json"), "r", encoding="utf-8") as f:
        model_type = json.load(f).get("model_type")
    if model_type not in FAMILIES:
        raise ValueError(f"config: model_type {model_type!r} has no reference (known: {', '.join(FAMILIES)})")
    return FAMILIES[model_type]


def load_target(model_dir):
    return family_of(model_dir).load_model(model_dir)


def _module(model):
    return _MODULE_OF_MODEL[type(model)]


def forward(model, tokens):
    return _module(model).forward(model, tokens)


def greedy_continuation(model, tokens, num_new):
    return qwen3_reference.greedy_continuation(model, tokens, num_new, forward)


def main(argv=None):
    return qwen3_reference.run_cli(argv, "Qwen3, Llama, Qwen3-MoE, gpt-oss, Qwen3.5 or Qwen3-Next", load_target, forward,
                                   extra_info=_routing_info)


def _routing_info(model, tokens):
    """The MoE families' routing record (PREFIX.json "moe"); nothing for dense families."""
    module = _module(model)
    return module.routing_info(model, tokens) if hasattr(module, "routing_info") else {}


if __name__ == "__main__":
    sys.exit(main())
