"""The scripted worker (scripted_worker.py) behind a real flashq-broker, driven by the Python client:
what it streams is the scripted reply, piece by piece, with the finish reason and usage a model
would report; rules match the last user or tool message; stop strings, max_tokens, CANCEL, deadlines, the
context bound and SIGTERM behave as docs/protocol.md asks of a worker. Its READY and heartbeats
are read off a ROUTER socket of the test's own. Programs come from FLASHQ_BIN."""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import msgpack
import pytest
import zmq

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "client/python"))
sys.path.insert(0, str(HERE))

import flashq  # noqa: E402
from flashq import wire  # noqa: E402
import scripted_worker  # noqa: E402

WORKER = str(HERE / "scripted_worker.py")

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "°C"}}\n</tool_call>'
RULES = [
    {"when": "°C in Paris", "reply": "It is 21 °C in Paris — sunny ☀."},  # the tool's result
    {"when": "weather", "reply": CALL},
    {"when": "truncated", "reply": "a reply cut by the length limit", "finish_reason": "length"},
    {"when": "slow", "reply": "one two three four five six seven eight nine ten eleven twelve", "delay_ms": 100},
    {"when": "", "reply": "Hello from the script."},
]
STRICT_RULES = [{"when": "known", "reply": "ok"}]  # no default rule


def bin_path(name: str) -> str:
    directory = os.environ.get("FLASHQ_BIN", str(REPO / "build/bin"))
    path = os.path.join(directory, name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built (set FLASHQ_BIN to the build's bin directory)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


class Process:
    """A program run for a test, its output in a log file shown when an assertion fails."""

    def __init__(self, args, log_path: pathlib.Path):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, cwd=REPO)

    def running(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def start_worker(tmp_path: pathlib.Path, backend: str, model: str, rules, *flags: str) -> Process:
    script = tmp_path / f"{model}.json"
    script.write_text(json.dumps(rules))
    return Process(["/usr/bin/python3", WORKER, "--broker", backend, "--model", model, "--script", str(script),
                    *flags], tmp_path / f"{model}.log")


class Cluster:
    def __init__(self, tmp_path: pathlib.Path):
        self.tmp_path = tmp_path
        self.frontend, self.stream = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
        self.backend = f"tcp://127.0.0.1:{free_port()}"
        self.broker = Process([bin_path("flashq-broker"), "--frontend", self.frontend, "--stream", self.stream,
                               "--backend", self.backend, "--http", "", "--drain-timeout-ms", "0"],
                              tmp_path / "broker.log")
        self.workers = []

    def worker(self, model: str, rules, *flags: str, wait: bool = True) -> Process:
        worker = start_worker(self.tmp_path, self.backend, model, rules, *flags)
        self.workers.append(worker)
        if wait:
            self.wait_registered(worker)
        return worker

    def wait_registered(self, worker: Process) -> None:
        """Until the broker has answered the worker's READY (its first heartbeat to it)."""
        assert wait_until(lambda: "registered" in worker.output() or not worker.running(), 10), worker.output()
        assert worker.running(), worker.output() + self.broker.output()

    def client(self) -> flashq.Client:
        return flashq.Client(self.frontend, self.stream, timeout=10)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.broker.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A flashq-broker with two scripted workers: `scripted-hermes` (RULES, 7-byte pieces) and
    `scripted-strict` (STRICT_RULES, a context of 8 tokens)."""
    cluster = Cluster(tmp_path_factory.mktemp("scripted"))
    try:
        cluster.worker("scripted-hermes", RULES, "--tool-call-format", "hermes", "--reasoning-format", "think",
                       wait=False)
        cluster.worker("scripted-strict", STRICT_RULES, "--max-model-len", "8", wait=False)
        for worker in cluster.workers:
            cluster.wait_registered(worker)
        yield cluster
    finally:
        cluster.stop()


def events_of(client: flashq.Client, job_id: str):
    return list(client.stream(job_id, timeout=10))


def test_the_stream_is_the_scripted_reply_in_pieces_with_usage(cluster):
    client = cluster.client()
    messages = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "What is the weather in Paris?"}]
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    job_id = client.submit(messages=messages, tools=tools, model="scripted-hermes")
    events = events_of(client, job_id)
    final = events[-1].final
    pieces = [e.text for e in events[:-1]]
    assert "".join(pieces) == CALL
    assert all(1 <= len(p.encode()) <= 7 for p in pieces), pieces  # whole characters, 7 bytes at most
    assert pieces == scripted_worker.split_pieces(CALL, 7)
    assert [len(e.token_ids) for e in events[:-1]] == [1] * len(pieces)
    assert final.finish_reason == "stop" and final.error is None
    assert final.usage.completion_tokens == len(pieces)
    content_bytes = sum(len(m["content"].encode()) for m in messages)
    assert final.usage.prompt_tokens == math.ceil(content_bytes / 4)
    client.close()


def test_a_rule_matches_the_tool_result_of_a_round_trip(cluster):
    client = cluster.client()
    messages = [{"role": "user", "content": "What is the weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": "21 °C in Paris"}'}]
    result = client.generate(messages=messages, model="scripted-hermes", timeout=10)
    assert result.text == "It is 21 °C in Paris — sunny ☀."  # not the call: the tool message is the last
    assert result.finish_reason == "stop"
    assert result.usage.completion_tokens == len(result.token_ids) == len(scripted_worker.split_pieces(result.text, 7))
    result = client.generate("a prompt text with no rule of its own", model="scripted-hermes", timeout=10)
    assert result.text == "Hello from the script."  # the default rule; a prompt job matches on its text
    assert result.usage.prompt_tokens == math.ceil(len("a prompt text with no rule of its own") / 4)
    client.close()


def test_length_max_tokens_and_stop_strings(cluster):
    client = cluster.client()
    result = client.generate("this one is truncated", model="scripted-hermes", timeout=10)
    assert (result.text, result.finish_reason) == ("a reply cut by the length limit", "length")
    result = client.generate("hi", model="scripted-hermes", max_tokens=2, timeout=10)
    assert (result.text, result.finish_reason) == ("Hello from the", "length")
    assert result.usage.completion_tokens == 2
    result = client.generate("hi", model="scripted-hermes", stop=["the"], timeout=10)
    assert (result.text, result.finish_reason) == ("Hello from ", "stop")
    client.close()


def test_cancel_ends_a_running_job_with_cancelled(cluster):
    client = cluster.client()
    job_id = client.submit("slow, please", model="scripted-hermes")
    stream = client.stream(job_id, timeout=10)
    first = next(stream)  # the job runs
    assert first.text == "one two"
    client.cancel(job_id)
    rest = list(stream)
    final = rest[-1].final
    assert final.finish_reason == "cancelled"
    text = first.text + "".join(e.text for e in rest)
    reply = RULES[3]["reply"]
    assert reply.startswith(text) and len(text) < len(reply)  # 12 pieces at 100 ms each: cut short
    assert final.usage.completion_tokens == 1 + sum(len(e.token_ids) for e in rest)
    client.close()


def test_a_deadline_ends_a_running_job(cluster):
    client = cluster.client()
    result = client.generate("slow, please", model="scripted-hermes", deadline_ms=350, timeout=10)
    assert result.finish_reason == "deadline"  # the worker's own: the broker waits 1 s past it
    assert 1 <= result.usage.completion_tokens < 12 and RULES[3]["reply"].startswith(result.text)
    client.close()


def test_no_matching_rule_and_an_oversize_prompt_are_rejected(cluster):
    client = cluster.client()
    result = client.generate("a known question", model="scripted-strict", timeout=10)
    assert (result.text, result.finish_reason) == ("ok", "stop")
    result = client.generate("what?", model="scripted-strict", timeout=10)
    assert result.finish_reason == "rejected" and "no rule" in result.final.error
    result = client.generate("a known question, asked at a length over eight tokens", model="scripted-strict",
                             timeout=10)
    assert result.finish_reason == "rejected" and "context of 8" in result.final.error
    client.close()


def test_sigterm_disconnects_and_exits_zero(cluster):
    worker = cluster.worker("scripted-leaving", [{"when": "", "reply": "b°e"}], "--piece-bytes", "1")
    client = cluster.client()
    result = client.generate("hi", model="scripted-leaving", timeout=10)
    assert result.text == "b°e" and result.usage.completion_tokens == len(result.token_ids) == 3
    assert worker.stop() == 0, worker.output()
    # The broker let it go at once (DISCONNECT), not after 3 s of silence: a job for its model waits.
    job_id = client.submit("hi", model="scripted-leaving")
    time.sleep(0.3)
    assert client.status(job_id).state == "queued"
    client.cancel(job_id)
    client.close()


def test_ready_heartbeats_and_registering_again_after_disconnect(tmp_path):
    """READY as the gateway needs it, then heartbeats every 500 ms; a DISCONNECT from the broker
    makes the worker register again on a new socket."""
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.linger = 0
    port = router.bind_to_random_port("tcp://127.0.0.1")
    worker = start_worker(tmp_path, f"tcp://127.0.0.1:{port}", "scripted-llama", RULES, "--tool-call-format",
                          "llama3_json", "--reasoning-format", "none", "--max-model-len", "8192", "--slots", "3")
    try:
        def receive():
            assert router.poll(5000), worker.output()
            identity, *frames = router.recv_multipart()
            message_type, body = wire.decode(frames)
            return identity, message_type, body

        identity, message_type, body = receive()
        assert message_type == wire.READY
        assert body.pop("worker_id") == f"scripted-llama-{worker.proc.pid}"
        assert body == {"model": "scripted-llama", "slots": 3,
                        "block_size": 0, "backend": "scripted", "max_model_len": 8192,
                        "tool_call_format": "llama3_json", "reasoning_format": "none"}
        start = time.monotonic()
        for _ in range(2):
            router.send_multipart([identity, wire.TAG, wire.HEARTBEAT, msgpack.packb({})])
            beat_identity, message_type, body = receive()
            assert (beat_identity, message_type, body) == (identity, wire.HEARTBEAT, {"load": 0})
        assert time.monotonic() - start < 1.5
        router.send_multipart([identity, *wire.encode(wire.DISCONNECT, {})])
        again, message_type, body = receive()
        assert message_type == wire.READY and again != identity
    finally:
        assert worker.stop() == 0, worker.output()
        context.destroy(0)


def test_pieces_never_split_a_character():
    assert scripted_worker.split_pieces("a°☀b", 1) == ["a", "°", "☀", "b"]
    assert scripted_worker.split_pieces("a°☀b", 3) == ["a°", "☀", "b"]
    assert scripted_worker.split_pieces("", 7) == []


@pytest.mark.parametrize("script, message", [
    ("{}", "non-empty JSON list"),
    ('[{"when": "", "reply": "x", "finish_reason": "cancelled"}]', "rule 0: `finish_reason` must be stop or length"),
    ('[{"when": "", "reply": "x"}, {"when": 3, "reply": "y"}]', "rule 1: `when` must be a string"),
    ('[{"when": "", "reply": "x", "then": "y"}]', "rule 0: unknown field(s) then"),
    ('[{"when": "", "reply": "x", "delay_ms": -1}]', "rule 0: `delay_ms` must be an int >= 0"),
    ("[", "Expecting"),
])
def test_a_malformed_script_is_refused_with_its_fault(tmp_path, script, message):
    path = tmp_path / "script.json"
    path.write_text(script)
    with pytest.raises(ValueError, match=re.escape(message)):
        scripted_worker.load_script(str(path))


def test_the_worker_exits_2_on_a_malformed_script(tmp_path):
    path = tmp_path / "script.json"
    path.write_text('[{"reply": "no when"}]')
    result = subprocess.run(["/usr/bin/python3", WORKER, "--broker", "tcp://127.0.0.1:1", "--model", "m",
                             "--script", str(path)], capture_output=True, text=True, timeout=20)
    assert result.returncode == 2, result.stderr
    assert "rule 0: `when` must be a string" in result.stderr
