#!/usr/bin/python3
"""Step 4 of the demo pair: trains the DFlash drafter on the target's own greedy continuations
(make_drafter_data.py) with the loss of docs/dflash.md §6, and exports it in the z-lab layout:
    OUT/config.json, OUT/model.safetensors (bf16)

Anchors are drawn in the generated part of each sequence (the first draft of a request anchors at
the first generated token, position = prompt length). Row k of a block is weighted
exp(-(k-1)/gamma). The target's embedding (also its tied LM head) is frozen and shared.

Progress reports the held-out acceptance length the engine would see for these blocks:
tau = 1 + the number of leading rows whose argmax equals the target's token.
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dflash_drafter import DFlashDrafter  # noqa: E402
from qwen3_model import load_target, shape_from_config  # noqa: E402
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402


def draw_anchors(prompt_lengths, length, count, block, generator):
    """[S, count] anchor positions in [prompt_length, length - block], without repeats when possible."""
    rows = []
    for p in prompt_lengths.tolist():
        choices = torch.arange(p, length - block + 1)
        order = torch.randperm(len(choices), generator=generator)
        if len(order) < count:
            order = torch.cat([order, torch.randint(0, len(choices), (count - len(order),), generator=generator)])
        rows.append(choices[order[:count]])
    return torch.stack(rows)


def block_loss(logits, labels, weights):
    """Weighted cross-entropy over rows 1..B-1, normalised by the weights' sum; also the leading
    run of correct rows per block (the acceptance this block would get)."""
    V = logits.shape[-1]
    ce = F.cross_entropy(logits.reshape(-1, V).float(), labels.reshape(-1), reduction="none").view(labels.shape)
    loss = (ce * weights).sum() / (weights.sum() * labels.shape[0] * labels.shape[1])
    correct = logits.argmax(-1) == labels
    accepted = correct.long().cumprod(dim=-1).sum(-1)
    return loss, accepted, correct


def labels_for(ids, anchors, block):
    offsets = torch.arange(1, block)
    return torch.gather(ids, 1, (anchors.unsqueeze(-1) + offsets).reshape(ids.shape[0], -1)).view(
        ids.shape[0], anchors.shape[1], block - 1)


@torch.no_grad()
def evaluate(drafter, data, embedding, block, weights, batch=8):
    """Held-out loss, tau and per-row accuracy over every anchor of the held-out sequences."""
    drafter.eval()
    ids, features, prompts = data["ids"].long(), data["features"], data["prompt_lengths"]
    length = ids.shape[1]
    loss_sum, blocks, accepted_sum, correct_sum = 0.0, 0, 0, torch.zeros(block - 1)
    for s in range(0, len(ids), batch):
        for p_start in range(0, length, 64):
            # Every anchor of these sequences, a slice of positions at a time.
            anchors_list = []
            for p in prompts[s : s + batch].tolist():
                first, end = max(p, p_start), min(p_start + 64, length - block + 1)
                anchors_list.append(torch.arange(first, max(first, end)))
            n = min(len(a) for a in anchors_list)
            if n == 0:
                continue
            anchors = torch.stack([a[:n] for a in anchors_list])
            logits = drafter(features[s : s + batch].float(), ids[s : s + batch], anchors, embedding)
            labels = labels_for(ids[s : s + batch], anchors, block)
            loss, accepted, correct = block_loss(logits, labels, weights)
            count = anchors.numel()
            loss_sum += loss.item() * count
            blocks += count
            accepted_sum += accepted.sum().item()
            correct_sum += correct.float().sum(dim=(0, 1))
    drafter.train()
    return loss_sum / blocks, 1 + accepted_sum / blocks, (correct_sum / blocks).tolist()


def learning_rate(progress, peak, warmup_fraction=0.03):
    if progress < warmup_fraction:
        return peak * progress / warmup_fraction
    p = (progress - warmup_fraction) / (1 - warmup_fraction)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(p, 1.0))))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True)
    parser.add_argument("--target", required=True, help="exported target directory")
    parser.add_argument("--out", required=True, help="drafter directory to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, default=22.0)
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--gamma", type=float, default=7.0, help="row weight exp(-(k-1)/gamma)")
    parser.add_argument("--batch", type=int, default=8, help="sequences per step")
    parser.add_argument("--anchors", type=int, default=32, help="blocks per sequence per step")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--init", default="", help="continue from this exported drafter directory")
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    target, target_config = load_target(args.target)
    embedding = target.embed_tokens.weight.detach()
    data_dir = os.path.join(args.work, "drafter_data")
    train = torch.load(os.path.join(data_dir, "train.pt"))
    held_out = torch.load(os.path.join(data_dir, "held_out.pt"))
    taps = train["taps"]
    B = args.block_size

    shape = shape_from_config(target_config)
    shape.num_layers = args.layers
    mask_token_id = target_config["vocab_size"] - 1  # the spare row beyond the tokenizer
    drafter = DFlashDrafter(shape, taps, mask_token_id, B)
    # The drafter's final norm feeds the target's LM head: start from the target's own final norm,
    # whose scale that head was trained with (with ones the first logits are far too large).
    drafter.norm.weight.data.copy_(target.norm.weight.detach())
    if args.init:
        drafter.load_zlab_tensors(read_safetensors(os.path.join(args.init, "model.safetensors")))
        print(f"drafter: continuing from {args.init}", flush=True)
    params = sum(p.numel() for p in drafter.parameters())
    print(f"drafter: {params / 1e6:.2f}M parameters, {args.layers} layers, taps {taps}, block {B}, "
          f"mask {mask_token_id}; {len(train['ids'])} training sequences", flush=True)

    weights = torch.exp(-torch.arange(B - 1, dtype=torch.float32) / args.gamma)
    optimizer = torch.optim.AdamW(drafter.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    ids_all, features_all, prompts_all = train["ids"].long(), train["features"], train["prompt_lengths"]
    length = ids_all.shape[1]
    started, budget_s = time.time(), args.minutes * 60
    step, smooth, smooth_tau = 0, None, None
    history = []
    while True:
        progress = max(step / args.steps, (time.time() - started) / budget_s)
        if progress >= 1.0:
            break
        lr = learning_rate(progress, args.lr)
        for group in optimizer.param_groups:
            group["lr"] = lr
        rows = torch.randint(0, len(ids_all), (args.batch,), generator=generator)
        ids = ids_all[rows]
        anchors = draw_anchors(prompts_all[rows], length, args.anchors, B, generator)
        logits = drafter(features_all[rows].float(), ids, anchors, embedding)
        loss, accepted, _ = block_loss(logits, labels_for(ids, anchors, B), weights)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        optimizer.step()
        step += 1
        tau = 1 + accepted.float().mean().item()
        smooth = loss.item() if smooth is None else 0.95 * smooth + 0.05 * loss.item()
        smooth_tau = tau if smooth_tau is None else 0.95 * smooth_tau + 0.05 * tau
        if step % 10 == 0 or step == 1:
            print(f"drafter: step {step} loss {smooth:.3f} tau {smooth_tau:.2f} lr {lr:.2e} "
                  f"{time.time() - started:.0f}s", flush=True)
        if step % args.eval_every == 0:
            h_loss, h_tau, _ = evaluate(drafter, held_out, embedding, B, weights)
            history.append({"step": step, "train_loss": round(smooth, 4), "held_out_loss": round(h_loss, 4),
                            "held_out_tau": round(h_tau, 3)})
            print(f"drafter: step {step} held-out loss {h_loss:.3f} tau {h_tau:.2f}", flush=True)

    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "model.safetensors"), drafter.zlab_tensors(), torch.bfloat16)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(drafter.zlab_config(target_config, target_config["num_hidden_layers"]), f, indent=2)
        f.write("\n")
    h_loss, h_tau, row_accuracy = evaluate(drafter, held_out, embedding, B, weights)
    print(f"drafter: done, {step} steps, train loss {smooth:.3f}, held-out loss {h_loss:.3f}, held-out tau {h_tau:.2f}",
          flush=True)
    print("drafter: held-out accuracy by row " + " ".join(f"{a:.2f}" for a in row_accuracy), flush=True)

    summary = {"parameters": params, "steps": step, "seconds": round(time.time() - started),
               "final_train_loss": round(smooth, 4), "final_held_out_loss": round(h_loss, 4),
               "final_held_out_tau": round(h_tau, 3), "held_out_row_accuracy": [round(a, 3) for a in row_accuracy],
               "seed": args.seed, "args": vars(args), "history": history}
    name = os.path.basename(os.path.normpath(args.out))
    with open(os.path.join(args.work, f"summary_{name}.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(f"drafter: exported to {args.out}", flush=True)


if __name__ == "__main__":
    main()
