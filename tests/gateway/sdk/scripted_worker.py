#!/usr/bin/python3
"""A worker that runs no model: it speaks the worker side of the FQ1 wire (docs/protocol.md,
sections 8.3, 8.4 and 9) and answers each job it is assigned with a completion taken from a
script, streamed as TOKENS and ended with FINAL. It lets the gateway's end-to-end tests see real
tool-call and reasoning text in each model family's format, which a random test model never
writes.

    /usr/bin/python3 tests/gateway/sdk/scripted_worker.py --broker tcp://127.0.0.1:5556 \
        --model scripted-hermes --script rules.json --tool-call-format hermes

The script is a JSON list of rules, tried in order, the first match answering:

    [{"when": "weather", "reply": "<tool_call>\\n{...}\\n</tool_call>"},
     {"when": "", "reply": "Hello.", "finish_reason": "stop"}]

- `when`: a substring of the job's last user or tool message's content (for a chat job), or of
  its prompt text; "" matches every job (put it last, as the default). A job that no rule
  matches ends with finish reason `rejected`.
- `reply`: the completion's text. It is sent in pieces of at most --piece-bytes bytes, cut on
  UTF-8 character boundaries, one TOKENS each carrying one made-up token id (1000 + the piece's
  index), so that usage counts one token a piece.
- `finish_reason`: `stop` (default) or `length`.
- `delay_ms` (optional): this rule's pause before each piece, instead of --delay-ms.

The job is served as a model would: a `stop` string cuts the reply before it (finish `stop`);
`max_tokens` caps the pieces (finish `length`); a continuation (attempt > 1) skips the pieces of
`resume_tokens`; a job whose prompt is over --max-model-len tokens is `rejected`; CANCEL ends a
running job with `cancelled`, its deadline with `deadline`. The prompt's length in tokens is
made up too: its text's bytes (for a chat, all message contents together) divided by 4, rounded
up, at least 1; a prompt of token ids counts them.

READY carries the output formats the gateway reads the completion with (--tool-call-format,
--reasoning-format) and --max-model-len. Heartbeats go out every 500 ms; a broker silent for 3 s,
or a DISCONNECT from it, makes the worker drop its jobs and register again on a new socket.
SIGTERM or SIGINT: DISCONNECT, then exit 0."""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import random
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import zmq

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "client/python"))

from flashq import wire  # noqa: E402
from flashq.errors import ProtocolError  # noqa: E402

HEARTBEAT_S = 0.5  # the protocol asks for at least one message a second
SILENCE_S = 3.0  # three missed beats: the broker is gone
RECONNECT_MIN_S, RECONNECT_MAX_S = 0.1, 5.0
FIRST_TOKEN_ID = 1000


@dataclass
class Rule:
    when: str
    reply: str
    finish_reason: str = "stop"
    delay_ms: Optional[int] = None


def load_script(path: str) -> List[Rule]:
    """The rules of a script file; a malformed one is a ValueError naming the rule and field."""
    with open(path, encoding="utf-8") as f:
        entries = json.load(f)
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{path}: a script is a non-empty JSON list of rules")
    rules = []
    for i, entry in enumerate(entries):
        where = f"{path}: rule {i}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: must be an object")
        unknown = set(entry) - {"when", "reply", "finish_reason", "delay_ms"}
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        for key in ("when", "reply"):
            if not isinstance(entry.get(key), str):
                raise ValueError(f"{where}: `{key}` must be a string")
        finish_reason = entry.get("finish_reason", "stop")
        if finish_reason not in ("stop", "length"):
            raise ValueError(f"{where}: `finish_reason` must be stop or length, got {finish_reason!r}")
        delay_ms = entry.get("delay_ms")
        if delay_ms is not None and (not isinstance(delay_ms, int) or isinstance(delay_ms, bool) or delay_ms < 0):
            raise ValueError(f"{where}: `delay_ms` must be an int >= 0")
        rules.append(Rule(entry["when"], entry["reply"], finish_reason, delay_ms))
    return rules


def split_pieces(text: str, piece_bytes: int) -> List[str]:
    """`text` in pieces of at most `piece_bytes` UTF-8 bytes each, never splitting a character (a
    character longer than `piece_bytes` is a piece of its own)."""
    pieces: List[str] = []
    current, size = [], 0
    for ch in text:
        n = len(ch.encode("utf-8", "surrogatepass"))
        if current and size + n > piece_bytes:
            pieces.append("".join(current))
            current, size = [], 0
        current.append(ch)
        size += n
    if current:
        pieces.append("".join(current))
    return pieces


def _content(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


def match_text(job: Dict[str, Any]) -> str:
    """What a rule's `when` is looked for in: the last user or tool message, or the prompt."""
    messages = job.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") in ("user", "tool"):
                return _content(message)
        return ""
    prompt = job.get("prompt")
    return prompt if isinstance(prompt, str) else ""


def prompt_token_count(job: Dict[str, Any]) -> int:
    """The made-up length of the job's prompt in tokens (see the module's comment)."""
    if isinstance(job.get("prompt_tokens"), list):
        return max(1, len(job["prompt_tokens"]))
    if isinstance(job.get("messages"), list):
        text = "".join(_content(m) for m in job["messages"])
    else:
        text = job.get("prompt") if isinstance(job.get("prompt"), str) else ""
    return max(1, math.ceil(len(text.encode("utf-8", "surrogateescape")) / 4))


def choose_rule(rules: List[Rule], job: Dict[str, Any]) -> Optional[Rule]:
    text = match_text(job)
    return next((rule for rule in rules if rule.when in text), None)


@dataclass
class Attempt:
    """One job attempt being streamed."""

    job_id: str
    attempt: int
    pieces: List[str]  # what is left to send, in order
    first_index: int  # the index of pieces[0] in the whole reply (resumed pieces skipped)
    finish_reason: str
    delay_s: float
    prompt_tokens: int
    received: float
    deadline: Optional[float]
    sent: int = 0
    seq: int = 0
    first_token_at: Optional[float] = None
    next_at: float = 0.0

    def final(self, finish_reason: str, now: float, error: Optional[str] = None) -> List[bytes]:
        body = {"id": self.job_id, "attempt": self.attempt, "finish_reason": finish_reason,
                "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.first_index + self.sent},
                "spec_stats": {"draft_steps": 0, "accepted_tokens": 0, "tau": 1.0 if self.sent else 0.0},
                "timings": {"queue_ms": 0,
                            "ttft_ms": 0 if self.first_token_at is None else _ms(self.first_token_at - self.received),
                            "total_ms": _ms(now - self.received)}}
        if error is not None:
            body["error"] = error
        return wire.encode(wire.FINAL, body)


def _ms(seconds: float) -> int:
    return max(0, int(seconds * 1000))


class ScriptedWorker:
    def __init__(self, args: argparse.Namespace, rules: List[Rule]):
        self.args = args
        self.rules = rules
        self.context = zmq.Context()
        self.stopping = False
        self.jobs: Dict[str, Attempt] = {}
        safe = "".join(c if 0x21 <= ord(c) <= 0x7E else "_" for c in args.model)[:100]
        self.worker_id = f"{safe}-{os.getpid()}"  # unique per process, for logs

    def log(self, text: str) -> None:
        print(f"scripted worker {self.worker_id}: {text}", file=sys.stderr, flush=True)

    def ready(self) -> List[bytes]:
        return wire.encode(wire.READY, {
            "worker_id": self.worker_id, "model": self.args.model, "slots": self.args.slots, "block_size": 0,
            "backend": "scripted", "max_model_len": self.args.max_model_len,
            "tool_call_format": self.args.tool_call_format, "reasoning_format": self.args.reasoning_format})

    def run(self) -> int:
        backoff = RECONNECT_MIN_S
        while not self.stopping:
            heard = self.serve_connection()
            if self.stopping:
                break
            self.jobs.clear()  # abandoned: the broker requeues them (9.3)
            backoff = RECONNECT_MIN_S if heard else min(backoff * 2, RECONNECT_MAX_S)
            time.sleep(backoff * random.uniform(0.8, 1.2))
        self.context.term()
        return 0

    def serve_connection(self) -> bool:
        """Registers on a new socket and serves until the broker goes silent or disconnects us, or
        we are told to stop. True when the broker was heard from after READY."""
        socket = self.context.socket(zmq.DEALER)
        socket.linger = 1000
        socket.connect(self.args.broker)
        socket.send_multipart(self.ready())
        self.log(f"READY for model {self.args.model} sent to {self.args.broker}")
        heard, last_heard, last_beat = False, time.monotonic(), time.monotonic()
        try:
            while not self.stopping:
                now = time.monotonic()
                if now - last_heard > SILENCE_S:
                    self.log("the broker is silent: registering again")
                    return heard
                wait = HEARTBEAT_S - (now - last_beat)
                if self.jobs:
                    wait = min(wait, min(job.next_at for job in self.jobs.values()) - now)
                if socket.poll(max(0, min(int(wait * 1000), 100)), zmq.POLLIN):
                    while True:
                        try:
                            frames = socket.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        last_heard = time.monotonic()
                        if not self.handle(socket, frames):
                            self.log("DISCONNECT from the broker: registering again")
                            return heard
                        if not heard:  # the broker answers READY only once it registered us
                            heard = True
                            self.log("registered")
                self.stream_due(socket)
                # Every 500 ms, busy or not: the load it reports feeds the broker's dispatch.
                if time.monotonic() - last_beat >= HEARTBEAT_S:
                    socket.send_multipart(wire.encode(wire.HEARTBEAT, {"load": len(self.jobs)}))
                    last_beat = time.monotonic()
            socket.send_multipart(wire.encode(wire.DISCONNECT, {}))
            return heard
        finally:
            socket.close()

    def handle(self, socket, frames) -> bool:
        """Serves one message from the broker; False on DISCONNECT."""
        try:
            message_type, body = wire.decode(frames)
        except ProtocolError as e:
            socket.send_multipart(wire.encode(wire.ERROR, {"code": "protocol", "message": str(e)[:60000]}))
            return True
        if message_type == wire.DISCONNECT:
            return False
        if message_type == wire.ASSIGN:
            try:
                self.assign(socket, body)
            except (TypeError, ValueError, AttributeError) as e:  # the broker checks jobs: a bug there
                self.log(f"ASSIGN not understood: {e}")
                socket.send_multipart(wire.encode(wire.ERROR, {"code": "protocol",
                                                               "message": f"ASSIGN not understood: {e}"[:60000]}))
        elif message_type == wire.CANCEL:
            job = self.jobs.pop(body.get("id"), None)  # one we do not hold is ignored
            if job is not None:
                socket.send_multipart(job.final("cancelled", time.monotonic()))
        elif message_type == wire.ERROR:
            self.log(f"ERROR from the broker: {body.get('code')}: {body.get('message')}")
        return True

    def assign(self, socket, body: Dict[str, Any]) -> None:
        now = time.monotonic()
        job = body.get("job") if isinstance(body.get("job"), dict) else {}
        attempt = Attempt(job_id=str(job.get("id")), attempt=int(body.get("attempt", 1)), pieces=[], first_index=0,
                          finish_reason="stop", delay_s=self.args.delay_ms / 1000,
                          prompt_tokens=prompt_token_count(job), received=now, deadline=None, next_at=now)
        if self.args.max_model_len and attempt.prompt_tokens > self.args.max_model_len:
            socket.send_multipart(attempt.final("rejected", now, f"the prompt's {attempt.prompt_tokens} tokens do not "
                                                f"fit the context of {self.args.max_model_len}"))
            return
        rule = choose_rule(self.rules, job)
        if rule is None:
            socket.send_multipart(attempt.final("rejected", now, "no rule of the script matches this job"))
            return
        reply, finish_reason = rule.reply, rule.finish_reason
        stops = [s for s in job.get("stop") or [] if isinstance(s, str) and s and s in reply]
        if stops:
            reply = reply[:min(reply.index(s) for s in stops)]
            finish_reason = "stop"
        pieces = split_pieces(reply, self.args.piece_bytes)
        max_tokens = job.get("max_tokens") if isinstance(job.get("max_tokens"), int) else 256
        if len(pieces) > max_tokens:
            pieces, finish_reason = pieces[:max_tokens], "length"
        resumed = len(body.get("resume_tokens") or [])
        attempt.pieces, attempt.first_index = pieces[resumed:], min(resumed, len(pieces))
        attempt.finish_reason = finish_reason
        if rule.delay_ms is not None:
            attempt.delay_s = rule.delay_ms / 1000
        attempt.next_at = now + attempt.delay_s
        deadline_ms = job.get("deadline_ms")
        if isinstance(deadline_ms, int) and deadline_ms > 0:
            attempt.deadline = now + deadline_ms / 1000
        self.jobs[attempt.job_id] = attempt

    def stream_due(self, socket) -> None:
        """Sends the next piece of every job whose time has come, and the FINAL of those done."""
        now = time.monotonic()
        for job_id, job in list(self.jobs.items()):
            if job.deadline is not None and now >= job.deadline:
                socket.send_multipart(job.final("deadline", now))
                del self.jobs[job_id]
                continue
            if now < job.next_at:
                continue
            if job.pieces:
                piece = job.pieces.pop(0)
                socket.send_multipart(wire.encode(wire.TOKENS, {
                    "id": job_id, "attempt": job.attempt, "seq": job.seq,
                    "token_ids": [FIRST_TOKEN_ID + job.first_index + job.sent], "text": piece}))
                job.seq += 1
                job.sent += 1
                if job.first_token_at is None:
                    job.first_token_at = now
                job.next_at = now + job.delay_s
            if not job.pieces:
                socket.send_multipart(job.final(job.finish_reason, time.monotonic()))
                del self.jobs[job_id]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="A worker that streams scripted completions instead of running "
                                                 "a model (for the gateway's tests).")
    parser.add_argument("--broker", required=True, help="the broker's backend endpoint")
    parser.add_argument("--model", required=True, help="the model name served (READY model)")
    parser.add_argument("--script", required=True, help="JSON file: the rules (see this file's comment)")
    parser.add_argument("--tool-call-format", default="none", choices=["hermes", "llama3_json", "harmony", "none"])
    parser.add_argument("--reasoning-format", default="none", choices=["none", "think", "think_in_prompt", "harmony"])
    parser.add_argument("--max-model-len", type=int, default=4096, help="context in tokens (0: unknown)")
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--piece-bytes", type=int, default=7, help="bytes of reply text a TOKENS at most")
    parser.add_argument("--delay-ms", type=int, default=0, help="pause before each piece")
    args = parser.parse_args(argv)
    for name in ("max_model_len", "delay_ms"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0")
    for name in ("slots", "piece_bytes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if not 1 <= len(args.model.encode()) <= 256:
        parser.error("--model must be 1..256 bytes")
    try:
        rules = load_script(args.script)
    except (OSError, ValueError) as e:
        parser.error(f"--script: {e}")
    worker = ScriptedWorker(args, rules)

    def stop(signum, frame):
        worker.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return worker.run()


if __name__ == "__main__":
    sys.exit(main())
