#!/usr/bin/python3
"""Step 2 of the demo pair: trains the target, a small Qwen3 model, on the standard-library tokens
written by train_tokenizer.py, and exports it in the Hugging Face layout our worker loads:
    OUT/config.json, OUT/generation_config.json, OUT/model.safetensors (bf16), OUT/tokenizer.model

Next-token cross-entropy on random windows of the training stream; AdamW, linear warm-up, cosine
decay to 10% over the run, whose length is --steps or --minutes, whichever ends first.
"""

import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_model import Qwen3Model, Qwen3Shape  # noqa: E402
from safetensors_io import write_safetensors  # noqa: E402

BOS_ID, EOS_ID = 1, 2  # fixed by train_tokenizer.py's spm_train flags


def sample_windows(stream, batch, length, generator):
    starts = torch.randint(0, len(stream) - length - 1, (batch,), generator=generator)
    rows = np.stack([stream[s : s + length + 1] for s in starts.tolist()]).astype(np.int64)
    rows = torch.from_numpy(rows)
    return rows[:, :-1], rows[:, 1:]


@torch.no_grad()
def held_out_loss(model, stream, length, batches=8, batch=8):
    """Mean loss over fixed, evenly spread windows of the held-out stream (same windows every time)."""
    model.eval()
    count = batches * batch
    starts = np.linspace(0, len(stream) - length - 2, count).astype(np.int64)
    total = 0.0
    for b in range(batches):
        rows = np.stack([stream[s : s + length + 1] for s in starts[b * batch : (b + 1) * batch]]).astype(np.int64)
        rows = torch.from_numpy(rows)
        logits, _ = model(rows[:, :-1])
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1)).item()
    model.train()
    return total / batches


def learning_rate(progress, peak, warmup_fraction=0.03):
    if progress < warmup_fraction:
        return peak * progress / warmup_fraction
    p = (progress - warmup_fraction) / (1 - warmup_fraction)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(p, 1.0))))


def export(model, work, out):
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), model.hf_tensors(), torch.bfloat16)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(model.hf_config(BOS_ID, EOS_ID, "bfloat16"), f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "do_sample": False}, f, indent=2)
        f.write("\n")
    shutil.copy(os.path.join(work, "tokenizer", "tokenizer.model"), os.path.join(out, "tokenizer.model"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="work directory of train_tokenizer.py")
    parser.add_argument("--out", required=True, help="model directory to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, default=38.0)
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--inter", type=int, default=768)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--context", type=int, default=512, help="max_position_embeddings")
    parser.add_argument("--seq", type=int, default=256, help="training window length")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    train = np.load(os.path.join(args.work, "tokens", "train.npy"))
    held_out = np.load(os.path.join(args.work, "tokens", "held_out.npy"))
    import sentencepiece as spm

    vocab = spm.SentencePieceProcessor(model_file=os.path.join(args.work, "tokenizer", "tokenizer.model")).get_piece_size()
    # One spare embedding row beyond the tokenizer, as Qwen pads its table: the drafter's MASK.
    shape = Qwen3Shape(vocab_size=vocab + 1, hidden_size=args.hidden, intermediate_size=args.inter,
                       num_layers=args.layers, num_heads=args.heads, num_kv_heads=args.kv_heads,
                       head_dim=args.head_dim, max_position=args.context)
    model = Qwen3Model(shape)
    params = sum(p.numel() for p in model.parameters())
    print(f"target: {params / 1e6:.2f}M parameters, {shape}", flush=True)
    print(f"target: {len(train)} training tokens, {len(held_out)} held-out tokens", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    started = time.time()
    budget_s = args.minutes * 60
    step, tokens_seen, smooth = 0, 0, None
    history = []
    while True:
        elapsed = time.time() - started
        progress = max(step / args.steps, elapsed / budget_s)
        if progress >= 1.0:
            break
        lr = learning_rate(progress, args.lr)
        for group in optimizer.param_groups:
            group["lr"] = lr
        inputs, labels = sample_windows(train, args.batch, args.seq, generator)
        logits, _ = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        tokens_seen += inputs.numel()
        smooth = loss.item() if smooth is None else 0.95 * smooth + 0.05 * loss.item()
        if step % 10 == 0 or step == 1:
            print(f"target: step {step} train loss {smooth:.3f} lr {lr:.2e} "
                  f"{tokens_seen / (time.time() - started):.0f} tok/s {time.time() - started:.0f}s", flush=True)
        if step % args.eval_every == 0:
            h = held_out_loss(model, held_out, args.seq)
            history.append({"step": step, "train_loss": round(smooth, 4), "held_out_loss": round(h, 4)})
            print(f"target: step {step} held-out loss {h:.3f}", flush=True)

    final_held_out = held_out_loss(model, held_out, args.seq)
    summary = {"parameters": params, "steps": step, "tokens": tokens_seen, "seconds": round(time.time() - started),
               "final_train_loss": round(smooth, 4), "final_held_out_loss": round(final_held_out, 4),
               "seed": args.seed, "args": vars(args), "history": history}
    print(f"target: done, {step} steps, {tokens_seen} tokens, train loss {smooth:.3f}, "
          f"held-out loss {final_held_out:.3f}", flush=True)
    export(model, args.work, args.out)
    with open(os.path.join(args.work, "summary_target.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(f"target: exported to {args.out}", flush=True)


if __name__ == "__main__":
    main()
