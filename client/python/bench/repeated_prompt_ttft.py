#!/usr/bin/env python3
"""Time to first token of chat requests that repeat one long system prompt, through `flashq up` on
the CPU as a newcomer starts it (no cache flags), beside the same with `--cache-memory-mb 0` (no
KV cache pool, so no prefix caching). Both run at once on their own ports; each round sends one
request to each, in alternating order, with a new user message after the same system prompt.
Round 0 is cold in both; the later rounds show what the cached system prompt saves.

    /usr/bin/python3 client/python/bench/repeated_prompt_ttft.py --bin build/bin --model DIR \\
        [--system-tokens 1500] [--rounds 12]

Prints one JSON object (docs/perf.md, "A repeated system prompt through `flashq up`")."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import flashq  # noqa: E402

WORDS = ("queue broker worker token stream block cache prefix draft verify accept commit reply tool "
         "schema result message session deadline replay heartbeat slot batch").split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


class Up:
    """One `flashq up` with its own ports; `flags` are added to its command line."""

    def __init__(self, bin_dir: str, model: str, flags: list, log_dir: pathlib.Path, name: str):
        self.frontend, self.stream = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
        self.http_port = free_port()
        self.log = open(log_dir / f"{name}.log", "wb")
        self.proc = subprocess.Popen(
            [os.path.join(bin_dir, "flashq"), "--log-level", "info", "up", "--model", model, "--device", "cpu", "--frontend", self.frontend,
             "--stream", self.stream, "--http", f"127.0.0.1:{self.http_port}", "--gateway", "", *flags],
            stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, seconds: float = 120) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise SystemExit(f"flashq up exited: {self.log.name}")
            if ready(self.http_port):
                return
            time.sleep(0.1)
        raise SystemExit(f"flashq up never became ready: {self.log.name}")

    def resident_mib(self) -> dict:
        """The process's resident memory now and at its peak (VmRSS, VmHWM), in MiB."""
        fields = dict(line.split(":", 1) for line in pathlib.Path(f"/proc/{self.proc.pid}/status").read_text()
                      .splitlines() if ":" in line)
        return {key: round(int(fields[key].split()[0]) / 1024, 1) for key in ("VmRSS", "VmHWM")}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def first_token_ms(client: flashq.Client, messages: list, max_tokens: int) -> tuple:
    """Milliseconds from submit to the first event carrying tokens, seen by the client; the
    worker's own ttft_ms, the prompt's tokens and the output ids."""
    first = []
    start = time.perf_counter()
    result = client.generate(messages=messages, max_tokens=max_tokens, timeout=120,
                             on_event=lambda e: first or not e.token_ids or first.append(time.perf_counter()))
    if result.finish_reason not in ("stop", "length"):
        raise SystemExit(f"a request ended {result.finish_reason}: {result.final.error}")
    return ((first[0] - start) * 1000.0, result.final.timings.ttft_ms, result.final.usage.prompt_tokens,
            result.token_ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default="build/bin", help="the build's bin directory")
    parser.add_argument("--model", required=True, help="model directory (with a chat template and tokenizer)")
    parser.add_argument("--system-tokens", type=int, default=1500, help="the system prompt's length, about")
    parser.add_argument("--rounds", type=int, default=12, help="requests per arm, the first one cold")
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds must be at least 2: one cold round and one later")

    rng = random.Random(args.seed)
    # The model's own tokenizer decides how many tokens a word is: probe requests refine the
    # number of words until the prompt has about the tokens asked for.
    words = [rng.choice(WORDS) for _ in range(4 * args.system_tokens)]
    word_count = args.system_tokens // 2
    arms = {"default": [], "cache-memory-mb 0": ["--cache-memory-mb", "0"]}
    with tempfile.TemporaryDirectory() as scratch:
        ups = {name: Up(args.bin, args.model, flags, pathlib.Path(scratch), name.replace(" ", "-"))
               for name, flags in arms.items()}
        try:
            for up in ups.values():
                up.wait_ready()
            clients = {name: flashq.Client(up.frontend, up.stream, timeout=120) for name, up in ups.items()}
            probe = clients["cache-memory-mb 0"]
            for _ in range(4):
                system = " ".join(words[:word_count])
                tokens = first_token_ms(probe, [{"role": "system", "content": system}, {"role": "user", "content": "?"}],
                                        1)[2]
                if abs(tokens - args.system_tokens) <= args.system_tokens // 50:
                    break
                word_count = min(len(words), max(1, round(word_count * args.system_tokens / tokens)))
            # A prompt as long as the system prompt, sharing no prefix with it, through each arm
            # first: round 0 then pays for the uncached prompt only, not for a process's first
            # long prompt (its workspace grows to the largest prompt seen).
            other = " ".join(random.Random(args.seed + 1).choice(WORDS) for _ in range(word_count))
            for client in clients.values():
                first_token_ms(client, [{"role": "system", "content": "Unrelated. " + other},
                                        {"role": "user", "content": "?"}], 1)
            times = {name: [] for name in arms}
            worker_ttft = {name: [] for name in arms}
            identical = True
            prompt_tokens = 0
            for round_index in range(args.rounds):
                user = f"Question {round_index}: which {rng.choice(WORDS)} holds the {rng.choice(WORDS)}?"
                messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
                order = list(arms) if round_index % 2 == 0 else list(reversed(arms))
                outputs = {}
                for name in order:
                    ms, server_ms, prompt_tokens, ids = first_token_ms(clients[name], messages, args.max_tokens)
                    times[name].append(ms)
                    worker_ttft[name].append(server_ms)
                    outputs[name] = ids
                identical = identical and len({tuple(ids) for ids in outputs.values()}) == 1
            for client in clients.values():
                client.close()
            resident = {name: up.resident_mib() for name, up in ups.items()}
        finally:
            for up in ups.values():
                up.stop()
            pool_lines = {name: [line for line in pathlib.Path(up.log.name).read_text(errors="replace").splitlines()
                                 if "KV cache" in line] for name, up in ups.items()}

    report = {
        "prompt_tokens": prompt_tokens,
        "rounds": args.rounds,
        "outputs_identical": identical,
        "cold_ttft_ms": {name: round(t[0], 1) for name, t in times.items()},
        "later_ttft_ms_median": {name: round(statistics.median(t[1:]), 1) for name, t in times.items()},
        "later_worker_ttft_ms_median": {name: statistics.median(t[1:]) for name, t in worker_ttft.items()},
        "resident_mib": resident,
        "later_ratio_off_over_default": round(statistics.median(times["cache-memory-mb 0"][1:]) /
                                              statistics.median(times["default"][1:]), 1),
        "log": {name: [line.split(" info ", 1)[-1] for line in lines] for name, lines in pool_lines.items()},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
