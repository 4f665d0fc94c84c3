"""The job map of SUBMIT (docs/protocol.md, section 6), built from keyword arguments and checked
against the spec's types and limits (section 5) before anything is sent: a bad argument is a
TypeError (wrong type) or ValueError (out of range) naming it, so the broker never has to refuse
what this client could have known was wrong."""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence

import msgpack

MAX_ID_BYTES = 128
MAX_MODEL_BYTES = 256
MAX_SESSION_BYTES = 256
MAX_PROMPT_BYTES = 1 << 20
MAX_PROMPT_TOKENS = 262_144
MAX_MESSAGES = 4096
MAX_TOOL_CALLS = 128
MAX_TOOLS = 512
MAX_TOOLS_BYTES = 1 << 20
MAX_TEMPLATE_OPTIONS = 64
MAX_TEMPLATE_OPTIONS_BYTES = 64 << 10
MAX_STOP_STRINGS = 16
MAX_STOP_STRING_BYTES = 1024
MAX_STOP_TOKEN_IDS = 1024
MAX_MAX_TOKENS = 1_000_000
MAX_BLOCK_SIZE = 1024
MAX_DEADLINE_MS = 0xFFFFFFFF
MAX_TOKEN_ID = 0x7FFFFFFF
MAX_TOP_LOGPROBS = 20
SPEC_MODES = ("auto", "off", "dflash")
_RESERVED_TEMPLATE_OPTIONS = ("messages", "tools", "add_generation_prompt")


def check_job_id(value: Any, name: str = "id") -> str:
    """A job id: 1..128 printable ASCII bytes without space (they appear in topics and keys)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_ID_BYTES or not all(0x21 <= ord(c) <= 0x7E for c in value):
        raise ValueError(f"{name} must be 1..128 printable ASCII characters without space, got {value!r}")
    return value


def _int(name: str, value: Any, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in {low}..{high}, got {value}")
    return value


def _number(name: str, value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def _str(name: str, value: Any, low: int, high: int) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    size = len(value.encode("utf-8", "surrogateescape"))
    if not low <= size <= high:
        raise ValueError(f"{name} must be {low}..{high} bytes, got {size}")
    return value


def _token_ids(name: str, value: Any, low: int, high: int) -> list:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of token ids, got {type(value).__name__}")
    if not low <= len(value) <= high:
        raise ValueError(f"{name} must hold {low}..{high} token ids, got {len(value)}")
    for i, token in enumerate(value):
        _int(f"{name}[{i}]", token, 0, MAX_TOKEN_ID)
    return list(value)


def _json_like(name: str, value: Any) -> Any:
    """JSON-like values (section 6): nil, bool, int, finite float, str, lists, str-keyed maps."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 64):
            raise ValueError(f"{name} is out of msgpack's integer range")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value}")
        return value
    if isinstance(value, (list, tuple)):
        return [_json_like(f"{name}[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{name} has a key that is not a str: {k!r}")
            out[k] = _json_like(f"{name}.{k}", v)
        return out
    raise TypeError(f"{name} must be JSON-like (None, bool, int, float, str, list, dict), got {type(value).__name__}")


def _message(name: str, message: Any) -> Dict[str, Any]:
    if not isinstance(message, Mapping):
        raise TypeError(f"{name} must be a dict (an OpenAI chat message), got {type(message).__name__}")
    out: Dict[str, Any] = {"role": _str(f"{name}.role", message.get("role"), 1, 128)}
    tool_calls = message.get("tool_calls")
    content = message.get("content")
    if content is None:
        if tool_calls is None:
            raise ValueError(f"{name}.content is required (it may be empty) unless the message has tool_calls")
    else:
        out["content"] = _str(f"{name}.content", content, 0, MAX_PROMPT_BYTES)
    if tool_calls is not None:
        if not isinstance(tool_calls, (list, tuple)):
            raise TypeError(f"{name}.tool_calls must be a list")
        if len(tool_calls) > MAX_TOOL_CALLS:
            raise ValueError(f"{name}.tool_calls holds at most {MAX_TOOL_CALLS} calls, got {len(tool_calls)}")
        calls = []
        for i, call in enumerate(tool_calls):
            where = f"{name}.tool_calls[{i}]"
            if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
                raise TypeError(f"{where} must be a dict with a function dict")
            function = call["function"]
            if "arguments" not in function:
                raise ValueError(f"{where}.function.arguments is required")
            entry: Dict[str, Any] = {}
            if call.get("id") is not None:
                entry["id"] = _str(f"{where}.id", call["id"], 1, 256)
            if call.get("type") is not None:
                entry["type"] = _str(f"{where}.type", call["type"], 1, 128)
            entry["function"] = {"name": _str(f"{where}.function.name", function.get("name"), 1, 256),
                                 "arguments": _json_like(f"{where}.function.arguments", function["arguments"])}
            calls.append(entry)
        out["tool_calls"] = calls
    for key, high in (("tool_call_id", 256), ("name", 256), ("reasoning_content", MAX_PROMPT_BYTES)):
        if message.get(key) is not None:
            out[key] = _str(f"{name}.{key}", message[key], 1 if high == 256 else 0, high)
    return out


def build_job(*, prompt: Optional[str] = None, prompt_tokens: Optional[Sequence[int]] = None,
              messages: Optional[Sequence[Mapping[str, Any]]] = None, tools: Optional[Sequence[Mapping]] = None,
              chat_template_kwargs: Optional[Mapping[str, Any]] = None, add_generation_prompt: Optional[bool] = None,
              max_tokens: int = 256, temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0, seed: int = 0,
              stop: Iterable[str] = (), stop_token_ids: Iterable[int] = (), priority: int = 0, deadline_ms: int = 0,
              spec: str = "auto", block_size: int = 0, model: Optional[str] = None, id: Optional[str] = None,
              session: Optional[str] = None, metadata: Any = None, logprobs: Optional[int] = None,
              extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The job map for SUBMIT, every field written (defaults included, as the spec asks of
    encoders). `session` names the conversation the job continues, so that the broker sends it to
    the worker whose caches hold its earlier turns. `logprobs` (0..20) asks for each output
    token's log-probability and that many most likely tokens with it (TokenEvent.logprobs). `extra` carries optional keys newer than this
    client, unchecked."""
    given = [name for name, value in (("prompt", prompt), ("prompt_tokens", prompt_tokens), ("messages", messages))
             if value is not None]
    if len(given) != 1:
        raise ValueError("exactly one of prompt, prompt_tokens, messages must be given"
                         + (f", got {' and '.join(given)}" if given else ""))
    job: Dict[str, Any] = {}
    if id is not None:
        job["id"] = check_job_id(id)
    if prompt is not None:
        job["prompt"] = _str("prompt", prompt, 1, MAX_PROMPT_BYTES)
    elif prompt_tokens is not None:
        job["prompt_tokens"] = _token_ids("prompt_tokens", prompt_tokens, 1, MAX_PROMPT_TOKENS)
    else:
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
            raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
        if not 1 <= len(messages) <= MAX_MESSAGES:
            raise ValueError(f"messages must hold 1..{MAX_MESSAGES} messages, got {len(messages)}")
        job["messages"] = [_message(f"messages[{i}]", m) for i, m in enumerate(messages)]
        text_bytes = sum(len(m.get("content", "").encode("utf-8", "surrogateescape")) for m in job["messages"])
        if text_bytes > MAX_PROMPT_BYTES:
            raise ValueError(f"messages hold {text_bytes} bytes of content, over the 1 MiB limit")
    for name, value in (("tools", tools), ("chat_template_kwargs", chat_template_kwargs),
                        ("add_generation_prompt", add_generation_prompt)):
        if value is not None and messages is None:
            raise ValueError(f"{name} is only for a job with messages")
    if tools is not None:
        if not isinstance(tools, (list, tuple)):
            raise TypeError(f"tools must be a list of tool definitions, got {type(tools).__name__}")
        if len(tools) > MAX_TOOLS:
            raise ValueError(f"tools holds at most {MAX_TOOLS} definitions, got {len(tools)}")
        checked = []
        for i, tool in enumerate(tools):
            if not isinstance(tool, Mapping):
                raise TypeError(f"tools[{i}] must be a dict")
            _str(f"tools[{i}].type", tool.get("type"), 1, 128)
            if tool["type"] == "function":
                if not isinstance(tool.get("function"), Mapping):
                    raise TypeError(f"tools[{i}].function must be a dict")
                _str(f"tools[{i}].function.name", tool["function"].get("name"), 1, 256)
            checked.append(_json_like(f"tools[{i}]", tool))
        if len(msgpack.packb(checked)) > MAX_TOOLS_BYTES:
            raise ValueError("tools are over the 1 MiB limit")
        job["tools"] = checked
    if chat_template_kwargs is not None:
        if not isinstance(chat_template_kwargs, Mapping):
            raise TypeError(f"chat_template_kwargs must be a dict, got {type(chat_template_kwargs).__name__}")
        if len(chat_template_kwargs) > MAX_TEMPLATE_OPTIONS:
            raise ValueError(f"chat_template_kwargs holds at most {MAX_TEMPLATE_OPTIONS} options")
        for key in chat_template_kwargs:
            if isinstance(key, str):
                _str(f"chat_template_kwargs key {key!r}", key, 1, 128)
            if key in _RESERVED_TEMPLATE_OPTIONS:
                raise ValueError(f"chat_template_kwargs may not name {key!r}")
        options = _json_like("chat_template_kwargs", chat_template_kwargs)
        if len(msgpack.packb(options)) > MAX_TEMPLATE_OPTIONS_BYTES:
            raise ValueError("chat_template_kwargs are over the 64 KiB limit")
        job["chat_template_kwargs"] = options
    if add_generation_prompt is not None:
        if not isinstance(add_generation_prompt, bool):
            raise TypeError("add_generation_prompt must be a bool")
        job["add_generation_prompt"] = add_generation_prompt
    job["max_tokens"] = _int("max_tokens", max_tokens, 1, MAX_MAX_TOKENS)
    if _number("temperature", temperature) < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    job["temperature"] = temperature
    if not 0 < _number("top_p", top_p) <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    job["top_p"] = top_p
    job["top_k"] = _int("top_k", top_k, 0, MAX_TOKEN_ID)
    job["seed"] = _int("seed", seed, 0, (1 << 64) - 1)
    if isinstance(stop, str):
        stop = [stop]  # one stop string, as the OpenAI API allows
    stop = list(stop)
    if len(stop) > MAX_STOP_STRINGS:
        raise ValueError(f"stop holds at most {MAX_STOP_STRINGS} strings, got {len(stop)}")
    job["stop"] = [_str(f"stop[{i}]", s, 1, MAX_STOP_STRING_BYTES) for i, s in enumerate(stop)]
    job["stop_token_ids"] = _token_ids("stop_token_ids", list(stop_token_ids), 0, MAX_STOP_TOKEN_IDS)
    job["priority"] = _int("priority", priority, -(1 << 31), (1 << 31) - 1)
    job["deadline_ms"] = _int("deadline_ms", deadline_ms, 0, MAX_DEADLINE_MS)
    if spec not in SPEC_MODES:
        raise ValueError(f"spec must be one of {', '.join(SPEC_MODES)}, got {spec!r}")
    job["spec"] = spec
    job["block_size"] = _int("block_size", block_size, 0, MAX_BLOCK_SIZE)
    if model is not None:
        job["model"] = _str("model", model, 1, MAX_MODEL_BYTES)
    if session is not None:
        job["session"] = _str("session", session, 1, MAX_SESSION_BYTES)
    if metadata is not None:
        job["metadata"] = metadata
    if logprobs is not None:
        job["logprobs"] = _int("logprobs", logprobs, 0, MAX_TOP_LOGPROBS)
    if extra:
        for key, value in extra.items():
            if key in job or key in ("prompt", "prompt_tokens", "messages", "id", "model", "session", "metadata", "logprobs", "tools",
                                     "chat_template_kwargs", "add_generation_prompt"):
                raise ValueError(f"extra may not set {key!r}: it has its own argument")
            job[key] = value
    return job
