#!/usr/bin/env python3
"""Token events per second received by one Python subscriber (flashq.Client.stream) through a real
flashq-broker, fed by a synthetic worker that speaks the wire's worker side and streams one job's
tokens as fast as it can (no model runs). Beside it, the same stream read by a bare pyzmq SUB
that only counts messages, and one that also unpacks each body with msgpack: what ZeroMQ and
msgpack alone allow in this interpreter, so the client's own share is visible.

    /usr/bin/python3 client/python/bench/subscriber_bench.py --bin build/bin [--events 200000]

Prints one JSON object (docs/perf.md, "Python client")."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import pathlib
import socket
import subprocess
import sys
import time

import msgpack
import zmq

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import flashq  # noqa: E402
from flashq import wire  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def synthetic_worker(backend: str, events: int, go, sent_rate) -> None:
    """Registers, takes one ASSIGN, waits for `go`, then sends `events` TOKENS of one token each
    and the FINAL; reports its own send rate (the feed must outrun the subscriber)."""
    context = zmq.Context()
    dealer = context.socket(zmq.DEALER)
    dealer.linger = 5000
    dealer.connect(backend)
    dealer.send_multipart(wire.encode(wire.READY, {"worker_id": "synthetic", "model": "synthetic", "slots": 1,
                                                   "block_size": 0, "backend": "none"}))
    heartbeat = wire.encode(wire.HEARTBEAT, {"load": 0})
    while True:  # heartbeats while idle (the broker drops a worker silent for 3 s)
        if not dealer.poll(500):
            dealer.send_multipart(heartbeat)
            continue
        message_type, body = wire.decode(dealer.recv_multipart())
        if message_type == wire.ASSIGN:
            job_id = body["job"]["id"]
            break
    # Encoded before the clock starts: the feed measures the broker and the subscriber, not this.
    tag, tokens = wire.TAG, wire.TOKENS
    bodies = [msgpack.packb({"id": job_id, "attempt": 1, "seq": seq, "token_ids": [seq % 4096], "text": " tok"})
              for seq in range(events)]
    final = wire.encode(wire.FINAL, {"id": job_id, "attempt": 1, "finish_reason": "length",
                                     "usage": {"prompt_tokens": 3, "completion_tokens": events},
                                     "spec_stats": {"draft_steps": 0, "accepted_tokens": 0, "tau": 1.0},
                                     "timings": {"queue_ms": 0, "ttft_ms": 0, "total_ms": 0}})
    while not go.wait(0.5):
        dealer.send_multipart(heartbeat)
    start = time.perf_counter()
    for body in bodies:
        dealer.send_multipart([tag, tokens, body])
    dealer.send_multipart(final)
    sent_rate.value = events / (time.perf_counter() - start)
    dealer.send_multipart(wire.encode(wire.DISCONNECT, {}))  # leaving on purpose: no job goes to it
    dealer.close()
    context.term()


def run_once(broker, backend: str, events: int, reader: str) -> dict:
    """One job of `events` tokens, read by `reader`: client, raw or msgpack."""
    spawn = multiprocessing.get_context("spawn")  # no ZeroMQ state inherited by a fork
    go, sent_rate = spawn.Event(), spawn.Value("d", 0.0)
    worker = spawn.Process(target=synthetic_worker, args=(backend, events, go, sent_rate))
    worker.start()
    client = flashq.Client(broker["frontend"], broker["stream"], timeout=10)
    job_id = client.submit("synthetic", max_tokens=min(events, 1_000_000))
    context = zmq.Context()
    if reader == "client":
        stream = client.stream(job_id)
    else:
        sub = context.socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, 0)
        sub.setsockopt(zmq.SUBSCRIBE, wire.topic(job_id))
        sub.connect(broker["stream"])
    time.sleep(0.3)  # the subscription reaches the broker before the first token
    go.set()
    received = 0
    first = last = None
    if reader == "client":
        for event in stream:
            received += 1
            if first is None:
                first = time.perf_counter()
            if event.final is not None:
                break
        last = time.perf_counter()
        incomplete = stream.incomplete
    else:
        unpack = reader == "msgpack"
        while received < events + 1:
            frames = sub.recv_multipart()
            if first is None:
                first = time.perf_counter()
            if unpack:
                msgpack.unpackb(frames[3])
            received += 1
        last = time.perf_counter()
        incomplete = False
        sub.close(0)
    worker.join()
    client.close()
    context.term()
    return {"reader": reader, "events": received, "events_per_s": round((received - 1) / (last - first)),
            "incomplete": incomplete, "worker_send_per_s": round(sent_rate.value)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(pathlib.Path(__file__).resolve().parents[3] / "build/bin"),
                        help="directory of flashq-broker")
    parser.add_argument("--events", type=int, default=200_000, help="token events in the job")
    parser.add_argument("--runs", type=int, default=3, help="runs of each reader")
    args = parser.parse_args()
    frontend, stream, backend = (f"tcp://127.0.0.1:{free_port()}" for _ in range(3))
    broker_process = subprocess.Popen(
        [os.path.join(args.bin, "flashq-broker"), "--frontend", frontend, "--backend", backend, "--stream", stream,
         "--http", "", "--drain-timeout-ms", "0", "--log-level", os.environ.get("FLASHQ_BENCH_LOG", "warn")])
    broker = {"frontend": frontend, "stream": stream}
    try:
        results = [run_once(broker, backend, args.events, reader)
                   for _ in range(args.runs) for reader in ("client", "msgpack", "raw")]
    finally:
        broker_process.terminate()
        broker_process.wait()
    summary = {}
    for reader in ("client", "msgpack", "raw"):
        rates = sorted(r["events_per_s"] for r in results if r["reader"] == reader)
        summary[reader] = {"median_events_per_s": rates[len(rates) // 2], "runs": rates}
    print(json.dumps({"events_per_job": args.events, "python": sys.version.split()[0], "pyzmq": zmq.__version__,
                      "libzmq": zmq.zmq_version(), "msgpack": ".".join(map(str, msgpack.version)),
                      "cpus": os.cpu_count(), "summary": summary, "runs": results}, indent=1))
    return 0 if all(not r["incomplete"] and r["events"] == args.events + 1 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
