"""flashq: the Python client of the flashq broker (docs/python.md).

    from flashq import Client
    with Client("tcp://127.0.0.1:5555", "tcp://127.0.0.1:5557") as client:
        result = client.generate("def parse_header(line):", max_tokens=24)

Client is blocking, AsyncClient its asyncio twin; both speak the FQ1 wire (docs/protocol.md) over
ZeroMQ, optionally with CurveZMQ keys (CurveKeys)."""

# The package's version (client/python/pyproject.toml reads it from here). It changes with the
# package's API; the wire it speaks is versioned separately by its tag (FQ1).
__version__ = "0.1.0"

from .aio import AsyncClient, AsyncEventStream
from .client import Client, EventStream
from .curve import CurveKeys
from .errors import (BadCheckpoint, BadConfig, BadDeadline, BadTokenizer, BrokerError, FlashqError, InternalError,
                     InvalidArgument, IoError, NotFound, Overloaded, ProtocolError, Rejected, ReplayUnavailable,
                     ShuttingDown, Timeout, Unavailable, UnknownModel, Unsupported)
from .events import (Final, FinalEvent, JobStatus, ModelInfo, Result, SpecStats, Timings, TokenEvent, TokenLogprob,
                     TokenLogprobs, Usage)

__all__ = [
    "AsyncClient", "AsyncEventStream", "Client", "EventStream", "CurveKeys",
    "FlashqError", "Timeout", "BrokerError", "ProtocolError", "InvalidArgument", "NotFound", "Unsupported",
    "InternalError", "BadConfig", "BadCheckpoint", "BadTokenizer", "IoError", "ReplayUnavailable",
    "Rejected", "Overloaded", "ShuttingDown", "BadDeadline", "Unavailable", "UnknownModel",
    "Final", "FinalEvent", "JobStatus", "ModelInfo", "Result", "SpecStats", "Timings", "TokenEvent", "TokenLogprob",
    "TokenLogprobs", "Usage",
]
