"""Typed errors: the broker's ERROR codes and REJECTED reasons, a broker that says nothing (also
how a refused CurveZMQ key shows), a broker answer this client cannot read, and arguments refused
before anything is sent."""

from __future__ import annotations

import threading

import msgpack
import pytest
import zmq

import flashq
from flashq import wire


def test_cancel_and_stream_of_an_unknown_job_raise_not_found(up):
    with up.client() as client:
        with pytest.raises(flashq.NotFound) as cancelled:
            client.cancel("py-no-such-job")
        assert cancelled.value.job_id == "py-no-such-job" and cancelled.value.code == "not_found"
        with pytest.raises(flashq.NotFound):
            client.stream("py-no-such-job")
        # The client stays in step: the next request gets its own answer.
        assert client.status("py-no-such-job").state == "unknown"


def test_a_field_the_broker_refuses_raises_protocol_error_naming_it(up):
    with up.client() as client:
        with pytest.raises(flashq.ProtocolError, match="job.stream"):
            client.submit("x", extra={"stream": "yes"})
        assert client.generate("x", max_tokens=2).finish_reason in ("length", "stop")


def test_a_full_queue_raises_overloaded_with_a_retry_hint(idle_broker):
    with idle_broker.client() as client:
        queued = [client.submit("x", max_tokens=4) for _ in range(2)]
        with pytest.raises(flashq.Overloaded) as overloaded:
            client.submit("x", max_tokens=4)
        assert isinstance(overloaded.value, flashq.Rejected)
        assert overloaded.value.reason == "overloaded"
        assert overloaded.value.retry_after_ms > 0 and overloaded.value.retry_after > 0
        # A queued job cancelled ends at once, and frees its place.
        status = client.cancel(queued[0])
        assert status.state == "finished" and status.final.finish_reason == "cancelled"
        events = list(client.stream(queued[0]))
        assert len(events) == 1 and events[0].finish_reason == "cancelled"
        assert client.submit("x", max_tokens=4)
        assert client.status(queued[1]).state == "queued"


def test_a_model_no_worker_serves_raises_unknown_model(idle_broker):
    with idle_broker.client() as client:
        with pytest.raises(flashq.UnknownModel) as unknown:
            client.submit("x", model="no-such-model")
    assert unknown.value.reason == "unknown_model" and unknown.value.retry_after_ms == 0


def test_curve_keys_on_the_allow_list_are_served_and_others_time_out(curve_broker):
    keys = curve_broker.keys
    with curve_broker.client(curve=flashq.CurveKeys.load(keys["server_public"], keys["client_secret"])) as client:
        assert client.status("py-x").state == "unknown"
        job_id = client.submit("x", max_tokens=4)
        assert client.cancel(job_id).final.finish_reason == "cancelled"
        assert [e.finish_reason for e in client.stream(job_id)] == ["cancelled"]
    for server, secret in ((keys["server_public"], keys["stranger_secret"]),  # not on the list
                           (keys["client_public"], keys["client_secret"])):  # the wrong server key
        with curve_broker.client(curve=(server, secret), timeout=0.5) as client:
            with pytest.raises(flashq.Timeout, match="allow-list"):
                client.status("py-x")
    with curve_broker.client(timeout=0.5) as plain:
        with pytest.raises(flashq.Timeout):
            plain.status("py-x")


def test_bad_keys_are_refused_before_connecting(tmp_path):
    with pytest.raises(ValueError, match="server_key"):
        flashq.CurveKeys.load("too-short", "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs")
    bad_file = tmp_path / "bad.key"
    bad_file.write_text("not a key\n")
    with pytest.raises(ValueError, match="bad.key"):
        flashq.CurveKeys.load("Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID", str(bad_file))


class FakeBroker:
    """A ROUTER that answers every request with the frames it is given."""

    def __init__(self, answer):
        self.context = zmq.Context()
        self.router = self.context.socket(zmq.ROUTER)
        port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.answer = answer
        self.requests = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopping.is_set():
            if not self.router.poll(20):
                continue
            identity, *frames = self.router.recv_multipart()
            self.requests.append(frames)
            self.router.send_multipart([identity, *self.answer])

    def close(self):
        self.stopping.set()
        self.thread.join()
        self.router.close(0)
        self.context.term()


@pytest.mark.parametrize("answer, message", [
    ([b"FQ2", wire.STATUS_REPLY, b"\x80"], "tag"),
    ([wire.TAG, b"\x7f", b"\x80"], "message type"),
    ([wire.TAG, wire.STATUS_REPLY], "3 frames"),
    ([wire.TAG, wire.STATUS_REPLY, b"\x93\x01\x02\x03"], "not a map"),
    ([wire.TAG, wire.STATUS_REPLY, b"\x82\xa2id"], "msgpack"),
    (wire.encode(wire.STATUS_REPLY, {"id": "py-x", "state": "queued", "attempt": "one", "seq": 0}), "attempt"),
    (wire.encode(wire.STATUS_REPLY, {"id": "py-x", "state": "finished", "attempt": 1, "seq": 0}), "final"),
])
def test_an_answer_that_breaks_the_protocol_raises_protocol_error(answer, message):
    broker = FakeBroker(answer)
    try:
        with flashq.Client(broker.endpoint, "tcp://127.0.0.1:1", timeout=2) as client:
            with pytest.raises(flashq.ProtocolError, match=message):
                client.status("py-x")
    finally:
        broker.close()


@pytest.mark.parametrize("models, message", [
    ("qwen", "models: must be an array"),
    ([{"name": "q", "max_model_len": 1, "workers": 1}], r"models\[0\] field slots: missing"),
    ([{"name": "q", "max_model_len": -1, "workers": 1, "slots": 1}], "max_model_len: must be >= 0"),
    ([{"name": "q", "max_model_len": 1, "workers": 1, "slots": 1, "tool_call_format": "xml"}], "tool_call_format"),
    ([{"name": "q", "max_model_len": 1, "workers": 1, "slots": 1, "reasoning_format": "yes"}], "reasoning_format"),
])
def test_a_models_reply_that_breaks_the_protocol_raises_protocol_error(models, message):
    broker = FakeBroker(wire.encode(wire.MODELS_REPLY, {"models": models}))
    try:
        with flashq.Client(broker.endpoint, "tcp://127.0.0.1:1", timeout=2) as client:
            with pytest.raises(flashq.ProtocolError, match=message):
                client.models()
            assert broker.requests[0] == wire.encode(wire.MODELS, {})
    finally:
        broker.close()


def test_a_session_travels_in_the_job_map():
    broker = FakeBroker(wire.encode(wire.ACCEPTED, {"id": "py-s1"}))
    try:
        with flashq.Client(broker.endpoint, "tcp://127.0.0.1:1", timeout=2) as client:
            assert client.submit("x", id="py-s1", session="agent-7") == "py-s1"
        tag, message_type, body = broker.requests[0]
        assert (tag, message_type) == (wire.TAG, wire.SUBMIT)
        job = msgpack.unpackb(body)["job"]
        assert job["session"] == "agent-7"
        assert "session" not in flashq.job.build_job(prompt="x"), "absent unless given"
    finally:
        broker.close()


@pytest.mark.parametrize("fields, error, name", [
    ({}, ValueError, "exactly one of prompt"),
    ({"prompt": "x", "prompt_tokens": [1]}, ValueError, "exactly one of prompt"),
    ({"prompt": ""}, ValueError, "prompt"),
    ({"prompt": b"x"}, TypeError, "prompt"),
    ({"prompt_tokens": [1, -2]}, ValueError, r"prompt_tokens\[1\]"),
    ({"messages": [{"content": "hi"}]}, TypeError, r"messages\[0\].role"),
    ({"messages": "hi"}, TypeError, "messages"),
    ({"prompt": "x", "tools": []}, ValueError, "tools"),
    ({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"tools": 1}}, ValueError,
     "chat_template_kwargs"),
    ({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"t": float("nan")}}, ValueError,
     "chat_template_kwargs.t"),
    ({"prompt": "x", "max_tokens": 0}, ValueError, "max_tokens"),
    ({"prompt": "x", "max_tokens": 2.5}, TypeError, "max_tokens"),
    ({"prompt": "x", "temperature": -1}, ValueError, "temperature"),
    ({"prompt": "x", "top_p": 1.5}, ValueError, "top_p"),
    ({"prompt": "x", "top_k": -1}, ValueError, "top_k"),
    ({"prompt": "x", "seed": -1}, ValueError, "seed"),
    ({"prompt": "x", "stop": ["a"] * 17}, ValueError, "stop"),
    ({"prompt": "x", "stop_token_ids": ["a"]}, TypeError, r"stop_token_ids\[0\]"),
    ({"prompt": "x", "priority": 1 << 31}, ValueError, "priority"),
    ({"prompt": "x", "deadline_ms": -5}, ValueError, "deadline_ms"),
    ({"prompt": "x", "spec": "fast"}, ValueError, "spec"),
    ({"prompt": "x", "block_size": 2000}, ValueError, "block_size"),
    ({"prompt": "x", "model": ""}, ValueError, "model"),
    ({"prompt": "x", "session": ""}, ValueError, "session"),
    ({"prompt": "x", "session": "s" * 257}, ValueError, "session"),
    ({"prompt": "x", "session": 7}, TypeError, "session"),
    ({"prompt": "x", "id": "has space"}, ValueError, "id"),
    ({"prompt": "x", "id": "x" * 129}, ValueError, "id"),
    ({"prompt": "x", "extra": {"max_tokens": 3}}, ValueError, "max_tokens"),
    ({"prompt": "x", "no_such_field": 1}, TypeError, "no_such_field"),
])
def test_bad_arguments_are_refused_before_anything_is_sent(fields, error, name):
    broker = FakeBroker([])
    try:
        with flashq.Client(broker.endpoint, "tcp://127.0.0.1:1", timeout=0.2) as client:
            with pytest.raises(error, match=name):
                client.submit(**fields)
            with pytest.raises((ValueError, TypeError), match="job_id"):
                client.status("")
            with pytest.raises((ValueError, TypeError), match="from_seq"):
                client.stream("py-x", from_seq=-1)
    finally:
        broker.close()
    assert broker.requests == []
