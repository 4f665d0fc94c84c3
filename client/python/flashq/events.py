"""The typed values a client hands back: a job's token events and its final event (docs/protocol.md,
8.2 EVENT and section 7, the final map), a job's status, and the result of a whole generation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class SpecStats:
    """What speculation did: verify passes with a draft, draft tokens kept, tokens per pass."""

    draft_steps: int
    accepted_tokens: int
    tau: float


@dataclass(frozen=True)
class Timings:
    """Measured by the broker from submission (section 7)."""

    queue_ms: int
    ttft_ms: int
    total_ms: int


@dataclass(frozen=True)
class Final:
    """How a job ended: finish_reason is stop, length, cancelled, deadline, error or rejected;
    `error` says why for the last four (always for error)."""

    finish_reason: str
    usage: Usage
    spec_stats: SpecStats
    timings: Timings
    error: Optional[str] = None


@dataclass(frozen=True)
class TokenLogprob:
    """A token and its log-probability; `bytes` are the token's own (maybe part of a character)."""

    token: int
    logprob: float
    bytes: bytes


@dataclass(frozen=True)
class TokenLogprobs:
    """An output token's log-probability and the most likely tokens of its row, most likely
    first (the job's `logprobs` of them), from the target's raw distribution."""

    token: int
    logprob: float
    bytes: bytes
    top: List[TokenLogprob]


@dataclass(frozen=True)
class TokenEvent:
    """One step of a job's output: the text that became final and its token ids, numbered `seq`
    0, 1, 2, ... without gaps over the whole job."""

    job_id: str
    seq: int
    token_ids: List[int]
    text: str
    logprobs: List[TokenLogprobs] = field(default_factory=list)  # one per token id, when the job asked

    @property
    def final(self) -> Optional[Final]:
        return None


@dataclass(frozen=True)
class FinalEvent(TokenEvent):
    """The last event of a job (exactly one, nothing follows it); usually without tokens or text."""

    final: Final = None  # type: ignore[assignment]  # always set by the decoder

    @property
    def finish_reason(self) -> str:
        return self.final.finish_reason

    @property
    def usage(self) -> Usage:
        return self.final.usage

    @property
    def error(self) -> Optional[str]:
        return self.final.error


@dataclass(frozen=True)
class JobStatus:
    """STATUS_REPLY: state is queued, running, finished or unknown; `seq` the events published so
    far; `final` exactly when finished."""

    job_id: str
    state: str
    attempt: int
    seq: int
    final: Optional[Final] = None


@dataclass(frozen=True)
class ModelInfo:
    """One model of MODELS_REPLY: what the broker's connected workers serve. `max_model_len` is the
    context in tokens (0: unknown); the formats say how the model writes tool calls ("none",
    "hermes", "llama3_json") and reasoning ("none", "think", "think_in_prompt")."""

    name: str
    max_model_len: int
    tool_call_format: str
    reasoning_format: str
    workers: int
    slots: int


@dataclass
class Result:
    """A whole generation: every event's text and tokens concatenated, and how it ended.
    `incomplete` is true when the broker no longer held events this client had missed, so that
    text and token_ids lack them."""

    job_id: str
    text: str = ""
    token_ids: List[int] = field(default_factory=list)
    logprobs: List[TokenLogprobs] = field(default_factory=list)
    final: Optional[Final] = None
    incomplete: bool = False

    @property
    def finish_reason(self) -> str:
        return self.final.finish_reason if self.final else ""

    @property
    def usage(self) -> Optional[Usage]:
        return self.final.usage if self.final else None
