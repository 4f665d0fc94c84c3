"""The asyncio twin of Client (zmq.asyncio): the same methods, awaited, and `stream` an async
iterator. Requests from concurrent tasks take turns on the one DEALER (a lock per exchange), so
one AsyncClient may serve many tasks; each stream has its own SUB socket."""

from __future__ import annotations

import asyncio
import time
from typing import List, Optional

import zmq
import zmq.asyncio

from . import wire
from .client import DEFAULT_FRONTEND, DEFAULT_STREAM, FINISHED_DRAIN_S, STATUS_POLL_S, STREAM_BATCH, _check_timeout
from .curve import as_curve_keys
from .errors import NotFound, Timeout
from .events import FinalEvent, JobStatus, ModelInfo, Result
from .exchange import (Exchange, StreamState, cancel_exchange, check_from_seq, connect_socket, is_replay_unavailable,
                       models_exchange, new_job_id, oldest_kept_seq, replay_exchange, status_exchange, submit_exchange,
                       synthesized_final, timeout_message)
from .job import build_job, check_job_id


class AsyncEventStream:
    """An async iterator over one job's events (see EventStream)."""

    def __init__(self, job_id: str, from_seq: int):
        self.job_id = job_id
        self.state = StreamState(job_id, from_seq)
        self._events = None

    @property
    def incomplete(self) -> bool:
        return self.state.incomplete

    def __aiter__(self):
        return self

    async def __anext__(self):
        return await self._events.__anext__()

    async def aclose(self) -> None:
        await self._events.aclose()


class AsyncClient:
    """Client's methods as coroutines; see Client for their meaning."""

    def __init__(self, frontend: str = DEFAULT_FRONTEND, stream_endpoint: str = DEFAULT_STREAM, curve=None,
                 timeout: float = 5.0, context: Optional[zmq.asyncio.Context] = None):
        if not isinstance(frontend, str) or not frontend:
            raise TypeError("frontend must be an endpoint string such as tcp://127.0.0.1:5555")
        if not isinstance(stream_endpoint, str) or not stream_endpoint:
            raise TypeError("stream_endpoint must be an endpoint string such as tcp://127.0.0.1:5557")
        self.frontend = frontend
        self.stream_endpoint = stream_endpoint
        self.timeout = _check_timeout(timeout)
        self._curve = as_curve_keys(curve)
        self._owns_context = context is None
        self._context = context or zmq.asyncio.Context()
        self._dealer = self._socket(zmq.DEALER, frontend)
        self._lock = asyncio.Lock()

    def _socket(self, kind: int, endpoint: str, configure=None):
        return connect_socket(self._context, kind, endpoint, self._curve, configure)

    def close(self) -> None:
        """Closes the client's sockets; streams still open end with it (their sockets close)."""
        self._dealer.close(0)
        if self._owns_context:
            self._context.destroy(linger=0)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()

    async def _run(self, exchange: Exchange, timeout: Optional[float] = None) -> Exchange:
        timeout = self.timeout if timeout is None else timeout
        async with self._lock:
            for frames in exchange.frames:
                await self._dealer.send_multipart(frames)
            deadline = time.monotonic() + timeout
            while not exchange.done:
                left_ms = int((deadline - time.monotonic()) * 1000)
                if left_ms <= 0 or not await self._dealer.poll(left_ms, zmq.POLLIN):
                    raise Timeout(timeout_message(exchange.request, exchange.job_id, self.frontend, timeout,
                                                  self._curve is not None))
                exchange.feed(await self._dealer.recv_multipart(copy=True))
        return exchange

    async def submit(self, prompt=None, *, timeout: Optional[float] = None, **fields) -> str:
        job = build_job(prompt=prompt, **fields)
        job.setdefault("id", new_job_id())
        return (await self._run(submit_exchange(job), _check_timeout(timeout))).accepted_id()

    async def status(self, job_id: str, *, timeout: Optional[float] = None) -> JobStatus:
        return (await self._run(status_exchange(job_id), _check_timeout(timeout))).status()

    async def cancel(self, job_id: str, *, timeout: Optional[float] = None) -> JobStatus:
        return (await self._run(cancel_exchange(job_id), _check_timeout(timeout))).status()

    async def models(self, *, timeout: Optional[float] = None) -> List[ModelInfo]:
        return (await self._run(models_exchange(), _check_timeout(timeout))).models()

    async def _replay(self, job_id: str, from_seq: int):
        exchange = await self._run(replay_exchange(job_id, from_seq))
        status = exchange.status(raise_error=False)
        if exchange.error is not None and not is_replay_unavailable(exchange.error):
            if status.state == "unknown":
                raise NotFound(f"job {job_id} is not known to broker {self.frontend}", job_id=job_id)
            raise exchange.error
        if exchange.error is not None:  # the older events are gone: take those still kept
            oldest = oldest_kept_seq(exchange.error)
            if oldest is not None and oldest > from_seq:
                again = await self._run(replay_exchange(job_id, oldest))
                if again.error is None:
                    return again.status(), again.events, False
            return status, [], False
        return status, exchange.events, True

    async def stream(self, job_id: str, from_seq: int = 0, *, timeout: Optional[float] = None) -> AsyncEventStream:
        """`async for event in await client.stream(id)`: as Client.stream."""
        check_job_id(job_id, "job_id")
        check_from_seq(from_seq)
        timeout = _check_timeout(timeout)
        events = AsyncEventStream(job_id, from_seq)
        subscriber = self._socket(zmq.SUB, self.stream_endpoint, lambda s: (
            s.setsockopt(zmq.RCVHWM, 0), s.setsockopt(zmq.SUBSCRIBE, wire.topic(job_id))))
        try:
            status, replayed, kept = await self._replay(job_id, from_seq)
            if status.state == "unknown":
                raise NotFound(f"job {job_id} is not known to broker {self.frontend}", job_id=job_id)
        except BaseException:
            subscriber.close(0)
            raise
        events._events = self._events(subscriber, events.state, status, replayed, kept, timeout)
        return events

    async def _events(self, subscriber, state: StreamState, status: JobStatus, replayed, kept: bool,
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
                    status, replayed, kept = await self._replay(state.job_id, state.expected)
                    pending = state.after_replay(replayed, kept, held)
                    continue
                pending = []
                if deadline is not None and time.monotonic() >= deadline:
                    raise Timeout(f"job {state.job_id} did not finish within {timeout:g} s")
                finished = status.state == "finished"
                wait = FINISHED_DRAIN_S if finished else STATUS_POLL_S
                if deadline is not None:
                    wait = max(0.0, min(wait, deadline - time.monotonic()))
                if await subscriber.poll(int(wait * 1000), zmq.POLLIN):
                    for _ in range(STREAM_BATCH):  # what has arrived, without a poll per event
                        try:
                            frames = await subscriber.recv_multipart(zmq.NOBLOCK, copy=True)
                        except zmq.Again:
                            break
                        event = wire.read_stream_message(frames, state.job_id)
                        if event is not None:
                            pending.append(event)
                    continue
                if finished:  # the final event never reached the subscriber: from the buffer
                    status, pending, kept = await self._replay(state.job_id, state.expected)
                    if not kept or not pending:
                        state.skip_to(status.seq - 1)
                        pending = [synthesized_final(status)]
                    continue
                status = await self.status(state.job_id)
        finally:
            subscriber.close(0)

    async def generate(self, prompt=None, *, timeout: Optional[float] = None, on_event=None, **fields) -> Result:
        fields.setdefault("id", new_job_id())
        job_id = await self.submit(prompt, **fields)
        result = Result(job_id=job_id)
        stream = await self.stream(job_id, timeout=timeout)
        texts = []
        async for event in stream:
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
