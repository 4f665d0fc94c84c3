"""The exceptions of the flashq client: one class per error code of the wire (docs/protocol.md,
section 10), one per REJECTED reason (8.2), and Timeout for a broker that did not answer.

Every failure that comes from the broker, or from a broker answer this client cannot read, is a
FlashqError; bad arguments are ValueError or TypeError naming the argument, raised before anything
is sent."""

from __future__ import annotations

from typing import Optional


class FlashqError(Exception):
    """Base of every error the broker (or its silence) causes."""


class Timeout(FlashqError):
    """No answer within the request's timeout. With CurveZMQ this is also how a refused key shows:
    the broker says nothing to a peer whose handshake failed."""


class BrokerError(FlashqError):
    """The broker answered with ERROR. `code` is the wire code as sent (unknown codes are kept);
    `job_id` the job concerned, when the broker named one."""

    code = ""

    def __init__(self, message: str, code: Optional[str] = None, job_id: Optional[str] = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.job_id = job_id

    def __str__(self) -> str:
        where = f" (job {self.job_id})" if self.job_id else ""
        return f"{self.code}{where}: {self.message}"


class ProtocolError(BrokerError):
    """A message broke the wire spec: sent by the broker about ours (code `protocol`), or found by
    this client in the broker's answer."""

    code = "protocol"


class InvalidArgument(BrokerError):
    code = "invalid_argument"


class NotFound(BrokerError):
    """The job id is unknown to the broker."""

    code = "not_found"


class Unsupported(BrokerError):
    code = "unsupported"


class InternalError(BrokerError):
    """A bug in the broker."""

    code = "internal"


class BadConfig(BrokerError):
    code = "bad_config"


class BadCheckpoint(BrokerError):
    code = "bad_checkpoint"


class BadTokenizer(BrokerError):
    code = "bad_tokenizer"


class IoError(BrokerError):
    code = "io"


class ReplayUnavailable(BrokerError):
    """The broker no longer keeps the events asked for; `oldest_seq` is named in the message."""

    code = "replay_unavailable"


_ERROR_CLASSES = {
    cls.code: cls
    for cls in (ProtocolError, InvalidArgument, NotFound, Unsupported, InternalError, BadConfig,
                BadCheckpoint, BadTokenizer, IoError, ReplayUnavailable)
}


def broker_error(code: str, message: str, job_id: Optional[str] = None) -> BrokerError:
    """The exception for an ERROR reply; a code this client does not know is a plain BrokerError."""
    cls = _ERROR_CLASSES.get(code, BrokerError)
    return cls(message, code=code, job_id=job_id)


class Rejected(FlashqError):
    """The broker answered SUBMIT with REJECTED: the job was not queued and has no stream.
    `retry_after_ms` is the broker's hint (0: do not retry as is)."""

    reason = ""

    def __init__(self, job_id: str, reason: str, retry_after_ms: int, message: Optional[str] = None):
        self.job_id = job_id
        if reason:
            self.reason = reason
        self.retry_after_ms = retry_after_ms
        self.message = message
        text = f"job {job_id} rejected: {reason}"
        if message:
            text += f": {message}"
        if retry_after_ms:
            text += f" (retry after {retry_after_ms} ms)"
        super().__init__(text)

    @property
    def retry_after(self) -> float:
        """The retry hint in seconds."""
        return self.retry_after_ms / 1000.0


class Overloaded(Rejected):
    """The broker's queue is full (jobs or prompt tokens); retry after `retry_after`."""

    reason = "overloaded"


class ShuttingDown(Rejected):
    reason = "shutting_down"


class BadDeadline(Rejected):
    reason = "bad_deadline"


class Unavailable(Rejected):
    reason = "unavailable"


class UnknownModel(Rejected):
    """No worker serves the job's `model`; the message lists the models served."""

    reason = "unknown_model"


_REJECTED_CLASSES = {cls.reason: cls for cls in (Overloaded, ShuttingDown, BadDeadline, Unavailable, UnknownModel)}


def rejected(job_id: str, reason: str, retry_after_ms: int, message: Optional[str] = None) -> Rejected:
    """The exception for a REJECTED reply; an unknown reason is a plain Rejected."""
    cls = _REJECTED_CLASSES.get(reason, Rejected)
    return cls(job_id, reason, retry_after_ms, message)
