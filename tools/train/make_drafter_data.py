#!/usr/bin/python3
"""Step 3 of the demo pair: the drafter's training data, made by the exported target itself.

Prompts are random windows of the token streams (without </s>); the target (loaded back from its
bf16 export, so the data is what the worker's model says) continues each greedily to --length
tokens in all, tapping the residual stream after each layer in --taps on the way (the KV-cached
rows are the same rows a full forward pass would compute). Writes WORK/drafter_data/{train,held_out}.pt with
    ids [N, length] int16, prompt_lengths [N], features [N, length, K*hidden] float16, taps.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_model import load_target  # noqa: E402

EOS_ID = 2


def sample_prompt(stream, length, rng):
    for _ in range(100):
        start = int(rng.integers(0, len(stream) - length))
        window = stream[start : start + length]
        if EOS_ID not in window:
            return window.astype(np.int64)
    return window.astype(np.int64)


@torch.no_grad()
def make_set(model, stream, count, length, prompt_lengths, batch, taps, rng, label):
    ids_out, prompt_out, features_out = [], [], []
    started = time.time()
    done = 0
    while done < count:
        n = min(batch, count - done)
        prompt_length = int(rng.choice(prompt_lengths))
        prompts = torch.from_numpy(np.stack([sample_prompt(stream, prompt_length, rng) for _ in range(n)]))
        continuation, features = model.generate_greedy(prompts, length - prompt_length, taps)
        ids = torch.cat([prompts, continuation], dim=1)
        # The last token never ran through the target; no anchor's context reaches it.
        features = torch.cat([features, torch.zeros_like(features[:, :1])], dim=1)
        ids_out.append(ids.to(torch.int16))
        prompt_out.append(torch.full((n,), prompt_length, dtype=torch.int32))
        features_out.append(features.to(torch.float16))
        done += n
        print(f"drafter data: {label} {done}/{count} sequences, {time.time() - started:.0f}s", flush=True)
    return {"ids": torch.cat(ids_out), "prompt_lengths": torch.cat(prompt_out), "features": torch.cat(features_out),
            "taps": list(taps)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True)
    parser.add_argument("--target", required=True, help="exported target directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sequences", type=int, default=768)
    parser.add_argument("--held-out-sequences", type=int, default=64)
    parser.add_argument("--length", type=int, default=256, help="prompt + continuation tokens")
    parser.add_argument("--prompt-lengths", default="48,96,144")
    parser.add_argument("--taps", default="", help="target layers to tap (default: 1, middle, last)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    model, config = load_target(args.target)
    model.eval()
    layers = config["num_hidden_layers"]
    taps = [int(t) for t in args.taps.split(",")] if args.taps else sorted({1, layers // 2, layers - 1})
    prompt_lengths = [int(p) for p in args.prompt_lengths.split(",")]
    print(f"drafter data: taps {taps}, length {args.length}, prompts of {prompt_lengths} tokens", flush=True)

    out_dir = os.path.join(args.work, "drafter_data")
    os.makedirs(out_dir, exist_ok=True)
    for label, stream_name, count in (("held_out", "held_out", args.held_out_sequences),
                                      ("train", "train", args.sequences)):
        stream = np.load(os.path.join(args.work, "tokens", f"{stream_name}.npy"))
        data = make_set(model, stream, count, args.length, prompt_lengths, args.batch, taps, rng, label)
        torch.save(data, os.path.join(out_dir, f"{label}.pt"))


if __name__ == "__main__":
    main()
