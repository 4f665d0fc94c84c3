#!/usr/bin/python3
"""YaRN rotary position embedding for the NumPy reference (gpt-oss, and drafters whose config.json
names it), written from Hugging Face transformers' modeling_rope_utils.py (_compute_yarn_parameters)
and the YaRN paper, not from flashq's code. Plain, linear and llama3 RoPE stay in rope_reference.py.

Settings: rope_parameters (transformers 5) or rope_scaling (4.x) with rope_type "yarn":
  factor                            required (absent or null: max_position_embeddings / original)
  original_max_position_embeddings  required
  beta_fast, beta_slow              default 32 and 1 (a null or 0 also means the default)
  truncate                          default true: floor / ceil the correction range
  attention_factor                  default: mscale(factor) = 0.1 ln(factor) + 1 (1 when factor <= 1),
                                    or mscale(factor, mscale) / mscale(factor, mscale_all_dim) when
                                    both of those keys are non-zero
With d = head_dim and base = rope_theta:
  correction_dim(r) = d ln(original / (2 pi r)) / (2 ln base)
  low = correction_dim(beta_fast), high = correction_dim(beta_slow), floored / ceiled when
  truncate, then low = max(low, 0) and high = min(high, d - 1) (high += 0.001 if they are equal)
  ramp[i] = clamp((i - low) / (high - low), 0, 1)                     for pair i = 0 .. d/2 - 1
  inv_freq[i] = theta^(-2i/d) * ((1 - ramp[i]) + ramp[i] / factor)
so fast pairs (i < low) keep their frequency, slow pairs (i > high) are divided by factor, and
the pairs between blend linearly. cos and sin are both multiplied by attention_factor, so every
attention logit q.k of a rotated pair scales by attention_factor^2.

gpt-oss writes {"rope_type": "yarn", "factor": 32, "beta_fast": 32, "beta_slow": 1, "truncate":
false, "original_max_position_embeddings": 4096} with rope_theta 150000 and
max_position_embeddings 131072 (= 32 * 4096). transformers 4.x took the factor from that ratio
whenever original_max_position_embeddings is given, transformers 5 from "factor" (as here): the
configs written here keep the two equal so that both readings agree.
"""

import math
import os
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rope_reference as rope  # noqa: E402

COMPUTE = np.float64


@dataclass(frozen=True)
class YarnScaling:
    factor: float
    original_max_position: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    truncate: bool = True
    attention_factor: float = 1.0
    rope_type: str = "yarn"


def mscale(scale, coefficient=1.0):
    """The YaRN attention temperature 0.1 * coefficient * ln(scale) + 1, 1 for scale <= 1."""
    return 1.0 if scale <= 1 else 0.1 * coefficient * math.log(scale) + 1.0


def read_yarn(params, max_position_embeddings=None):
    """YarnScaling from a rope_parameters / rope_scaling dict whose rope_type is "yarn"."""
    if params.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError("config: partial_rotary_factor other than 1 is not implemented")
    if params.get("original_max_position_embeddings") is None:
        raise ValueError("config: rope type 'yarn' needs original_max_position_embeddings")
    original = int(params["original_max_position_embeddings"])
    factor = params.get("factor")
    if factor is None:
        if max_position_embeddings is None:
            raise ValueError("config: rope type 'yarn' needs factor (or max_position_embeddings)")
        factor = max_position_embeddings / original
    factor = float(factor)
    if not factor > 0 or original <= 0:
        raise ValueError("config: yarn rope needs factor > 0 and original_max_position_embeddings > 0")
    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        m, m_all = params.get("mscale"), params.get("mscale_all_dim")
        attention_factor = mscale(factor, m) / mscale(factor, m_all) if m and m_all else mscale(factor)
    return YarnScaling(factor=factor, original_max_position=original,
                       beta_fast=float(params.get("beta_fast") or 32.0), beta_slow=float(params.get("beta_slow") or 1.0),
                       truncate=bool(params.get("truncate", True)), attention_factor=float(attention_factor))


def read_rope_with_yarn(raw, default_theta, default_params=None):
    """(theta, scaling) from a config.json dict like rope_reference.read_rope, accepting "yarn" too.
    default_params: the family's RoPE settings when the file states none (gpt-oss: YaRN)."""
    params = raw.get("rope_parameters")
    if params is None:
        params = raw.get("rope_scaling")
    if params is None and default_params is not None:
        raw = dict(raw, rope_parameters=default_params)
        params = default_params
    params = params or {}
    if params.get("rope_type", params.get("type")) != "yarn":
        return rope.read_rope(raw, default_theta)
    theta = float(params.get("rope_theta", raw.get("rope_theta", default_theta)))
    max_positions = raw.get("max_position_embeddings")
    return theta, read_yarn(params, None if max_positions is None else int(max_positions))


def correction_range(head_dim, theta, s):
    """(low, high): the pair indices where the ramp starts and ends (module docstring)."""
    def correction_dim(rotations):
        return head_dim * math.log(s.original_max_position / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(s.beta_fast), correction_dim(s.beta_slow)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001
    return low, high


def yarn_inverse_frequencies(head_dim, theta, s):
    """The rotation speed of each of the head_dim/2 pairs under YaRN."""
    plain = rope.plain_inverse_frequencies(head_dim, theta)
    low, high = correction_range(head_dim, theta, s)
    ramp = np.clip((np.arange(head_dim // 2, dtype=COMPUTE) - low) / (high - low), 0.0, 1.0)
    return plain * (1.0 - ramp) + (plain / s.factor) * ramp


def rope_frequencies(head_dim, theta, scaling=None):
    """(inverse frequencies, cos/sin multiplier) of any RoPE kind the reference knows."""
    if isinstance(scaling, YarnScaling):
        return yarn_inverse_frequencies(head_dim, theta, scaling), scaling.attention_factor
    # rope_reference.py's kinds, its own yarn included (whose attention factor is not 1).
    return rope.inverse_frequencies(head_dim, theta, scaling), rope.attention_factor(scaling)
