#!/usr/bin/python3
"""Rotary position embedding settings of the NumPy reference: how a config.json states them, and
the inverse frequencies and cos/sin factor they give (plain, linear, Llama 3 and YaRN RoPE).

Written from the published definitions (Hugging Face transformers' modeling_rope_utils: the
"default", "linear", "llama3" and "yarn" rope types), not from flashq's code:

  plain    inv_freq[i] = theta^(-2i/head_dim), i = 0 .. head_dim/2 - 1
  linear   inv_freq[i] / factor (the same as dividing every position by factor)
  llama3   per frequency, with wavelen = 2 pi / inv_freq, low_wavelen = original / low_freq_factor,
           high_wavelen = original / high_freq_factor (original: original_max_position_embeddings):
             wavelen < high_wavelen   kept                       (high frequencies: local detail)
             wavelen > low_wavelen    inv_freq / factor          (low frequencies: stretched)
             otherwise                (1 - s) * inv_freq / factor + s * inv_freq,
                                      s = (original / wavelen - low_freq_factor)
                                          / (high_freq_factor - low_freq_factor)
  yarn     (_compute_yarn_parameters; gpt-oss) with d = head_dim, original =
           original_max_position_embeddings (else max_position_embeddings):
             correction(r) = d ln(original / (2 pi r)) / (2 ln theta), the pair turning r times
             low = correction(beta_fast), high = correction(beta_slow), rounded down and up unless
             truncate is false, then low = max(low, 0), high = min(high, d - 1), high += 0.001 if equal
             ramp[i] = clip((i - low) / (high - low), 0, 1)
             inv_freq[i] / factor * ramp[i] + inv_freq[i] * (1 - ramp[i])
           beta_fast and beta_slow default to 32 and 1 (also when 0), truncate to true.
The cos/sin "attention factor" is 1 for plain, linear and llama3; for yarn it is attention_factor
when given, else get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) when both are
given, else get_mscale(factor), with get_mscale(s, m) = 0.1 m ln(s) + 1 (1 for s <= 1): cos and
sin are multiplied by it (attention_factor()).

Other rope types ("dynamic", "longrope", ...) are refused by name: a reference that silently used
plain RoPE for them would agree with a wrong implementation.

Run as a program, it prints the inverse frequencies and attention factor of the settings it is
given as JSON (`--config JSON --head-dim D`), for the C++ tests to compare with.
"""

import math
from dataclasses import dataclass

import numpy as np

COMPUTE = np.float64


@dataclass(frozen=True)
class RopeScaling:
    rope_type: str                        # "linear", "llama3" or "yarn"
    factor: float
    low_freq_factor: float = None         # llama3 only
    high_freq_factor: float = None        # llama3 only
    original_max_position: int = None     # llama3, yarn: original_max_position_embeddings
    beta_fast: float = None               # yarn only
    beta_slow: float = None               # yarn only
    truncate: bool = None                 # yarn only
    attention_factor: float = None        # yarn only: what cos and sin are multiplied by


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
    elif rope_type == "yarn":
        scaling = yarn_scaling(params, raw, number("factor"))
    elif rope_type == "llama3":
        scaling = RopeScaling("llama3", number("factor"), number("low_freq_factor"), number("high_freq_factor"),
                              int(number("original_max_position_embeddings")))
        if not scaling.high_freq_factor > scaling.low_freq_factor > 0:
            raise ValueError("config: llama3 rope needs 0 < low_freq_factor < high_freq_factor")
        if scaling.original_max_position <= 0:
            raise ValueError("config: llama3 rope needs original_max_position_embeddings > 0")
    else:
        raise ValueError(f"config: rope type {rope_type!r} is not implemented (default, linear, llama3, yarn are)")
    if not scaling.factor > 0:
        raise ValueError(f"config: rope factor {scaling.factor} must be > 0")
    return theta, scaling


def yarn_scaling(params, raw, factor):
    """YaRN's settings with the published defaults (module docstring)."""
    def given(key):
        return params.get(key) not in (None, 0)  # Python's `or`: absent, null and 0 take the default

    beta_fast = float(params["beta_fast"]) if given("beta_fast") else 32.0
    beta_slow = float(params["beta_slow"]) if given("beta_slow") else 1.0
    original = params.get("original_max_position_embeddings") or raw.get("max_position_embeddings")
    if not original or int(original) <= 0:
        raise ValueError("config: yarn rope needs original_max_position_embeddings (or max_position_embeddings) > 0")
    if not beta_fast >= beta_slow > 0:
        raise ValueError("config: yarn rope needs beta_fast >= beta_slow > 0")
    truncate = params.get("truncate", True)
    if not isinstance(truncate, bool):
        raise ValueError("config: yarn rope's truncate must be true or false")

    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if params.get("attention_factor") is not None:
        attention = float(params["attention_factor"])
    elif params.get("mscale") and params.get("mscale_all_dim"):
        attention = get_mscale(factor, float(params["mscale"])) / get_mscale(factor, float(params["mscale_all_dim"]))
    else:
        attention = get_mscale(factor)
    if not attention > 0:
        raise ValueError("config: yarn rope's attention_factor must be > 0")
    return RopeScaling("yarn", factor, original_max_position=int(original), beta_fast=beta_fast, beta_slow=beta_slow,
                       truncate=truncate, attention_factor=attention)


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


def yarn_scaled(inv_freq, theta, head_dim, s):
    """YaRN's blend of kept and divided frequencies along a ramp over the pair index."""
    inv_freq = np.asarray(inv_freq, dtype=COMPUTE)

    def correction(rotations):
        return head_dim * math.log(s.original_max_position / (rotations * 2.0 * math.pi)) / (2.0 * math.log(theta))

    low, high = correction(s.beta_fast), correction(s.beta_slow)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(head_dim // 2, dtype=COMPUTE) - low) / (high - low), 0.0, 1.0)
    return inv_freq / s.factor * ramp + inv_freq * (1.0 - ramp)


def inverse_frequencies(head_dim, theta, scaling=None):
    """The rotation speed of each of the head_dim/2 rotated pairs."""
    inv_freq = plain_inverse_frequencies(head_dim, theta)
    if scaling is None:
        return inv_freq
    if scaling.rope_type == "linear":
        return inv_freq / scaling.factor
    if scaling.rope_type == "llama3":
        return llama3_scaled(inv_freq, scaling)
    if scaling.rope_type == "yarn":
        return yarn_scaled(inv_freq, theta, head_dim, scaling)
    raise ValueError(f"rope type {scaling.rope_type!r}")


def attention_factor(scaling=None):
    """What cos and sin are multiplied by: yarn's attention factor, 1 for every other kind."""
    return scaling.attention_factor if scaling is not None and scaling.rope_type == "yarn" else 1.0


def main():
    import argparse
    import json

    parser = argparse.ArgumentParser(description="inverse frequencies and cos/sin factor of a config's RoPE")
    parser.add_argument("--config", required=True, help="config.json's contents (rope_theta, rope_scaling, ...)")
    parser.add_argument("--head-dim", type=int, required=True)
    args = parser.parse_args()
    theta, scaling = read_rope(json.loads(args.config))
    print(json.dumps({"inverse_frequencies": inverse_frequencies(args.head_dim, theta, scaling).tolist(),
                      "attention_factor": attention_factor(scaling)}))


if __name__ == "__main__":
    main()
