#!/usr/bin/python3
"""`make bench`: runs flashq-bench on the demo pair and the broker, and writes the report.

Writes docs/bench/report.md (tables, among them tau and speedup per block size, the machine and
the commit) and PNG plots beside it:
  throughput.png  decode tokens/s against concurrency for ar (plain), dflash and auto
  pareto.png      tokens/s per user against total tokens/s (throughput at a given interactivity)
  tau.png         tau per prompt set (held-out code, code seen in training, random tokens)
  broker.png      broker jobs/s and token events/s, in memory and with Redis
Every figure is measured in this run; modes are compared side by side within one benchmark
process (flashq-bench alternates them), as docs/perf.md asks of this noisy, shared machine.
"""

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
import corpus  # noqa: E402  (the held-out module list of the demo pair)


def run_json(command):
    print("+ " + " ".join(command), flush=True)
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def code_prompts(files, count, lines_per_prompt, seed):
    """Prompts cut from Python sources at a `def` line: the start of a function to complete."""
    rng = random.Random(seed)
    prompts = []
    for relative in files:
        lines = corpus.read_source(relative).split("\n")
        starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("def ")]
        for start in starts[1:4]:
            prompts.append("\n".join(lines[start:start + lines_per_prompt]) + "\n")
    rng.shuffle(prompts)
    return prompts[:count]


def write_jsonl(path, prompts):
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps(p) + "\n")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def machine():
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def commit():
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    return head.strip() + (" (with uncommitted changes)" if dirty else "")


def engine(bench, model, drafter, modes, concurrency, prompts, args, extra=(), block_size=None):
    """flashq-bench engine on a prompts file, or on random 48-token prompts when `prompts` is None."""
    source = ["--prompts", prompts] if prompts else ["--prompt-tokens", "48"]
    block_size = args.block_size if block_size is None else block_size
    return run_json([bench, "engine", "--model", model, "--drafter", drafter, "--mode", modes,
                     "--concurrency", ",".join(str(c) for c in concurrency), *source,
                     "--decode-tokens", str(args.decode_tokens), "--block-size", str(block_size),
                     "--repeats", str(args.repeats), "--json", *extra])


def broker(bench, args):
    redis_server = shutil.which("redis-server")
    if not redis_server:
        return run_json([bench, "broker", "--json", "--events", str(args.events)])
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen([redis_server, "--port", str(port), "--save", "", "--appendonly", "no",
                                   "--dir", data], stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            return run_json([bench, "broker", "--redis", f"redis://127.0.0.1:{port}", "--json",
                             "--events", str(args.events)])
        finally:
            server.terminate()
            server.wait()


def plot(report, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def save(fig, ax, name, title, xlabel, ylabel):
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, name), dpi=110)

    runs = report["sweep"]["runs"]
    modes = sorted({r["mode"] for r in runs}, key=["ar", "dflash", "auto"].index)
    label = {"ar": "off (plain decoding)", "dflash": "dflash", "auto": "auto"}

    fig, ax = plt.subplots(figsize=(6, 4))
    for mode in modes:
        points = sorted((r["concurrency"], r["decode_tokens_per_s"]) for r in runs if r["mode"] == mode)
        ax.plot([c for c, _ in points], [t for _, t in points], marker="o", label=label[mode])
    ax.set_xscale("log", base=2)
    save(fig, ax, "throughput.png", "Demo pair on the CPU engine", "concurrency (sequences decoding at once)",
         "decode tokens/s (all sequences)")

    fig, ax = plt.subplots(figsize=(6, 4))
    for mode in modes:
        points = sorted((r["decode_tokens_per_s"], r["decode_tokens_per_s"] / r["concurrency"], r["concurrency"])
                        for r in runs if r["mode"] == mode)
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label[mode])
        for total, per_user, c in points:
            ax.annotate(str(c), (total, per_user), textcoords="offset points", xytext=(4, 4), fontsize=7)
    save(fig, ax, "pareto.png", "Latency-throughput (labels: concurrency)", "total tokens/s", "tokens/s per user")

    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = list(report["tau"].keys())
    taus = [report["tau"][n]["tau"] for n in names]
    ax.bar(names, taus, color="tab:green")
    for i, t in enumerate(taus):
        ax.text(i, t, f"{t:.2f}", ha="center", va="bottom")
    ax.set_ylabel(f"tau (tokens per target pass, block {report['block_size']})")
    ax.set_title("Acceptance per prompt set")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "tau.png"), dpi=110)

    b = report["broker"]
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.5))
    for ax, key, title in ((axes[0], "submissions_per_s", "jobs/s"), (axes[1], "token_events_per_s", "token events/s")):
        values = [b[key]] + ([b["redis"][key]] if "redis" in b else [])
        ax.bar(["in memory", "with Redis"][:len(values)], values, color=["tab:blue", "tab:red"][:len(values)])
        ax.set_title(title)
    fig.suptitle("Broker, synthetic peers")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "broker.png"), dpi=110)


def markdown(report):
    lines = [
        "# Benchmark report (generated by `make bench`)",
        "",
        f"Machine: {report['machine']}. Commit: {report['commit']}. Date: {report['date']}.",
        f"Model: `{report['model']}` with drafter `{report['drafter']}`, block {report['block_size']}, "
        f"temperature 0, {report['decode_tokens']} tokens per sequence, prompts: held-out code "
        f"({report['prompt_count']} prompts from the modules the pair never saw). Each figure is the median "
        f"of {report['repeats']} runs; speedups are medians of ratios of runs taken side by side.",
        "",
        "## Decode throughput against concurrency",
        "",
        "![throughput](throughput.png) ![pareto](pareto.png)",
        "",
        "| mode | concurrency | decode tok/s | tok/s per user | tau | speedup over off | efficiency (speedup / tau) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(report["sweep"]["runs"], key=lambda r: (r["concurrency"], r["mode"])):
        speedup = f"{r['speedup']:.2f}" if "speedup" in r else ""
        efficiency = f"{r['efficiency']:.2f}" if "efficiency" in r else ""
        lines.append(f"| {r['mode']} | {r['concurrency']} | {r['decode_tokens_per_s']:.0f} | "
                     f"{r['decode_tokens_per_s'] / r['concurrency']:.0f} | {r['tau']:.2f} | {speedup} | {efficiency} |")
    lines += ["", "## Block size (held-out code, concurrency 1)", "",
              "| block | tau | dflash speedup over off |", "|---|---|---|"]
    for block, t in sorted(report["blocks"].items(), key=lambda item: int(item[0])):
        lines.append(f"| {block} | {t['tau']:.2f} | {t['speedup']:.2f} |")
    lines += ["", "## Tau per prompt set", "", "![tau](tau.png)", "",
              "| prompt set | tau | dflash speedup over off (concurrency 1) |", "|---|---|---|"]
    for name, t in report["tau"].items():
        lines.append(f"| {name} | {t['tau']:.2f} | {t['speedup']:.2f} |")
    passes = report["sweep"].get("passes", {})
    if passes:
        lines += ["", "## Cost of one pass against one decode step (demo target)", "", "| pass | cost |", "|---|---|"]
        for key, value in sorted(passes.items()):
            if key.endswith("_over_decode"):
                lines.append(f"| {key.replace('_over_decode', '')} | {value:.2f}x |")
    b = report["broker"]
    lines += ["", "## Broker", "", "![broker](broker.png)", "", "| figure | in memory | with Redis | ratio |",
              "|---|---|---|---|"]
    for key, name in (("submissions_per_s", "jobs/s"), ("token_events_per_s", "token events/s")):
        redis = b.get("redis", {})
        with_redis = f"{redis[key]:.0f}" if key in redis else "(no redis-server)"
        ratio = f"{redis[key] / b[key]:.2f}" if key in redis else ""
        lines.append(f"| {name} | {b[key]:.0f} | {with_redis} | {ratio} |")
    lines += ["", "Raw figures: `report.json` beside this file.", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--model", default=os.path.join(ROOT, "models/demo/target"))
    parser.add_argument("--drafter", default=os.path.join(ROOT, "models/demo/drafter"))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs/bench"))
    parser.add_argument("--concurrency", default="1,2,4,8,16")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--block-sizes", default="2,4,8,16", help="block sizes of the block-size table")
    parser.add_argument("--decode-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=32, help="prompts per prompt set")
    parser.add_argument("--events", type=int, default=100000, help="token events of the broker benchmark")
    args = parser.parse_args()

    bench = os.path.join(args.build, "bin", "flashq-bench")
    for path in (args.model, args.drafter):
        if not os.path.exists(os.path.join(path, "model.safetensors")):
            sys.exit(f"bench_report: {path} has no model.safetensors (train the demo pair: tools/train/train_demo_pair)")
    os.makedirs(args.out, exist_ok=True)
    train_files, held_out_files = corpus.source_files()
    with tempfile.TemporaryDirectory() as scratch:
        sets = {
            "held-out code": code_prompts(held_out_files, args.prompts, 12, 1),
            "training code": code_prompts(train_files, args.prompts, 12, 2),
        }
        paths = {}
        for name, prompts in sets.items():
            paths[name] = os.path.join(scratch, name.replace(" ", "_") + ".jsonl")
            write_jsonl(paths[name], prompts)
        concurrency = [int(c) for c in args.concurrency.split(",")]
        sweep = engine(bench, args.model, args.drafter, "ar,dflash,auto", concurrency, paths["held-out code"], args,
                       ("--passes",))
        def dflash_alone(path, block_size=None):
            """tau and speedup over plain of dflash at concurrency 1."""
            runs = engine(bench, args.model, args.drafter, "ar,dflash", [1], path, args, block_size=block_size)["runs"]
            dflash = next(r for r in runs if r["mode"] == "dflash")
            return {"tau": dflash["tau"], "speedup": dflash["speedup"]}

        blocks = {b: dflash_alone(paths["held-out code"], int(b)) for b in args.block_sizes.split(",")}
        tau = {name: dflash_alone(path) for name, path in list(paths.items()) + [("random tokens", None)]}
    report = {
        "machine": machine(), "commit": commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "model": os.path.relpath(args.model, ROOT), "drafter": os.path.relpath(args.drafter, ROOT),
        "block_size": args.block_size, "decode_tokens": args.decode_tokens, "repeats": args.repeats,
        "prompt_count": len(sets["held-out code"]), "sweep": sweep, "blocks": blocks, "tau": tau,
        "broker": broker(bench, args),
    }
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    plot(report, args.out)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(markdown(report))
    print(f"bench_report: wrote {os.path.relpath(args.out, ROOT)}/report.md and its plots")


if __name__ == "__main__":
    main()
