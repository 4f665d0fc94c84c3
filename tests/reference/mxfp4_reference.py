#!/usr/bin/python3
"""MXFP4 weights of the NumPy reference: how a gpt-oss checkpoint packs its expert matrices, and
their decoding to float64, written from the format (OCP Microscaling MXFP4) and from Hugging Face
transformers' integrations/mxfp4.py (convert_moe_packed_tensors, FP4_VALUES), not from flashq.

A matrix W [rows, cols] (rows = output features, cols = inputs, as in y = W x) is stored as
  *_blocks  uint8 [..., rows, cols/32, 16]: each group of 32 consecutive inputs of a row is 16
            bytes; byte j holds element 2j in its low nibble and element 2j+1 in its high nibble;
  *_scales  uint8 [..., rows, cols/32]: one E8M0 scale per group, the power of two 2^(s - 127).
A nibble is an FP4 E2M1 number: bit 3 the sign, then 2 exponent bits and 1 mantissa bit, i.e.
  0..7  ->  0, 0.5, 1, 1.5, 2, 3, 4, 6        8..15 -> the same values negated (8 is -0).
Element = FP4 value * 2^(s - 127), exactly representable in float32 for every scale used here.
Scale 255 is NaN in the OCP format and is refused.

gpt-oss (transformers' GptOssExperts / Mxfp4GptOssExperts) stores per layer
  mlp.experts.gate_up_proj_blocks [E, 2I, H/32, 16], gate_up_proj_scales [E, 2I, H/32],
  mlp.experts.down_proj_blocks    [E, H, I/32, 16],  down_proj_scales    [E, H, I/32];
row r of the decoded gate_up matrix [2I, H] is output r, and the outputs interleave gate and up:
gate = rows 0, 2, 4, ... and up = rows 1, 3, 5, ... (HF: gate_up[..., ::2], gate_up[..., 1::2]).
"""

import numpy as np

COMPUTE = np.float64

# E2M1 code -> value (index = the nibble); HF's FP4_VALUES in the same order.
FP4_E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                            -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=COMPUTE)
SCALE_BIAS = 127          # E8M0: the stored byte s means 2^(s - 127)
VALUES_PER_BLOCK = 32     # one scale per 32 elements
BYTES_PER_BLOCK = 16      # two FP4 nibbles per byte


def decode_mxfp4(blocks, scales):
    """Blocks uint8 [..., G, 16] and scales uint8 [..., G] -> float64 [..., G * 32]: the matrix
    whose last axis is the input axis (element 32g + 2j from the low nibble of byte j of block g,
    element 32g + 2j + 1 from its high nibble)."""
    blocks, scales = np.asarray(blocks), np.asarray(scales)
    if blocks.dtype != np.uint8 or scales.dtype != np.uint8:
        raise ValueError("mxfp4: blocks and scales must be uint8")
    if blocks.ndim < 2 or blocks.shape[-1] != BYTES_PER_BLOCK:
        raise ValueError(f"mxfp4: blocks must end in a dimension of {BYTES_PER_BLOCK} bytes, got {list(blocks.shape)}")
    if blocks.shape[:-1] != scales.shape:
        raise ValueError(f"mxfp4: scales {list(scales.shape)} do not match blocks {list(blocks.shape)}")
    if np.any(scales == 255):
        raise ValueError("mxfp4: scale byte 255 is NaN in E8M0")
    low = FP4_E2M1_VALUES[blocks & 0x0F]
    high = FP4_E2M1_VALUES[blocks >> 4]
    values = np.stack([low, high], axis=-1).reshape(*blocks.shape[:-1], VALUES_PER_BLOCK)  # 2j, 2j+1 interleaved
    values = values * np.exp2(scales.astype(COMPUTE) - SCALE_BIAS)[..., None]
    return values.reshape(*blocks.shape[:-2], blocks.shape[-2] * VALUES_PER_BLOCK)


def expected_shapes(num_experts, hidden, intermediate):
    """{name under mlp.experts.: shape} of a gpt-oss layer's MXFP4 experts (HF Mxfp4GptOssExperts)."""
    for name, size in (("hidden_size", hidden), ("intermediate_size", intermediate)):
        if size % VALUES_PER_BLOCK != 0:
            raise ValueError(f"config: {name} {size} is not a multiple of {VALUES_PER_BLOCK} (MXFP4 blocks)")
    E, H, I = num_experts, hidden, intermediate
    return {
        "gate_up_proj_blocks": (E, 2 * I, H // VALUES_PER_BLOCK, BYTES_PER_BLOCK),
        "gate_up_proj_scales": (E, 2 * I, H // VALUES_PER_BLOCK),
        "gate_up_proj_bias": (E, 2 * I),
        "down_proj_blocks": (E, H, I // VALUES_PER_BLOCK, BYTES_PER_BLOCK),
        "down_proj_scales": (E, H, I // VALUES_PER_BLOCK),
        "down_proj_bias": (E, H),
    }
