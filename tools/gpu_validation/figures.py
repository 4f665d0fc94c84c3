#!/usr/bin/env python3
"""Summaries of the GPU validation figures (docs/gpu-validation.md): run_figures hands this the raw output of
one subcommand (flashq-bench JSON lines, gtest JSON reports, hf_baseline.py lines) and appends the
one JSON line it prints to figures.jsonl; `table` turns one or more figures.jsonl files into the
Markdown tables of docs/perf.md.

    figures.py record  [--merge JSON] [--set KEY=VALUE ...]      a line from the fields alone
    figures.py gtest   --report NAME=FILE ... [--require-run]     parity: passed, failed, skipped
    figures.py kernels --log FILE                                 copy bandwidth, matmul GB/s
    figures.py engine  --bench FILE --floor FILE --model DIR      batch-1 decode against the floor
    figures.py sweep   --bench FILE ... [--expect 1,4,16,32]      throughput against concurrency
    figures.py hf      --ours FILE --hf FILE                      ours against transformers
    figures.py table   FIGURES.jsonl ...                          Markdown for docs/perf.md

Every summary command takes --set KEY=VALUE (repeated) for the fields run_figures knows (figure,
device, preset, commit, seconds, ...), prints one JSON line with a "status" ("ok", "partial",
"failed") and exits 0 when the status is "ok", 1 otherwise. Standard library only: it runs under
any Python 3 on the GPU host.
"""

import argparse
import json
import os
import sys

# The CUDA backend's aims (docs/perf.md, "GPU"), written beside each figure so the summary reads on its own.
AIM_FRACTION_OF_FLOOR = 0.85
AIM_VERIFY_16 = 1.2
AIM_DRAFT_16 = 0.25
AIM_OVER_EAGER = 3.0

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def parse_value(text):
    """KEY=VALUE values: JSON where the text is JSON (numbers, true, null, objects), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def fields(pairs):
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"figures.py: --set {pair}: expected KEY=VALUE")
        out[key] = parse_value(value)
    return out


def json_lines(path):
    """Every line of `path` that is a JSON object (logs mix them with other text)."""
    found = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        value = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(value, dict):
                        found.append(value)
    except FileNotFoundError:
        pass
    return found


def last_with(path, key):
    lines = [v for v in json_lines(path) if key in v]
    return lines[-1] if lines else None


def emit(line):
    print(json.dumps(line, sort_keys=False), flush=True)
    return 0 if line.get("status") == "ok" else 1


def ratio(a, b):
    return a / b if a is not None and b else None


# --- gtest ----------------------------------------------------------------------------------------

def summarize_gtest(report_path, require_run):
    """Counts of one gtest JSON report; failures with the first lines of their messages."""
    try:
        with open(report_path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        return {"tests": None, "error": f"no gtest report ({e.__class__.__name__}: {e})"}
    passed = failed = skipped = 0
    failures = []
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            name = f"{suite.get('name')}.{case.get('name')}"
            if case.get("failures"):
                failed += 1
                message = "\n".join(f.get("failure", "") for f in case["failures"])
                failures.append({"test": name, "message": message[:600]})
            elif case.get("result") == "SKIPPED" or case.get("status") == "NOTRUN":
                skipped += 1
            else:
                passed += 1
    summary = {"tests": passed + failed + skipped, "passed": passed, "failed": failed, "skipped": skipped}
    if failures:
        summary["failures"] = failures[:20]
    if failed:
        summary["error"] = f"{failed} failed"
    elif require_run and skipped:
        summary["error"] = f"{skipped} skipped where every test must run (no GPU seen?)"
    return summary


def cmd_gtest(args, common):
    line = dict(common)
    status = "ok"
    for pair in args.report:
        name, _, path = pair.partition("=")
        summary = summarize_gtest(path, args.require_run)
        line[name] = summary
        if "error" in summary or summary.get("tests") in (None, 0):
            status = "failed"
    line["status"] = status
    return emit(line)


# --- kernels --------------------------------------------------------------------------------------

def floor_from(lines):
    """The bandwidth floor in a kernels log: the CUDA device-to-device copy, else the CPU read."""
    for kernel in ("cuda_copy_bandwidth", "read_bandwidth"):
        for value in lines:
            if value.get("kernel") == kernel:
                return kernel, value["gb_per_s"]
    return None, None


def cmd_kernels(args, common):
    lines = json_lines(args.log)
    kind, floor = floor_from(lines)
    line = dict(common)
    line["floor_kind"], line["floor_gb_per_s"] = kind, floor
    line["matmul"] = [
        {k: v.get(k) for k in ("m", "n", "k", "us_per_call", "weight_gb_per_s", "fraction_of_copy_bandwidth",
                               "gflop_per_s")}
        for v in lines if v.get("kernel") in ("cuda_matmul_bf16", "matmul_bf16")]
    line["attention"] = [
        {k: v.get(k) for k in ("rows", "keys", "us_per_call", "us_one_row_kernel", "kv_gb_per_s",
                               "fraction_of_copy_bandwidth")}
        for v in lines if v.get("kernel") == "cuda_attention"]
    line["sample"] = [
        {k: v.get(k) for k in ("rows", "temperature", "top_k", "top_p", "us_per_call", "us_unaligned")}
        for v in lines if v.get("kernel") == "cuda_sample"]
    line["add_rmsnorm"] = [
        {k: v.get(k) for k in ("rows", "dim", "us_per_call", "us_unaligned", "gb_per_s")}
        for v in lines if v.get("kernel") == "cuda_add_rmsnorm"]
    line["fused"] = [
        {k: v.get(k) for k in ("kernel", "rows", "us_fused", "us_apart", "fraction_of_copy_bandwidth")}
        for v in lines if v.get("kernel") in ("cuda_matmul_qkv", "cuda_matmul_swiglu", "cuda_norm_rope_store_attend")]
    # The delta rule's chunked form against its recurrent one on a prompt: whether a prefill
    # should take it on this device (docs/decisions.md, "The delta rule's two forms").
    line["delta_rule_chunked"] = [
        {k: v.get(k) for k in ("rows", "chunk_rows", "us_per_call", "us_recurrent", "chunked_over_recurrent")}
        for v in lines if v.get("kernel") in ("cuda_gated_delta_rule_chunked", "gated_delta_rule_chunked")]
    skipped = [v["skipped"] for v in lines if "skipped" in v]
    if skipped:
        line["skipped"] = skipped[0]
    want_cuda = common.get("device") == "cuda"
    if floor is None or (want_cuda and kind != "cuda_copy_bandwidth"):
        line["status"] = "failed"
        line["error"] = skipped[0] if skipped else "no bandwidth line in the kernels output"
    else:
        line["status"] = "ok"
    return emit(line)


# --- engine-8b ------------------------------------------------------------------------------------

def streamed_bytes(model_dir, weight_bytes):
    """Bytes one decode step streams: every matrix once. flashq-bench counts every tensor of the
    checkpoint; an untied embedding table is not streamed (a decode step gathers one row of it),
    so it comes off here. The KV cache read (a few hundred positions) is left out: under 1%."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    if config.get("tie_word_embeddings", False):
        return weight_bytes, 0
    dtype = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    table = config["vocab_size"] * config["hidden_size"] * DTYPE_BYTES.get(dtype, 2)
    return weight_bytes - table, table


def cmd_engine(args, common):
    line = dict(common)
    bench = last_with(args.bench, "runs")
    kind, floor = floor_from(json_lines(args.floor))
    if bench is None:
        line.update(status="failed", error=f"no flashq-bench engine result in {os.path.basename(args.bench)}")
        return emit(line)
    runs = [r for r in bench["runs"] if r.get("mode") == "ar" and r.get("concurrency") == 1] or bench["runs"]
    if not runs:
        line.update(status="failed", error="flashq-bench engine reported no runs")
        return emit(line)
    run = runs[0]
    weight_bytes = bench["weight_bytes_per_token"]
    streamed, table = streamed_bytes(args.model, weight_bytes)
    tokens_per_s = run["decode_tokens_per_s"]
    passes = bench.get("passes", {})
    decode_s = passes.get("decode_s")
    achieved = tokens_per_s * streamed / 1e9
    line.update({
        "backend": bench.get("backend"),
        "graphs": bench.get("graphs"),
        "pdl": bench.get("pdl"),
        "replayed_target_passes": bench.get("replayed_target_passes"),
        "replayed_draft_passes": bench.get("replayed_draft_passes"),
        "prompt_tokens": bench.get("prompt_tokens"),
        "decode_tokens": bench.get("decode_tokens"),
        "decode_tokens_per_s": tokens_per_s,
        "prefill_tokens_per_s": run.get("prefill_tokens_per_s"),
        "weight_bytes_per_token": weight_bytes,
        "untied_embedding_bytes": table,
        "streamed_bytes_per_token": streamed,
        "achieved_gb_per_s": achieved,
        "floor_kind": kind,
        "floor_gb_per_s": floor,
        "fraction_of_floor": ratio(achieved, floor),
        "fraction_of_floor_counting_every_tensor": ratio(tokens_per_s * weight_bytes / 1e9, floor),
        "pass_decode_s": decode_s,
        "pass_decode_tokens_per_s": 1.0 / decode_s if decode_s else None,
        "pass_fraction_of_floor": ratio(streamed / decode_s / 1e9, floor) if decode_s else None,
        "verify_16_over_decode": passes.get("verify_16_over_decode"),
        "draft_16_over_decode": passes.get("draft_16_over_decode"),
        "passes": passes,
    })
    met = {}
    if line["fraction_of_floor"] is not None:
        met["fraction_of_floor"] = line["fraction_of_floor"] >= AIM_FRACTION_OF_FLOOR
    if line["verify_16_over_decode"] is not None:
        met["verify_16_over_decode"] = line["verify_16_over_decode"] <= AIM_VERIFY_16
    if line["draft_16_over_decode"] is not None:
        met["draft_16_over_decode"] = line["draft_16_over_decode"] <= AIM_DRAFT_16
    line["aims"] = {"fraction_of_floor": f">= {AIM_FRACTION_OF_FLOOR}", "verify_16_over_decode": f"<= {AIM_VERIFY_16}",
                    "draft_16_over_decode": f"<= {AIM_DRAFT_16}"}
    line["met"] = met
    missing = [k for k in ("floor_gb_per_s", "verify_16_over_decode", "draft_16_over_decode") if line[k] is None]
    if missing:
        line["status"] = "partial"
        line["error"] = "missing " + ", ".join(missing)
    else:
        line["status"] = "ok"
    return emit(line)


# --- sweep-8b -------------------------------------------------------------------------------------

def cmd_sweep(args, common):
    line = dict(common)
    rows = []
    for path in args.bench:
        bench = last_with(path, "runs")
        if bench is None:
            continue
        for run in bench["runs"]:
            rows.append({k: run.get(k) for k in ("concurrency", "mode", "decode_tokens_per_s", "prefill_tokens_per_s",
                                                  "tau", "speedup", "efficiency", "decode_weight_gb_per_s")})
    expected = [int(c) for c in args.expect.split(",")] if args.expect else []
    seen = sorted({r["concurrency"] for r in rows})
    missing = [c for c in expected if c not in seen]
    line["rows"] = rows
    line["concurrency_done"] = seen
    if not rows:
        line.update(status="failed", error="no flashq-bench engine result")
    elif missing:
        line.update(status="partial", error=f"no result for concurrency {','.join(map(str, missing))}")
    else:
        line["status"] = "ok"
    return emit(line)


# --- hf-8b ----------------------------------------------------------------------------------------

def cmd_hf(args, common):
    line = dict(common)
    bench = last_with(args.ours, "runs")
    ours = bench["runs"][0]["decode_tokens_per_s"] if bench else None
    events = json_lines(args.hf)
    load = next((e for e in events if e.get("event") == "load"), None)
    variants = {e["variant"]: e for e in events if e.get("event") == "variant"}
    line["ours_decode_tokens_per_s"] = ours
    line["ours_prefill_tokens_per_s"] = bench["runs"][0].get("prefill_tokens_per_s") if bench else None
    if load:
        line["hf"] = {k: v for k, v in load.items() if k != "event"}
    line["variants"] = {
        name: {k: v for k, v in e.items() if k not in ("event", "variant", "traceback")} for name, e in variants.items()}
    for name, e in variants.items():
        if e.get("status") == "ok":
            line[f"ours_over_{name.replace('-', '_')}"] = ratio(ours, e.get("decode_tokens_per_s"))
    eager = variants.get("eager", {})
    line["aims"] = {"ours_over_eager": f">= {AIM_OVER_EAGER}"}
    if line.get("ours_over_eager") is not None:
        line["met"] = {"ours_over_eager": line["ours_over_eager"] >= AIM_OVER_EAGER}
    done = next((e for e in events if e.get("event") == "done"), None)
    if ours is None:
        line.update(status="failed", error="no flashq-bench result for our side")
    elif load is None or load.get("status") == "failed":
        line.update(status="failed", error=(load or {}).get("error", "hf_baseline.py printed nothing"))
    elif eager.get("status") != "ok":
        line.update(status="failed", error="eager: " + str(eager.get("error", "did not finish")))
    elif done is None or any(e.get("status") != "ok" for e in variants.values()):
        problems = [f"{n}: {str(e.get('error'))[:200]}" for n, e in variants.items() if e.get("status") != "ok"]
        problems += [f"{n}: did not finish (out of time?)" for n in load.get("variants", []) if n not in variants]
        line.update(status="partial", error="; ".join(problems) or "hf_baseline.py was cut short")
    else:
        line["status"] = "ok"
    return emit(line)


def cmd_record(args, common):
    line = json.loads(args.merge) if args.merge else {}
    line.update(common)
    line.setdefault("status", "ok")
    return emit(line)


# --- table ----------------------------------------------------------------------------------------

def fmt(value, digits=2, suffix=""):
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}{suffix}"
    return f"{value}{suffix}"


def latest(lines, figure):
    """The last "ok" line of a figure, else its last line of any status."""
    matching = [v for v in lines if v.get("figure") == figure]
    good = [v for v in matching if v.get("status") == "ok"]
    return (good or matching or [None])[-1]


def met_mark(line, key):
    met = (line or {}).get("met", {})
    return "" if key not in met else (" (met)" if met[key] else " (not met)")


def cmd_table(args):
    lines = []
    for path in args.files:
        lines.extend(v for v in json_lines(path) if "figure" in v)
    if not lines:
        print(f"figures.py: no figure lines in {', '.join(args.files)}", file=sys.stderr)
        return 2
    env = latest(lines, "env") or {}
    engine = latest(lines, "engine-8b")
    hf = latest(lines, "hf-8b")
    parity = latest(lines, "parity")
    sweep = latest(lines, "sweep-8b")
    kernels = latest(lines, "kernels")
    preset = (engine or sweep or hf or {}).get("preset", "qwen3-8b")

    out = []
    def known(key):
        return env.get(key) or "n/a"

    out.append(f"Machine: {env.get('gpu') or 'no GPU'} ({known('gpu_memory')}, driver {known('driver')}), "
               f"{known('nproc')} CPU cores ({known('cpu')}); flashq {env.get('commit') or (engine or {}).get('commit', '?')}; "
               f"PyTorch {known('torch')}, transformers {known('transformers')}; {known('time')}")
    out.append("")
    out.append("| figure | aim | measured |")
    out.append("|---|---|---|")
    if engine:
        launches = "".join(f", {name}" for name in ("graphs", "pdl") if engine.get(name) in (True, 1))
        out.append(
            f"| batch-1 decode, {preset} preset (random bf16{launches}) | >= {AIM_FRACTION_OF_FLOOR:.0%} of the measured floor | "
            f"{fmt(engine.get('decode_tokens_per_s'), 1)} tokens/s = {fmt(engine.get('achieved_gb_per_s'), 0)} GB/s "
            f"of {fmt(engine.get('floor_gb_per_s'), 0)} GB/s: "
            f"**{fmt(100 * engine['fraction_of_floor'] if engine.get('fraction_of_floor') is not None else None, 1)}%**"
            f"{met_mark(engine, 'fraction_of_floor')} (one isolated pass: "
            f"{fmt(engine.get('pass_decode_tokens_per_s'), 1)} tokens/s) |")
        out.append(f"| verify(16) / decode step | <= {AIM_VERIFY_16} | "
                   f"**{fmt(engine.get('verify_16_over_decode'))}**{met_mark(engine, 'verify_16_over_decode')} |")
        out.append(f"| draft(16), 5-layer drafter / decode step | <= {AIM_DRAFT_16} | "
                   f"**{fmt(engine.get('draft_16_over_decode'))}**{met_mark(engine, 'draft_16_over_decode')} |")
    if hf:
        variants = hf.get("variants", {})
        parts = []
        for name, v in variants.items():
            parts.append(f"{name} {fmt(v.get('decode_tokens_per_s'), 1)} tokens/s" if v.get("status") == "ok"
                         else f"{name} failed")
        out.append(f"| ours / transformers eager, batch 1 | >= {AIM_OVER_EAGER:.0f}x | "
                   f"**{fmt(hf.get('ours_over_eager'), 2, 'x')}**{met_mark(hf, 'ours_over_eager')} "
                   f"(ours {fmt(hf.get('ours_decode_tokens_per_s'), 1)} tokens/s; {'; '.join(parts)}; "
                   f"ours / static-auto {fmt(hf.get('ours_over_static_auto'), 2, 'x')}; "
                   f"ours / static-compile {fmt(hf.get('ours_over_static_compile'), 2, 'x')}) |")
    if parity:
        cells = []
        for name in ("backend_ops_test", "cuda_parity_test", "cuda_fused_parity_test", "cuda_model_test"):
            s = parity.get(name) or {}
            cells.append(f"{name} {s.get('passed', '?')} passed, {s.get('failed', '?')} failed, "
                         f"{s.get('skipped', '?')} skipped")
        out.append(f"| parity on the GPU | every test passes | {'; '.join(cells)} |")
    if sweep and sweep.get("rows"):
        out.append("")
        out.append(f"Decode throughput against concurrency ({preset}, tokens/s of all sequences; "
                   "dflash and auto: tau, speedup over ar):")
        out.append("")
        modes = []
        for r in sweep["rows"]:
            if r["mode"] not in modes:
                modes.append(r["mode"])
        out.append("| concurrency | " + " | ".join(modes) + " |")
        out.append("|---|" + "---|" * len(modes))
        for c in sorted({r["concurrency"] for r in sweep["rows"]}):
            cells = []
            for m in modes:
                r = next((r for r in sweep["rows"] if r["concurrency"] == c and r["mode"] == m), None)
                if r is None:
                    cells.append("n/a")
                elif m == "ar":
                    cells.append(fmt(r.get("decode_tokens_per_s"), 1))
                else:
                    cells.append(f"{fmt(r.get('decode_tokens_per_s'), 1)} (tau {fmt(r.get('tau'))}, "
                                 f"{fmt(r.get('speedup'), 2, 'x')})")
            out.append(f"| {c} | " + " | ".join(cells) + " |")
    if kernels and kernels.get("matmul"):
        out.append("")
        out.append(f"Kernels (bandwidth floor: {kernels.get('floor_kind')} {fmt(kernels.get('floor_gb_per_s'), 0)} GB/s):")
        out.append("")
        out.append("| matmul rows | us per call | weight GB/s | of the floor |")
        out.append("|---|---|---|---|")
        for m in kernels["matmul"]:
            fraction = m.get("fraction_of_copy_bandwidth")
            if fraction is None and kernels.get("floor_gb_per_s"):
                fraction = m["weight_gb_per_s"] / kernels["floor_gb_per_s"]
            out.append(f"| {m.get('m')} | {fmt(m.get('us_per_call'), 1)} | {fmt(m.get('weight_gb_per_s'), 0)} | "
                       f"{fmt(100 * fraction if fraction is not None else None, 0, '%')} |")
        if kernels.get("fused"):
            out.append("")
            out.append("| fused op | rows | us fused | us apart | fused, of the floor |")
            out.append("|---|---|---|---|---|")
            for f in kernels["fused"]:
                fraction = f.get("fraction_of_copy_bandwidth")
                out.append(f"| {f.get('kernel')} | {f.get('rows')} | {fmt(f.get('us_fused'), 1)} | "
                           f"{fmt(f.get('us_apart'), 1)} | "
                           f"{fmt(100 * fraction if fraction is not None else None, 0, '%')} |")
        if kernels.get("delta_rule_chunked"):
            out.append("")
            out.append("| delta rule, prompt rows | chunk rows | us chunked | us recurrent | chunked / recurrent |")
            out.append("|---|---|---|---|---|")
            for d in kernels["delta_rule_chunked"]:
                out.append(f"| {d.get('rows')} | {d.get('chunk_rows')} | {fmt(d.get('us_per_call'), 1)} | "
                           f"{fmt(d.get('us_recurrent'), 1)} | {fmt(d.get('chunked_over_recurrent'), 2)} |")
    figures_seen = list(dict.fromkeys(v["figure"] for v in lines))
    not_ok = [f"{f}: {v.get('status')} ({v.get('error', '')})" for f in figures_seen
              for v in [latest(lines, f)] if v.get("status") != "ok"]
    if not_ok:
        out.append("")
        out.append("Not ok in these files: " + "; ".join(not_ok))
    print("\n".join(out))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def with_set(p):
        p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
        return p

    p = with_set(sub.add_parser("record"))
    p.add_argument("--merge", help="a JSON object whose keys join the line")
    p = with_set(sub.add_parser("gtest"))
    p.add_argument("--report", action="append", required=True, metavar="NAME=FILE")
    p.add_argument("--require-run", action="store_true", help="a skipped test counts as a failure (on a GPU)")
    p = with_set(sub.add_parser("kernels"))
    p.add_argument("--log", required=True)
    p = with_set(sub.add_parser("engine"))
    p.add_argument("--bench", required=True)
    p.add_argument("--floor", required=True)
    p.add_argument("--model", required=True)
    p = with_set(sub.add_parser("sweep"))
    p.add_argument("--bench", action="append", required=True)
    p.add_argument("--expect", default="")
    p = with_set(sub.add_parser("hf"))
    p.add_argument("--ours", required=True)
    p.add_argument("--hf", required=True)
    p = sub.add_parser("table")
    p.add_argument("files", nargs="+")
    args = parser.parse_args()

    if args.command == "table":
        return cmd_table(args)
    common = fields(args.set)
    return {"record": cmd_record, "gtest": cmd_gtest, "kernels": cmd_kernels, "engine": cmd_engine,
            "sweep": cmd_sweep, "hf": cmd_hf}[args.command](args, common)


if __name__ == "__main__":
    sys.exit(main())
