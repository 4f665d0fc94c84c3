#!/usr/bin/python3
"""Step 5 of the demo pair: measures the exported pair with our own C++ binaries.

Held-out prompts: from each held-out module (corpus.HELD_OUT) of some size, the text starting at
its third top-level or method `def` line, whole lines until at least --prompt-tokens tokens.
For each prompt, `flashq generate` at temperature 0 with --spec off and with --spec dflash
(block --block-size) must give the same tokens; tau is the engine's acceptance length, and the
speedup is the ratio of decode throughput (tokens after the first, over the seconds after the
first token), each prompt's time the median of --repeats runs, summed over prompts.
Also checks that the PyTorch model of the exported target chooses the same greedy tokens as the
C++ engine (the drafter was trained on the former), and runs `flashq-bench engine` (random
prompts) for its own ar/dflash figures. Prints a summary and writes it as JSON to --report.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

MIN_FILE_CHARS = 4000


def held_out_prompts(sp, min_tokens):
    prompts = []
    _, files = corpus.source_files()
    for relative in files:
        text = corpus.read_source(relative)
        if len(text) < MIN_FILE_CHARS:
            continue
        lines = text.split("\n")
        defs = [i for i, line in enumerate(lines) if line.lstrip().startswith("def ")]
        if len(defs) < 3:
            continue
        prompt = ""
        for line in lines[defs[2]:]:
            prompt += line + "\n"
            if len(sp.encode(prompt)) >= min_tokens:
                break
        prompts.append((relative, prompt))
    return prompts


def generate(args, prompt, spec):
    command = [args.flashq, "generate", "--model", args.target, "--drafter", args.drafter, "--spec", spec,
               "--block-size", str(args.block_size), "--prompt", prompt, "--max-tokens", str(args.max_tokens),
               "--ignore-eos", "--temperature", "0", "--device", args.device, "--json"]
    run = subprocess.run(command, capture_output=True, text=True, check=True)
    out = json.loads(run.stdout.strip().splitlines()[-1])
    stats = out["stats"]
    tokens_after_first = stats["completion_tokens"] - 1
    seconds = tokens_after_first / stats["decode_tokens_per_s"] if stats["decode_tokens_per_s"] > 0 else 0.0
    return out["tokens"], stats, seconds


def python_greedy(target_dir, prompt_ids, steps):
    import torch

    from qwen3_model import load_target

    torch.set_num_threads(1)
    model, _ = load_target(target_dir)
    model.eval()
    tokens, _ = model.generate_greedy(torch.tensor([prompt_ids]), steps)
    return tokens[0].tolist()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", required=True)
    parser.add_argument("--drafter", required=True)
    parser.add_argument("--bin", default="build/bin", help="directory of flashq and flashq-bench")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=96)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--report", default="", help="write the summary here as JSON")
    args = parser.parse_args()
    args.flashq = os.path.join(args.bin, "flashq")

    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.target, "tokenizer.model"))
    prompts = held_out_prompts(sp, args.prompt_tokens)
    rows = []
    for relative, prompt in prompts:
        seconds = {"off": [], "dflash": []}
        tokens, stats = {}, {}
        for _ in range(args.repeats):
            for spec in ("off", "dflash"):  # interleaved, so a busy machine slows both alike
                tokens[spec], stats[spec], s = generate(args, prompt, spec)
                seconds[spec].append(s)
        reference = python_greedy(args.target, sp.encode(prompt), args.max_tokens)
        agree = next((i for i, (a, b) in enumerate(zip(reference, tokens["off"])) if a != b), len(reference))
        row = {
            "module": relative,
            "prompt_tokens": stats["off"]["prompt_tokens"],
            "tokens": len(tokens["off"]),
            "lossless": tokens["off"] == tokens["dflash"],
            "tau": round(stats["dflash"]["tau"], 3),
            "off_s": statistics.median(seconds["off"]),
            "dflash_s": statistics.median(seconds["dflash"]),
            "pytorch_agrees_for": agree,
        }
        row["speedup"] = round(row["off_s"] / row["dflash_s"], 3) if row["dflash_s"] > 0 else 0.0
        rows.append(row)
        print(f"eval: {relative:18s} prompt {row['prompt_tokens']:3d} tokens, lossless {row['lossless']}, "
              f"tau {row['tau']:.2f}, speedup {row['speedup']:.2f}x, "
              f"pytorch == C++ for {agree}/{len(reference)} tokens", flush=True)

    tokens_after_first = sum(r["tokens"] - 1 for r in rows)
    off_s, dflash_s = sum(r["off_s"] for r in rows), sum(r["dflash_s"] for r in rows)
    summary = {
        "prompts": len(rows),
        "all_lossless": all(r["lossless"] for r in rows),
        "tau_mean": round(statistics.mean(r["tau"] for r in rows), 3),
        "off_tokens_per_s": round(tokens_after_first / off_s, 1),
        "dflash_tokens_per_s": round(tokens_after_first / dflash_s, 1),
        "speedup": round(off_s / dflash_s, 3),
        "rows": rows,
    }
    print(f"eval: held-out prompts {len(rows)}, lossless {summary['all_lossless']}, mean tau {summary['tau_mean']}, "
          f"decode {summary['off_tokens_per_s']} -> {summary['dflash_tokens_per_s']} tok/s, "
          f"speedup {summary['speedup']}x", flush=True)

    bench = [os.path.join(args.bin, "flashq-bench"), "engine", "--model", args.target, "--drafter", args.drafter,
             "--mode", "ar,dflash", "--concurrency", "1", "--block-size", str(args.block_size),
             "--prompt-tokens", str(args.prompt_tokens), "--decode-tokens", str(args.max_tokens),
             "--device", args.device, "--json"]
    run = subprocess.run(bench, capture_output=True, text=True, check=True)
    result = json.loads(run.stdout.strip().splitlines()[-1])
    summary["bench_command"] = " ".join(bench)
    summary["bench"] = {r["mode"]: {k: r.get(k) for k in ("tau", "decode_tokens_per_s", "speedup")}
                        for r in result["runs"]}
    print(f"eval: flashq-bench engine (random prompts): {json.dumps(summary['bench'])}", flush=True)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
