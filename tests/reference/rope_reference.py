#!/usr/bin/python3
"""Rotary position embedding settings of the NumPy reference: how a config.json states them, and
the inverse frequencies they give (plain, linear and Llama 3 RoPE).

Written from the published definitions (Hugging Face transformers' modeling_rope_utils: the
"default", "linear" and "llama3" rope types), not from flashq's code:

  plain    inv_freq[i] = theta^(-2i/head_dim), i = 0 .. head_dim/2 - 1
  linear   inv_freq[i] / factor (the same as dividing every position by factor)
  llama3   per frequency, with wavelen = 2 pi / inv_freq, low_wavelen = original / low_freq_factor,
           high_wavelen = original / high_freq_factor (original: original_max_position_embeddings):
             wavelen < high_wavelen   kept                       (high frequencies: local detail)
             wavelen > low_wavelen    inv_freq / factor          (low frequencies: stretched)
             otherwise                (1 - s) * inv_freq / factor + s * inv_freq,
                                      s = (original / wavelen - low_freq_factor)
                                          / (high_freq_factor - low_freq_factor)
The cos/sin "attention factor" of both scaled kinds is 1, so nothing else changes.

Other rope types ("dynamic", "yarn", "longrope", ...) are refused by name: a reference that
silently used plain RoPE for them would agree with a wrong implementation.
"""

import math
from dataclasses import dataclass

import numpy as np

COMPUTE = np.float64


@dataclass(frozen=True)
class RopeScaling:
    rope_type: str                        # "linear" or "llama3"
    factor: float
    low_freq_factor: float = None         # llama3 only
    high_freq_factor: float = None        # llama3 only
    original_max_position: int = None     # llama3 only: original_max_position_embeddings


def read_rope(raw, default_theta=10000.0):
    """(theta, RopeScaling or None) from a config.json dict.

    transformers >= 5 writes rope_parameters {"rope_type", "rope_theta", ...}; older files write
    rope_theta at top level and an optional rope_scaling {"rope_type" or "type", "factor", ...}
    (null or type "default" meaning none). default_theta: the family's default when none is given."""
    params = raw.get("rope_parameters")
    if params is None:
        params = raw.get("rope_scaling") or {}
    rope_type = params.get("rope_type", params.get("type", "default"))
    theta = float(params.get("rope_theta", raw.get("rope_theta", default_theta)))
    if rope_type == "default":
        return theta, None

    def number(key):
        if params.get(key) is None:
            raise ValueError(f"config: rope type {rope_type!r} needs {key}")
        return float(params[key])

    if rope_type == "linear":
        scaling = RopeScaling("linear", number("factor"))
    elif rope_type == "llama3":
        scaling = RopeScaling("llama3", number("factor"), number("low_freq_factor"), number("high_freq_factor"),
                              int(number("original_max_position_embeddings")))
        if not scaling.high_freq_factor > scaling.low_freq_factor > 0:
            raise ValueError("config: llama3 rope needs 0 < low_freq_factor < high_freq_factor")
        if scaling.original_max_position <= 0:
            raise ValueError("config: llama3 rope needs original_max_position_embeddings > 0")
    else:
        raise ValueError(f"config: rope type {rope_type!r} is not implemented (default, linear, llama3 are)")
    if not scaling.factor > 0:
        raise ValueError(f"config: rope factor {scaling.factor} must be > 0")
    return theta, scaling


def plain_inverse_frequencies(head_dim, theta):
    """inv_freq[i] = theta^(-2i/head_dim), i = 0 .. head_dim/2 - 1."""
    i = np.arange(head_dim // 2, dtype=COMPUTE)
    return theta ** (-2.0 * i / head_dim)


def llama3_scaled(inv_freq, s):
    """The three wavelength regions of Llama 3 RoPE (module docstring), frequency by frequency."""
    inv_freq = np.asarray(inv_freq, dtype=COMPUTE)
    wavelen = 2.0 * math.pi / inv_freq
    low_wavelen = s.original_max_position / s.low_freq_factor
    high_wavelen = s.original_max_position / s.high_freq_factor
    smooth = (s.original_max_position / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    between = (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq
    return np.where(wavelen < high_wavelen, inv_freq, np.where(wavelen > low_wavelen, inv_freq / s.factor, between))


def inverse_frequencies(head_dim, theta, scaling=None):
    """The rotation speed of each of the head_dim/2 rotated pairs."""
    inv_freq = plain_inverse_frequencies(head_dim, theta)
    if scaling is None:
        return inv_freq
    if scaling.rope_type == "linear":
        return inv_freq / scaling.factor
    if scaling.rope_type == "llama3":
        return llama3_scaled(inv_freq, scaling)
    raise ValueError(f"rope type {scaling.rope_type!r}")
