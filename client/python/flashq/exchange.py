"""The matching of broker answers to requests, shared by the blocking and the asyncio client.

A DEALER sees every answer the broker sends it, including late ones to requests that already
timed out: each request therefore waits for the answer naming its own job id and drops the rest.
CANCEL and REPLAY have no answer of their own, so each is followed by STATUS as a barrier (the
broker handles one producer's messages in order): an ERROR about the job, and the replayed
EVENTs, arrive before the STATUS_REPLY that ends the exchange."""

from __future__ import annotations

import re
import uuid
from typing import Any, Dict, List, Optional

from . import wire
from .errors import BrokerError, FlashqError, ProtocolError, broker_error, rejected
from .events import JobStatus, ModelInfo, TokenEvent
from .job import check_job_id


def new_job_id() -> str:
    """A client-chosen id, so that a SUBMIT retried after a timeout stays idempotent and a stream
    can be subscribed to before its job is submitted."""
    return "py-" + uuid.uuid4().hex


class Exchange:
    """One request and the answers it waits for; feed() each message from the DEALER until done."""

    def __init__(self, request: str, job_id: str, frames: List[List[bytes]], ends_on: "tuple[bytes, ...]"):
        self.request = request
        self.job_id = job_id
        self.frames = frames  # the messages to send, in order
        self.ends_on = ends_on
        self.events: List[TokenEvent] = []
        self.error: Optional[FlashqError] = None
        self.reply_type: Optional[bytes] = None
        self.reply: Optional[Dict[str, Any]] = None

    @property
    def done(self) -> bool:
        return self.reply_type is not None

    def feed(self, frames) -> None:
        message_type, body = wire.decode(frames)
        if message_type == wire.ERROR:
            f = wire.Fields(body, "ERROR")
            code, message = f.get("code", str), f.get("message", str)
            job_id = f.get("id", str, required=False)
            if job_id is not None and job_id != self.job_id:
                return  # about an earlier request
            error = broker_error(code, message, job_id or self.job_id)
            if wire.STATUS_REPLY not in self.ends_on:
                self.error, self.reply_type = error, message_type  # nothing else will come
            elif self.error is None:
                self.error = error  # the status reply still follows
            return
        if message_type == wire.EVENT:
            event = wire.read_event(body)
            if event.job_id == self.job_id and self.request == "REPLAY":
                self.events.append(event)
            return
        if message_type == wire.MODELS_REPLY:
            if message_type in self.ends_on:  # it names no request: any is the current view
                self.reply_type, self.reply = message_type, body
            return
        if message_type in self.ends_on:
            job_id = wire.Fields(body, wire._TYPE_NAMES[message_type]).get("id", str)
            if job_id == self.job_id:
                self.reply_type, self.reply = message_type, body
            return
        if message_type not in (wire.ACCEPTED, wire.REJECTED, wire.STATUS_REPLY):
            raise ProtocolError(f"a producer does not receive message type {message_type!r}")

    # The outcome of each kind of request, once done.

    def accepted_id(self) -> str:
        if self.error is not None:
            raise self.error
        f = wire.Fields(self.reply, wire._TYPE_NAMES[self.reply_type])
        if self.reply_type == wire.REJECTED:
            raise rejected(f.get("id", str), f.get("reason", str), f.get("retry_after_ms", int),
                           f.get("message", str, required=False))
        return f.get("id", str)

    def status(self, raise_error: bool = True) -> JobStatus:
        if raise_error and self.error is not None:
            raise self.error
        return wire.read_status(self.reply)

    def models(self) -> List[ModelInfo]:
        if self.error is not None:
            raise self.error
        return wire.read_models(self.reply)


def submit_exchange(job: Dict[str, Any]) -> Exchange:
    return Exchange("SUBMIT", job["id"], [wire.encode(wire.SUBMIT, {"job": job})], (wire.ACCEPTED, wire.REJECTED))


def status_exchange(job_id: str) -> Exchange:
    check_job_id(job_id, "job_id")
    return Exchange("STATUS", job_id, [wire.encode(wire.STATUS, {"id": job_id})], (wire.STATUS_REPLY,))


def models_exchange() -> Exchange:
    """MODELS: no job; an ERROR without an id answers it (one naming a job is an earlier request's)."""
    return Exchange("MODELS", "", [wire.encode(wire.MODELS, {})], (wire.MODELS_REPLY,))


def cancel_exchange(job_id: str) -> Exchange:
    check_job_id(job_id, "job_id")
    return Exchange("CANCEL", job_id,
                    [wire.encode(wire.CANCEL, {"id": job_id}), wire.encode(wire.STATUS, {"id": job_id})],
                    (wire.STATUS_REPLY,))


def replay_exchange(job_id: str, from_seq: int) -> Exchange:
    return Exchange("REPLAY", job_id, [wire.encode(wire.REPLAY, {"id": job_id, "from_seq": from_seq}),
                                       wire.encode(wire.STATUS, {"id": job_id})], (wire.STATUS_REPLY,))


def check_from_seq(from_seq: Any) -> int:
    if not isinstance(from_seq, int) or isinstance(from_seq, bool):
        raise TypeError(f"from_seq must be an int, got {type(from_seq).__name__}")
    if from_seq < 0:
        raise ValueError(f"from_seq must be >= 0, got {from_seq}")
    return from_seq


def timeout_message(request: str, job_id: str, endpoint: str, timeout: float, curve: bool) -> str:
    text = f"{request}{f' for job {job_id}' if job_id else ''}: no answer from {endpoint} within {timeout:g} s"
    if curve:
        text += " (with CurveZMQ: is the server key right, and is this client's public key on the broker's allow-list?)"
    return text


def connect_socket(context, kind: int, endpoint: str, curve=None, configure=None):
    """A socket of `kind` on `context` (blocking or asyncio), closing at once when closed, with the
    client's CurveZMQ keys when it has them, connected to `endpoint`. `configure` sets options
    that must precede the connect (a SUB's subscription)."""
    socket = context.socket(kind)
    socket.linger = 0
    if curve is not None:
        curve.apply(socket)
    if configure is not None:
        configure(socket)
    socket.connect(endpoint)
    return socket


class StreamState:
    """The next expected seq of one job's stream and what to do with each event (docs/protocol.md,
    8.5): drop a duplicate, deliver the expected one, ask for a replay on a gap."""

    def __init__(self, job_id: str, from_seq: int):
        self.job_id = job_id
        self.expected = from_seq
        self.incomplete = False
        self.finished = False

    def take(self, event: TokenEvent) -> bool:
        """True when `event` is the expected one (deliver it); False for a duplicate."""
        if event.seq < self.expected or self.finished:
            return False
        if event.seq > self.expected:
            raise ValueError(f"event {event.seq} of job {self.job_id} comes before {self.expected}")
        self.expected = event.seq + 1
        self.finished = event.final is not None
        return True

    def skip_to(self, seq: int) -> None:
        """The events before `seq` are gone (the broker no longer keeps them)."""
        if seq > self.expected:
            self.incomplete = True
            self.expected = seq

    def ready(self, pending: List[TokenEvent]):
        """`pending` (in any order) split at the first gap: the events to deliver now, in seq order
        (duplicates dropped, nothing after the final event), and those beyond the gap, which wait
        for its replay (a final event the broker also sent to the DEALER may come early, and a slow
        subscriber loses events to the high-water mark)."""
        deliver: List[TokenEvent] = []
        ordered = sorted(pending, key=lambda e: e.seq)
        for i, event in enumerate(ordered):
            if event.seq > self.expected:
                return deliver, ordered[i:]
            if self.take(event):
                deliver.append(event)
            if self.finished:
                break
        return deliver, []

    def after_replay(self, replayed: List[TokenEvent], kept: bool, held: List[TokenEvent]) -> List[TokenEvent]:
        """The events to go on with once the gap before `held` was asked again: the replay, then
        what was held. `kept`: the broker still had the gap's start; when it had not, what it
        no longer keeps is skipped."""
        if not kept:
            self.skip_to(min([e.seq for e in replayed] + [held[0].seq]))
        elif not replayed or min(e.seq for e in replayed) != self.expected:
            raise ProtocolError(f"REPLAY of job {self.job_id} from seq {self.expected} was answered "
                                f"without it, although seq {held[0].seq} was published")
        return replayed + held


def synthesized_final(status: JobStatus):
    """The final event of a finished job whose own final event is no longer kept: the status
    reply's final map, at the last seq the job published."""
    from .events import FinalEvent
    return FinalEvent(job_id=status.job_id, seq=max(status.seq - 1, 0), token_ids=[], text="", final=status.final)


def is_replay_unavailable(error: Optional[BrokerError]) -> bool:
    return error is not None and getattr(error, "code", "") == "replay_unavailable"


def oldest_kept_seq(error: BrokerError) -> Optional[int]:
    """The first seq the broker still keeps, as its replay_unavailable message names it."""
    match = re.search(r"kept from seq (\d+)", getattr(error, "message", ""))
    return int(match.group(1)) if match else None
