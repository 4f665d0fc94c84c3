"""The DFlash drafter in plain PyTorch, for training (docs/dflash.md §2 and §6), with the z-lab tensor
names and config keys that worker/model/dflash_drafter.cpp and drafter_config.cpp load.

Training runs many draft blocks of one sequence at once. Each anchor position p makes a block
[token_p, MASK x (B-1)] at positions p..p+B-1; its rows attend to the injected context rows of
positions < p and to every row of their own block (no mask inside the block), never to another
block. Row k predicts the token at p+k.
"""

import torch
import torch.nn as nn

from qwen3_model import Qwen3Layer, Qwen3Shape, RMSNorm, attend, layer_tensors, load_layer_tensors, rope_tables


class DFlashDrafter(nn.Module):
    def __init__(self, shape: Qwen3Shape, target_layer_ids, mask_token_id, block_size):
        super().__init__()
        self.s = shape
        self.target_layer_ids = list(target_layer_ids)
        self.mask_token_id = mask_token_id
        self.block_size = block_size
        d = shape.hidden_size
        self.fc = nn.Linear(len(self.target_layer_ids) * d, d, bias=False)
        self.hidden_norm = RMSNorm(d, shape.rms_norm_eps)
        self.layers = nn.ModuleList(Qwen3Layer(shape) for _ in range(shape.num_layers))
        self.norm = RMSNorm(d, shape.rms_norm_eps)
        std = 0.02
        nn.init.normal_(self.fc.weight, std=std)
        for layer in self.layers:
            for proj in (layer.q_proj, layer.k_proj, layer.v_proj, layer.gate_proj, layer.up_proj):
                nn.init.normal_(proj.weight, std=std)
            for proj in (layer.o_proj, layer.down_proj):
                nn.init.normal_(proj.weight, std=std / (2 * shape.num_layers) ** 0.5)

    def forward(self, features, ids, anchors, embedding):
        """features: [S, T, K*d] tapped target hidden states; ids: [S, T]; anchors: [S, A] positions
        with anchor + B <= T; embedding: the target's (frozen) table [V, d], also its tied LM head.
        Returns logits [S, A, B-1, V] of rows 1..B-1."""
        S, T, _ = features.shape
        A, B = anchors.shape[1], self.block_size
        context = self.hidden_norm(self.fc(features))
        context_cos, context_sin = rope_tables(torch.arange(T).unsqueeze(0).expand(S, T), self.s.head_dim,
                                               self.s.rope_theta)

        block_ids = torch.full((S, A, B), self.mask_token_id, dtype=torch.long)
        block_ids[:, :, 0] = torch.gather(ids, 1, anchors)
        positions = (anchors.unsqueeze(-1) + torch.arange(B)).reshape(S, A * B)
        cos, sin = rope_tables(positions, self.s.head_dim, self.s.rope_theta)
        x = embedding[block_ids.reshape(S, A * B)]

        row_anchor = anchors.repeat_interleave(B, dim=1)  # [S, A*B]
        sees_context = torch.arange(T).view(1, 1, T) < row_anchor.unsqueeze(-1)
        block_of = torch.arange(A).repeat_interleave(B)
        sees_block = (block_of.unsqueeze(1) == block_of.unsqueeze(0)).unsqueeze(0).expand(S, -1, -1)
        visible = torch.cat([sees_context, sees_block], dim=-1)

        for layer in self.layers:
            # Context rows become keys and values through this layer's own projections (and k_norm,
            # RoPE at their own positions); they skip input_layernorm, the residual and the MLP.
            context_k, context_v = layer.key_value(context, context_cos, context_sin)
            n = layer.input_layernorm(x)
            q = layer.query(n, cos, sin)
            block_k, block_v = layer.key_value(n, cos, sin)
            out = attend(q, torch.cat([context_k, block_k], dim=2), torch.cat([context_v, block_v], dim=2), visible)
            x = layer.finish(x, out)
        final = self.norm(x).view(S, A, B, -1)[:, :, 1:]
        return final @ embedding.t()

    # --- z-lab layout --------------------------------------------------------------------------

    def zlab_tensors(self):
        t = {"fc.weight": self.fc.weight, "hidden_norm.weight": self.hidden_norm.weight, "norm.weight": self.norm.weight}
        for i, layer in enumerate(self.layers):
            t.update(layer_tensors(layer, f"layers.{i}."))
        return t

    def load_zlab_tensors(self, tensors):
        self.fc.weight.data.copy_(tensors["fc.weight"])
        self.hidden_norm.weight.data.copy_(tensors["hidden_norm.weight"])
        self.norm.weight.data.copy_(tensors["norm.weight"])
        for i, layer in enumerate(self.layers):
            load_layer_tensors(layer, f"layers.{i}.", tensors)

    def zlab_config(self, target_config, num_target_layers):
        """The target's config with the drafter's keys (as make_tiny.cpp and z-lab write them)."""
        config = dict(target_config)
        config.update({
            "architectures": ["DFlashDraftModel"],
            "num_hidden_layers": self.s.num_layers,
            "max_window_layers": self.s.num_layers,
            "num_target_layers": num_target_layers,
            "block_size": self.block_size,
            "tie_word_embeddings": False,
            "dflash_config": {"mask_token_id": self.mask_token_id, "target_layer_ids": self.target_layer_ids},
        })
        return config
