"""The blocking flashq client: one DEALER to the broker's frontend for submit, status, cancel and
replays, and one SUB per stream on the broker's stream socket (docs/protocol.md, 8.1 and 8.5).
A Client is meant for one thread; use one per thread (or AsyncClient in an event loop)."""

from __future__ import annotations

import time
from typing import Any, Iterator, List, Optional

import zmq

from . import wire
from .curve import as_curve_keys
from .errors import NotFound, Timeout
from .events import FinalEvent, JobStatus, ModelInfo, Result, TokenEvent
from .exchange import (Exchange, StreamState, cancel_exchange, check_from_seq, connect_socket, is_replay_unavailable,
                       models_exchange, new_job_id, oldest_kept_seq, replay_exchange, status_exchange, submit_exchange,
                       synthesized_final, timeout_message)
from .job import build_job, check_job_id

DEFAULT_FRONTEND = "tcp://127.0.0.1:5555"
DEFAULT_STREAM = "tcp://127.0.0.1:5557"
# After this long without an event, ask whether the job ended while the subscription was on its
# way (its final event then never reaches the subscriber).
STATUS_POLL_S = 1.0
# Once the broker says the job finished, its events already published are at most this far away.
FINISHED_DRAIN_S = 0.2
# Stream messages taken from the socket at once before they are delivered.
STREAM_BATCH = 256


def _check_timeout(value: Any, name: str = "timeout") -> Optional[float]:
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number of seconds or None, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return float(value)


class EventStream:
    """An iterator over one job's events in seq order, each once, ending with its FinalEvent.
    `incomplete` turns true when events this subscriber missed were no longer kept by the broker
    (the stream still ends at the final event)."""

    def __init__(self, job_id: str, from_seq: int):
        self.job_id = job_id
        self.state = StreamState(job_id, from_seq)
        self._events: Optional[Iterator[TokenEvent]] = None

    @property
    def incomplete(self) -> bool:
        return self.state.incomplete

    def __iter__(self):
        return self

    def __next__(self) -> TokenEvent:
        return next(self._events)

    def close(self) -> None:
        self._events.close()


class Client:
    """submit / stream / cancel / status / generate against one broker.

    `timeout` (seconds) bounds each request; a broker that does not answer raises Timeout and the
    client stays usable (late answers are recognised by their job id and dropped). With `curve`
    (CurveKeys, or (server_key, secret_key) as keys or key files) both sockets speak CurveZMQ."""

    def __init__(self, frontend: str = DEFAULT_FRONTEND, stream_endpoint: str = DEFAULT_STREAM, curve=None,
                 timeout: float = 5.0, context: Optional[zmq.Context] = None):
        if not isinstance(frontend, str) or not frontend:
            raise TypeError("frontend must be an endpoint string such as tcp://127.0.0.1:5555")
        if not isinstance(stream_endpoint, str) or not stream_endpoint:
            raise TypeError("stream_endpoint must be an endpoint string such as tcp://127.0.0.1:5557")
        self.frontend = frontend
        self.stream_endpoint = stream_endpoint
        self.timeout = _check_timeout(timeout)
        self._curve = as_curve_keys(curve)
        self._owns_context = context is None
        self._context = context or zmq.Context()
        self._dealer = self._socket(zmq.DEALER, frontend)

    def _socket(self, kind: int, endpoint: str, configure=None):
        return connect_socket(self._context, kind, endpoint, self._curve, configure)

    def close(self) -> None:
        """Closes the client's sockets; streams still open end with it (their sockets close)."""
        self._dealer.close(0)
        if self._owns_context:
            self._context.destroy(linger=0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # Requests.

    def _run(self, exchange: Exchange, timeout: Optional[float] = None) -> Exchange:
        timeout = self.timeout if timeout is None else timeout
        for frames in exchange.frames:
            self._dealer.send_multipart(frames)
        deadline = time.monotonic() + timeout
        while not exchange.done:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0 or not self._dealer.poll(left_ms, zmq.POLLIN):
                raise Timeout(timeout_message(exchange.request, exchange.job_id, self.frontend, timeout,
                                              self._curve is not None))
            exchange.feed(self._dealer.recv_multipart(copy=True))
        return exchange

    def submit(self, prompt=None, *, timeout: Optional[float] = None, **fields) -> str:
        """Queues a job and returns its id. Exactly one of prompt (text), prompt_tokens or
        messages (OpenAI chat messages, with tools and chat_template_kwargs); the other keyword
        arguments are the job map's fields (docs/protocol.md, section 6). Without `id` the client
        chooses one; submitting an id the broker holds returns it and changes nothing.
        Raises Rejected (Overloaded, UnknownModel, ...), a BrokerError, or Timeout."""
        job = build_job(prompt=prompt, **fields)
        job.setdefault("id", new_job_id())
        return self._run(submit_exchange(job), _check_timeout(timeout)).accepted_id()

    def status(self, job_id: str, *, timeout: Optional[float] = None) -> JobStatus:
        """Where the job stands: state queued, running, finished (with `final`) or unknown."""
        return self._run(status_exchange(job_id), _check_timeout(timeout)).status()

    def cancel(self, job_id: str, *, timeout: Optional[float] = None) -> JobStatus:
        """Cancels the job and returns its status once the broker has taken the cancel (a running
        job ends shortly after, with finish_reason cancelled). Raises NotFound for an unknown id."""
        return self._run(cancel_exchange(job_id), _check_timeout(timeout)).status()

    def models(self, *, timeout: Optional[float] = None) -> List[ModelInfo]:
        """The models the broker's connected workers serve, sorted by name: each one's context
        length (max_model_len, 0 when unknown), output formats, workers and slots."""
        return self._run(models_exchange(), _check_timeout(timeout)).models()

    def _replay(self, job_id: str, from_seq: int):
        """(status, events from from_seq, whether the broker still kept them)."""
        exchange = self._run(replay_exchange(job_id, from_seq))
        status = exchange.status(raise_error=False)
        if exchange.error is not None and not is_replay_unavailable(exchange.error):
            if status.state == "unknown":
                raise NotFound(f"job {job_id} is not known to broker {self.frontend}", job_id=job_id)
            raise exchange.error
        if exchange.error is not None:  # the older events are gone: take those still kept
            oldest = oldest_kept_seq(exchange.error)
            if oldest is not None and oldest > from_seq:
                again = self._run(replay_exchange(job_id, oldest))
                if again.error is None:
                    return again.status(), again.events, False
            return status, [], False
        return status, exchange.events, True

    # Streams.

    def stream(self, job_id: str, from_seq: int = 0, *, timeout: Optional[float] = None) -> EventStream:
        """The job's events from seq `from_seq` on, each once and in order, ending with its
        FinalEvent: the broker's replay buffer first, then the live stream, gaps replayed.
        `timeout` bounds the whole stream (None: wait for the job). Raises NotFound for a job the
        broker does not know (checked before the first event)."""
        check_job_id(job_id, "job_id")
        check_from_seq(from_seq)
        timeout = _check_timeout(timeout)
        events = EventStream(job_id, from_seq)
        subscriber = self._socket(zmq.SUB, self.stream_endpoint, lambda s: (
            s.setsockopt(zmq.RCVHWM, 0), s.setsockopt(zmq.SUBSCRIBE, wire.topic(job_id))))
        try:
            status, replayed, kept = self._replay(job_id, from_seq)
            if status.state == "unknown":
                raise NotFound(f"job {job_id} is not known to broker {self.frontend}", job_id=job_id)
        except BaseException:
            subscriber.close(0)
            raise
        events._events = self._events(subscriber, events.state, status, replayed, kept, timeout)
        return events

    def _events(self, subscriber, state: StreamState, status: JobStatus, replayed, kept: bool,
                timeout: Optional[float]):
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            pending = list(replayed)
            if not kept:
                state.skip_to(min([e.seq for e in replayed] + [status.seq]))
            while True:
                deliver, held = state.ready(pending)
                for event in deliver:
                    yield event
                if state.finished:
                    return
                if held:
                    status, replayed, kept = self._replay(state.job_id, state.expected)
                    pending = state.after_replay(replayed, kept, held)
                    continue
                pending = []
                if deadline is not None and time.monotonic() >= deadline:
                    raise Timeout(f"job {state.job_id} did not finish within {timeout:g} s")
                finished = status.state == "finished"
                wait = FINISHED_DRAIN_S if finished else STATUS_POLL_S
                if deadline is not None:
                    wait = max(0.0, min(wait, deadline - time.monotonic()))
                if subscriber.poll(int(wait * 1000), zmq.POLLIN):
                    # What has arrived, up to a batch, without a poll per event.
                    for _ in range(STREAM_BATCH):
                        try:
                            frames = subscriber.recv_multipart(zmq.NOBLOCK, copy=True)
                        except zmq.Again:
                            break
                        event = wire.read_stream_message(frames, state.job_id)
                        if event is not None:
                            pending.append(event)
                    continue
                if finished:  # the final event never reached the subscriber: from the buffer
                    status, pending, kept = self._replay(state.job_id, state.expected)
                    if not kept or not pending:
                        state.skip_to(status.seq - 1)
                        pending = [synthesized_final(status)]
                    continue
                status = self.status(state.job_id)
        finally:
            subscriber.close(0)

    def generate(self, prompt=None, *, timeout: Optional[float] = None, on_event=None, **fields) -> Result:
        """submit, then stream to the end: the whole output and how it ended. `on_event`, when
        given, is called with each event as it arrives. `timeout` bounds the whole job."""
        fields.setdefault("id", new_job_id())
        job_id = self.submit(prompt, **fields)
        result = Result(job_id=job_id)
        stream = self.stream(job_id, timeout=timeout)
        texts = []
        for event in stream:
            if on_event is not None:
                on_event(event)
            texts.append(event.text)
            result.token_ids.extend(event.token_ids)
            result.logprobs.extend(event.logprobs)
            if isinstance(event, FinalEvent):
                result.final = event.final
        result.text = "".join(texts)
        result.incomplete = stream.incomplete
        return result
