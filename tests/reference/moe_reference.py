#!/usr/bin/python3
"""Mixture-of-experts routing of the NumPy reference: which experts each row goes to and with what
weight, for both families (written from transformers' Qwen3MoeSparseMoeBlock / Qwen2MoeTopKRouter
and GptOssTopKRouter), and the record of those choices that the command lines report.

  Qwen3-MoE  p = softmax(router logits) over all E experts (float32 in HF, float64 here), the k
             largest p, divided by their sum when norm_topk_prob (else used as they are).
  gpt-oss    the k largest router logits (bias included), then softmax over those k only.
Ties go to the lowest expert id (a stable descending sort); random weights never tie, and the
record's min_margin (gap between the k-th and the (k+1)-th score of a row, smallest over all rows
and layers) says how far a routing is from a tie: a comparison whose own arithmetic differs by
more than that margin may legitimately pick another expert.
"""

from dataclasses import dataclass, field

import numpy as np

COMPUTE = np.float64


def top_k(scores, k):
    """(indices [T, k] in descending score order, lowest id first on ties; the k-th minus the
    (k+1)-th score of each row, +inf when k covers every expert)."""
    order = np.argsort(-scores, axis=-1, kind="stable")
    chosen = order[:, :k]
    kth = np.take_along_axis(scores, chosen[:, -1:], axis=-1)[:, 0]
    if k < scores.shape[-1]:
        next_best = np.take_along_axis(scores, order[:, k:k + 1], axis=-1)[:, 0]
        margin = kth - next_best
    else:
        margin = np.full(scores.shape[0], np.inf)
    return chosen, margin


def softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def route_softmax_then_top_k(router_logits, k, normalize):
    """Qwen3-MoE: (experts [T, k], weights [T, k], margins [T]) with margins between probabilities."""
    probabilities = softmax(router_logits)
    experts, margin = top_k(probabilities, k)
    weights = np.take_along_axis(probabilities, experts, axis=-1)
    if normalize:
        weights = weights / weights.sum(axis=-1, keepdims=True)
    return experts, weights, margin


def route_top_k_then_softmax(router_logits, k):
    """gpt-oss: (experts [T, k], weights [T, k], margins [T]) with margins between logits."""
    experts, margin = top_k(router_logits, k)
    weights = softmax(np.take_along_axis(router_logits, experts, axis=-1))
    return experts, weights, margin


def mix_experts(x, experts, weights, expert_fn):
    """sum_j weights[t, j] * expert_fn(experts[t, j], rows) over the k choices of each row t; each
    expert runs once on all the rows routed to it (rows in ascending order)."""
    out = np.zeros_like(x)
    for e in np.unique(experts):
        rows, slot = np.nonzero(experts == e)
        out[rows] += weights[rows, slot][:, None] * expert_fn(int(e), x[rows])
    return out


@dataclass
class RoutingRecord:
    """Per sparse layer (in layer order): its id and the experts [T, k] each row went to."""
    layers: list = field(default_factory=list)
    experts: list = field(default_factory=list)
    min_margin: float = float("inf")

    def add(self, layer_id, experts, margin):
        self.layers.append(layer_id)
        self.experts.append(experts)
        if margin.size:
            self.min_margin = min(self.min_margin, float(np.min(margin)))

    def as_json(self):
        """{"layers", "experts": [layer][row][k] in descending weight order, "min_margin"}."""
        return {"layers": list(self.layers), "experts": [e.tolist() for e in self.experts],
                "min_margin": None if self.min_margin == float("inf") else self.min_margin}


def forward_with_routing(model, tokens, decoder_layer):
    """The causal forward of a mixture-of-experts target over tokens at positions 0..T-1, its
    layers run by decoder_layer(layer, h, positions, config, index, record): (logits [T, vocab],
    hidden_states with hidden_states[i + 1] the residual after layer i, the RoutingRecord)."""
    import qwen3_reference as qwen3  # the families' shared blocks: embedding, norm, projection

    c = model.config
    h = qwen3.embed(model, tokens)
    positions = np.arange(h.shape[0])
    hidden_states, record = [h], RoutingRecord()
    for i, layer in enumerate(model.layers):
        h = decoder_layer(layer, h, positions, c, i, record)
        hidden_states.append(h)
    logits = qwen3.linear(qwen3.rms_norm(h, model.norm, c.rms_norm_eps), model.lm_head)
    return logits, hidden_states, record

