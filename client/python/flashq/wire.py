"""The frames of the FQ1 wire (docs/protocol.md, sections 2-4): the tag, the type bytes, msgpack
bodies, and the decoding of what the broker sends a producer or a subscriber into typed values.

What the broker sends is checked as strictly as the spec asks of any receiver (frame count, tag,
type, one msgpack map, field types); anything else is a ProtocolError, never a KeyError."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

import msgpack

from .errors import ProtocolError
from .events import (Final, FinalEvent, JobStatus, ModelInfo, SpecStats, Timings, TokenEvent, TokenLogprob,
                     TokenLogprobs, Usage)

TAG = b"FQ1"
MAX_BODY_BYTES = 16 << 20

# Message types (section 3), as the one byte of frame 1.
CANCEL = b"\x04"
ERROR = b"\x03"
SUBMIT = b"\x10"
STATUS = b"\x11"
REPLAY = b"\x12"
MODELS = b"\x13"
ACCEPTED = b"\x20"
REJECTED = b"\x21"
STATUS_REPLY = b"\x22"
EVENT = b"\x23"
MODELS_REPLY = b"\x24"
# Worker messages, for tools that speak the worker's side (the subscriber benchmark).
HEARTBEAT = b"\x01"
DISCONNECT = b"\x02"
READY = b"\x30"
TOKENS = b"\x31"
FINAL = b"\x32"
ASSIGN = b"\x40"

_KNOWN_TYPES = {HEARTBEAT, DISCONNECT, ERROR, CANCEL, SUBMIT, STATUS, REPLAY, MODELS, ACCEPTED, REJECTED,
                STATUS_REPLY, EVENT, MODELS_REPLY, READY, TOKENS, FINAL, ASSIGN}
_TYPE_NAMES = {ERROR: "ERROR", ACCEPTED: "ACCEPTED", REJECTED: "REJECTED", STATUS_REPLY: "STATUS_REPLY",
               MODELS_REPLY: "MODELS_REPLY",
               EVENT: "EVENT", ASSIGN: "ASSIGN", HEARTBEAT: "HEARTBEAT", DISCONNECT: "DISCONNECT", CANCEL: "CANCEL"}

TOPIC_PREFIX = "job/"


def encode(message_type: bytes, body: Dict[str, Any]) -> List[bytes]:
    """The three frames of a message (a DEALER sends nothing in front of them)."""
    return [TAG, message_type, msgpack.packb(body, use_bin_type=True)]


def topic(job_id: str) -> bytes:
    return (TOPIC_PREFIX + job_id).encode("ascii")


def _no_duplicate_keys(pairs):
    result = {}
    for key, value in pairs:
        if not isinstance(key, str):
            raise ProtocolError(f"map key {key!r} is not a string")
        if key in result:
            raise ProtocolError(f"key {key!r} appears twice in one map")
        result[key] = value
    return result


def decode(frames: Sequence[bytes]) -> "tuple[bytes, Dict[str, Any]]":
    """(type byte, body map) of a three-frame message, checked in the spec's order."""
    if len(frames) != 3:
        raise ProtocolError(f"a message has 3 frames, got {len(frames)}")
    tag, message_type, body = frames
    if tag != TAG:
        raise ProtocolError(f"frame 0 is not the tag FQ1: {bytes(tag)[:16]!r}")
    if len(message_type) != 1 or message_type not in _KNOWN_TYPES:
        raise ProtocolError(f"frame 1 is not a message type: {bytes(message_type)[:16]!r}")
    if len(body) > MAX_BODY_BYTES:
        raise ProtocolError(f"body of {len(body)} bytes is over the 16 MiB limit")
    try:
        value = msgpack.unpackb(body, raw=False, unicode_errors="surrogateescape", strict_map_key=True,
                                object_pairs_hook=_no_duplicate_keys)
    except ProtocolError:
        raise
    except (ValueError, msgpack.UnpackException) as e:  # truncated, extra bytes, bad encoding
        raise ProtocolError(f"{_TYPE_NAMES.get(bytes(message_type), 'message')} body is not one msgpack value: {e}")
    if not isinstance(value, dict):
        raise ProtocolError(f"{_TYPE_NAMES.get(bytes(message_type), 'message')} body is not a map")
    return bytes(message_type), value


class Fields:
    """Typed reads of one body map; a missing or ill-typed field is a ProtocolError naming the
    message type and the field. nil is absence (section 4)."""

    def __init__(self, body: Dict[str, Any], where: str):
        self.body = body
        self.where = where

    def _fail(self, key: str, what: str):
        raise ProtocolError(f"{self.where} field {key}: {what}")

    def get(self, key: str, kind, required: bool = True, default=None):
        value = self.body.get(key)
        if value is None:
            if required:
                self._fail(key, "missing")
            return default
        if kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, kind)
        if not ok:
            self._fail(key, f"must be {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
        if kind in (int, float) and value < 0 and key not in ("priority",):
            self._fail(key, f"must be >= 0, got {value}")
        return float(value) if kind is float else value

    def sub(self, key: str, required: bool = True) -> "Optional[Fields]":
        value = self.get(key, dict, required)
        return None if value is None else Fields(value, f"{self.where}.{key}")

    def token_ids(self, key: str) -> List[int]:
        ids = self.get(key, list)
        for i in ids:
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i <= 0x7FFFFFFF:
                self._fail(key, f"{i!r} is not a token id")
        return ids


def read_final(f: Fields) -> Final:
    usage = f.sub("usage")
    spec = f.sub("spec_stats")
    timings = f.sub("timings")
    return Final(
        finish_reason=f.get("finish_reason", str),
        usage=Usage(prompt_tokens=usage.get("prompt_tokens", int),
                    completion_tokens=usage.get("completion_tokens", int)),
        spec_stats=SpecStats(draft_steps=spec.get("draft_steps", int), accepted_tokens=spec.get("accepted_tokens", int),
                             tau=spec.get("tau", float)),
        timings=Timings(queue_ms=timings.get("queue_ms", int), ttft_ms=timings.get("ttft_ms", int),
                        total_ms=timings.get("total_ms", int)),
        error=f.get("error", str, required=False),
    )


def read_logprob(f: Fields) -> TokenLogprob:
    logprob = f.body.get("logprob")
    if isinstance(logprob, bool) or not isinstance(logprob, (int, float)) or not math.isfinite(logprob) \
            or logprob > 1e-3:  # a rounding step above 0 is kept as 0
        f._fail("logprob", f"must be a finite number <= 0, got {logprob!r}")
    return TokenLogprob(token=f.get("token", int), logprob=min(float(logprob), 0.0), bytes=f.get("bytes", bytes))


def read_logprobs(f: Fields, token_count: int) -> List[TokenLogprobs]:
    """EVENT `logprobs` (docs/protocol.md, "Log-probabilities"): absent, or one per token id."""
    entries = f.get("logprobs", list, required=False, default=[])
    if entries and len(entries) != token_count:
        raise ProtocolError(f"EVENT field logprobs: {len(entries)} entries for {token_count} token ids")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ProtocolError(f"EVENT field logprobs[{i}]: must be a map")
        token = Fields(entry, f"EVENT.logprobs[{i}]")
        chosen = read_logprob(token)
        top = token.get("top", list)
        for j, candidate in enumerate(top):
            if not isinstance(candidate, dict):
                raise ProtocolError(f"EVENT field logprobs[{i}].top[{j}]: must be a map")
        out.append(TokenLogprobs(token=chosen.token, logprob=chosen.logprob, bytes=chosen.bytes,
                                 top=[read_logprob(Fields(c, f"EVENT.logprobs[{i}].top[{j}]")) for j, c in enumerate(top)]))
    return out


def read_event(body: Dict[str, Any]):
    """A TokenEvent, or a FinalEvent when the body carries `final`."""
    f = Fields(body, "EVENT")
    job_id = f.get("id", str)
    seq = f.get("seq", int)
    token_ids = f.token_ids("token_ids")
    text = f.get("text", str)
    logprobs = read_logprobs(f, len(token_ids))
    final = f.sub("final", required=False)
    if final is None:
        return TokenEvent(job_id=job_id, seq=seq, token_ids=token_ids, text=text, logprobs=logprobs)
    return FinalEvent(job_id=job_id, seq=seq, token_ids=token_ids, text=text, logprobs=logprobs,
                      final=read_final(final))


def read_status(body: Dict[str, Any]) -> JobStatus:
    f = Fields(body, "STATUS_REPLY")
    state = f.get("state", str)
    final = f.sub("final", required=False)
    if (final is not None) != (state == "finished"):
        raise ProtocolError(f"STATUS_REPLY field final: present exactly when state is finished (state {state})")
    return JobStatus(job_id=f.get("id", str), state=state, attempt=f.get("attempt", int), seq=f.get("seq", int),
                     final=None if final is None else read_final(final))


TOOL_CALL_FORMATS = ("none", "hermes", "llama3_json")
REASONING_FORMATS = ("none", "think", "think_in_prompt")


def read_models(body: Dict[str, Any]) -> List[ModelInfo]:
    """MODELS_REPLY's models (section 8.2): each a map; the formats one of the names of 8.6."""
    models = body.get("models")
    if not isinstance(models, list):
        raise ProtocolError(f"MODELS_REPLY field models: must be an array, got {type(models).__name__}")
    result = []
    for i, entry in enumerate(models):
        where = f"MODELS_REPLY field models[{i}]"
        if not isinstance(entry, dict):
            raise ProtocolError(f"{where}: must be a map, got {type(entry).__name__}")
        f = Fields(entry, where)
        tool_calls = f.get("tool_call_format", str, required=False, default="none")
        reasoning = f.get("reasoning_format", str, required=False, default="none")
        if tool_calls not in TOOL_CALL_FORMATS:
            raise ProtocolError(f"{where}.tool_call_format: must be one of {', '.join(TOOL_CALL_FORMATS)}")
        if reasoning not in REASONING_FORMATS:
            raise ProtocolError(f"{where}.reasoning_format: must be one of {', '.join(REASONING_FORMATS)}")
        result.append(ModelInfo(name=f.get("name", str), max_model_len=f.get("max_model_len", int),
                                tool_call_format=tool_calls, reasoning_format=reasoning,
                                workers=f.get("workers", int), slots=f.get("slots", int)))
    return result


def read_stream_message(frames: Sequence[bytes], job_id: str):
    """The event of a four-frame stream message for `job_id`, or None for another job's (a
    subscription is a prefix match). A malformed message is a ProtocolError."""
    if len(frames) != 4:
        raise ProtocolError(f"a stream message has 4 frames, got {len(frames)}")
    if bytes(frames[0]) != topic(job_id):
        return None
    message_type, body = decode(frames[1:])
    if message_type != EVENT:
        raise ProtocolError(f"stream message of type {message_type!r} is not an EVENT")
    event = read_event(body)
    if event.job_id != job_id:
        raise ProtocolError(f"EVENT field id: {event.job_id!r} on the topic of {job_id!r}")
    return event
