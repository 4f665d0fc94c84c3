#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets, corpus/<target>/<name>: a handful of valid and
near-valid inputs each, from the project's real inputs (the demo pair's config.json, the tiny
tokenizer `flashq-model make-tiny` writes) and the wire formats of docs/protocol.md.

    tests/fuzz/make_corpus.py [--tiny-tokenizer DIR/tokenizer.json]

Inputs that once crashed a decoder are committed by hand beside these (names starting with
"crash-") and are never rewritten."""
import argparse
import json
import os
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"


def pack(value):
    """The msgpack of `value` (dict, list, str, bytes, int, float, bool, None), as MapWriter packs."""
    if value is None:
        return b"\xc0"
    if value is True:
        return b"\xc3"
    if value is False:
        return b"\xc2"
    if isinstance(value, int):
        if 0 <= value < 128:
            return bytes([value])
        if -32 <= value < 0:
            return struct.pack("b", value)
        if value >= 0:
            return b"\xcf" + struct.pack(">Q", value)
        return b"\xd3" + struct.pack(">q", value)
    if isinstance(value, float):
        return b"\xcb" + struct.pack(">d", value)
    if isinstance(value, str):
        value = value.encode()
        if len(value) < 32:
            return bytes([0xA0 | len(value)]) + value
        return b"\xd9" + bytes([len(value)]) + value if len(value) < 256 else b"\xda" + struct.pack(">H", len(value)) + value
    if isinstance(value, bytes):
        return b"\xc4" + bytes([len(value)]) + value
    if isinstance(value, list):
        return bytes([0x90 | len(value)]) + b"".join(pack(v) for v in value)
    if isinstance(value, dict):
        return bytes([0x80 | len(value)]) + b"".join(pack(k) + pack(v) for k, v in value.items())
    raise TypeError(value)


def write(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def wire_seeds():
    job = {"id": "j1", "prompt": "def add(a, b):", "max_tokens": 16, "temperature": 0.7, "top_p": 0.9,
           "top_k": 20, "seed": 7, "stop": ["\n\n"], "stop_token_ids": [2], "priority": 1,
           "deadline_ms": 60000, "spec": "dflash", "stream": True, "block_size": 0, "model": "demo",
           "metadata": {"user": "u1"}}
    final = {"finish_reason": "length", "usage": {"prompt_tokens": 3, "completion_tokens": 2},
             "spec_stats": {"draft_steps": 1, "accepted_tokens": 1, "tau": 2.0},
             "timings": {"queue_ms": 1, "ttft_ms": 2, "total_ms": 3}}
    messages = {
        "heartbeat_worker": (0x01, {"load": 2}),
        "heartbeat_broker": (0x01, {}),
        "disconnect": (0x02, {}),
        "error": (0x03, {"code": "protocol", "message": "bad", "id": "j1"}),
        "cancel": (0x04, {"id": "j1"}),
        "submit": (0x10, {"job": job}),
        "submit_tokens": (0x10, {"job": {"prompt_tokens": [1, 2, 3]}}),
        "submit_chat": (0x10, {"job": {"messages": [{"role": "user", "content": "hi"}], "stop": "x"}}),
        "submit_chat_tools": (0x10, {"job": {
            "messages": [{"role": "user", "content": "weather?"},
                         {"role": "assistant", "content": None, "reasoning_content": "look it up",
                          "tool_calls": [{"id": "c1", "type": "function",
                                          "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                         {"role": "tool", "content": "18 C", "tool_call_id": "c1", "name": "get_weather"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
            "chat_template_kwargs": {"enable_thinking": False}, "add_generation_prompt": True}}),
        "status": (0x11, {"id": "j1"}),
        "replay": (0x12, {"id": "j1", "from_seq": 3}),
        "accepted": (0x20, {"id": "j1"}),
        "rejected": (0x21, {"id": "j1", "reason": "overloaded", "retry_after_ms": 100}),
        "status_reply": (0x22, {"id": "j1", "state": "finished", "attempt": 1, "seq": 2, "final": final}),
        "event": (0x23, {"id": "j1", "seq": 0, "token_ids": [5], "text": "a"}),
        "event_final": (0x23, {"id": "j1", "seq": 1, "token_ids": [], "text": "", "final": final}),
        "ready": (0x30, {"worker_id": "w1", "model": "demo", "slots": 4, "block_size": 16, "backend": "cpu"}),
        "ready_formats": (0x30, {"worker_id": "w1", "model": "demo", "slots": 4, "block_size": 16, "backend": "cpu",
                                 "max_model_len": 40960, "tool_call_format": "hermes",
                                 "reasoning_format": "think_in_prompt"}),
        "models": (0x13, {}),
        "models_reply": (0x24, {"models": [
            {"name": "demo", "max_model_len": 40960, "tool_call_format": "hermes", "reasoning_format": "think",
             "workers": 2, "slots": 8},
            {"name": "llama", "max_model_len": 0, "tool_call_format": "llama3_json", "reasoning_format": "none",
             "workers": 1, "slots": 1}]}),
        "tokens": (0x31, {"id": "j1", "attempt": 1, "seq": 0, "token_ids": [5, 6], "text": "ab"}),
        "tokens_logprobs": (0x31, {"id": "j1", "attempt": 1, "seq": 0, "token_ids": [5], "text": "a", "logprobs": [
            {"token": 5, "logprob": -0.5, "bytes": b"a", "top": [{"token": 5, "logprob": -0.5, "bytes": b"a"},
                                                               {"token": 9, "logprob": -2.0, "bytes": b"\xe2\x80"}]}]}),
        "final": (0x32, dict({"id": "j1"}, **final)),
        "assign": (0x40, {"job": job, "attempt": 2, "resume_tokens": [5], "resume_text_bytes": 1}),
    }
    for name, (type_byte, body) in messages.items():
        write("wire_message_fuzzer", name, bytes([type_byte]) + pack(body))
    # Near-valid: a truncated body, trailing bytes, a duplicate key, an unknown type byte.
    write("wire_message_fuzzer", "truncated", bytes([0x10]) + pack({"job": job})[:-3])
    write("wire_message_fuzzer", "trailing", bytes([0x04]) + pack({"id": "j1"}) + b"\x00")
    write("wire_message_fuzzer", "duplicate_key", bytes([0x04]) + b"\x82" + pack("id") + pack("a") + pack("id") + pack("b"))
    write("wire_message_fuzzer", "unknown_type", b"\x7f" + pack({}))
    # Metadata JSON cannot hold (an integer key): once thrown from the JSON library at Redis intake.
    write("wire_message_fuzzer", "submit_metadata_int_key",
          b"\x10\x81" + pack("job") + b"\x82" + pack("prompt") + pack("x") + pack("metadata") + b"\x81\x01\x02")


def redis_seeds():
    def fields(*pairs):
        return "".join(f"{name}\n{value}\n" for name, value in pairs)
    write("redis_job_fields_fuzzer", "prompt", fields(("id", "j1"), ("prompt", "def add(a, b):"), ("max_tokens", "64")))
    write("redis_job_fields_fuzzer", "every_field", fields(
        ("id", "j2"), ("prompt_tokens", "[1,2,3]"), ("max_tokens", "8"), ("temperature", "0.7"), ("top_p", "0.95"),
        ("top_k", "40"), ("seed", "18446744073709551615"), ("stop", '["\\n\\n","END"]'), ("stop_token_ids", "[2]"),
        ("priority", "-3"), ("deadline_ms", "1000"), ("spec", "auto"), ("model", "demo"),
        ("metadata", '{"user":"u1","tags":[1,2.5,null,true]}'), ("stream", "false"), ("block_size", "16")))
    write("redis_job_fields_fuzzer", "chat", fields(
        ("messages", '[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]'), ("stop", "plain stop")))
    write("redis_job_fields_fuzzer", "chat_tools", fields(
        ("messages", '[{"role":"user","content":"hi"},{"role":"assistant","content":null,'
                     '"tool_calls":[{"id":"c1","function":{"name":"f","arguments":{"x":1}}}]}]'),
        ("tools", '[{"type":"function","function":{"name":"f"}}]'),
        ("chat_template_kwargs", '{"enable_thinking":false}'), ("add_generation_prompt", "false")))
    write("redis_job_fields_fuzzer", "bad_number", fields(("prompt", "x"), ("max_tokens", "1e3"), ("temperature", "nan")))
    write("redis_job_fields_fuzzer", "bad_json", fields(("prompt_tokens", "[1,2,"), ("metadata", "{\"a\":")))
    # Nested past the limit: a million levels once overflowed the broker's stack (JSON to msgpack).
    write("redis_job_fields_fuzzer", "deep_metadata", fields(("prompt", "x"), ("metadata", "[" * 40 + "]" * 40)))
    write("redis_job_fields_fuzzer", "two_prompts", fields(("prompt", "x"), ("prompt_tokens", "[1]"), ("stream", "yes")))


def config_seeds():
    for name in ("target", "drafter"):
        text = (ROOT / "models" / "demo" / name / "config.json").read_text()
        write("model_config_fuzzer", f"demo_{name}", json.dumps(json.loads(text), separators=(",", ":")))
    target = json.loads((ROOT / "models" / "demo" / "target" / "config.json").read_text())
    near = [
        ("rope_parameters", dict(target, rope_theta=None, rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
        ("eos_list", dict(target, eos_token_id=[2, 3, 2], num_key_value_heads=None, head_dim=None)),
        ("odd_head_dim", dict(target, head_dim=63)),
        ("heads_do_not_divide", dict(target, num_key_value_heads=3)),
        ("rope_scaling", dict(target, rope_scaling={"type": "yarn", "factor": 4.0})),
        ("layer_types", dict(target, layer_types=["full_attention", "sliding_attention"])),
        ("no_model_type", {k: v for k, v in target.items() if k != "model_type"}),
        ("string_size", dict(target, hidden_size="256")),
        ("huge_vocab", dict(target, vocab_size=2**40)),
        # Nested past the limit: a million levels once overflowed the worker's stack.
        ("deep", dict(target, hidden_size=json.loads("[" * 70 + "]" * 70))),
    ]
    for name, config in near:
        write("model_config_fuzzer", name, json.dumps(config, separators=(",", ":")))
    drafter = json.loads((ROOT / "models" / "demo" / "drafter" / "config.json").read_text())
    write("model_config_fuzzer", "drafter_default_layers",
          json.dumps(dict(drafter, dflash_config={"mask_token_id": 4096, "block_size": 8}), separators=(",", ":")))
    write("model_config_fuzzer", "drafter_layer_outside",
          json.dumps(dict(drafter, dflash_config={"mask_token_id": 4096, "target_layer_ids": [0, 9]}), separators=(",", ":")))


def tokenizer_seeds(tiny_tokenizer):
    if tiny_tokenizer:
        tiny = json.loads(Path(tiny_tokenizer).read_text())
        write("tokenizer_json_fuzzer", "tiny", json.dumps(tiny, separators=(",", ":"), ensure_ascii=False))
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    small = {
        "added_tokens": [{"id": 6, "content": "<|im_start|>", "special": True, "normalized": False}],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{N}| ?\\p{L}+|\\s+"}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False,
                  "vocab": {"H": 0, "e": 1, "l": 2, "o": 3, "He": 4, "ll": 5}, "merges": ["H e", ["l", "l"]]},
    }
    write("tokenizer_json_fuzzer", "small", json.dumps(small, separators=(",", ":")))
    near = [
        ("string_split", dict(small, pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated"}, dict(byte_level, use_regex=True)]})),
        ("bad_regex", dict(small, pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(?i:[a-"}, "behavior": "Isolated"}, byte_level]})),
        ("id_twice", dict(small, model=dict(small["model"], vocab={"H": 0, "e": 0}))),
        ("merge_unknown", dict(small, model=dict(small["model"], merges=["x y"]))),
        ("added_far_id", dict(small, added_tokens=[{"id": 4000, "content": "<x>", "special": False}])),
        ("sequence_normalizer", dict(small, normalizer={"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]})),
    ]
    for name, spec in near:
        write("tokenizer_json_fuzzer", name, json.dumps(spec, separators=(",", ":")))


def safetensors_seeds():
    def image(header, data):
        header = header.encode()
        return struct.pack("<Q", len(header)) + header + data.encode()
    seeds = {
        "empty": ('{}', ''),
        "one_f32": ('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 'AAAABBBB'),
        "padded": ('{"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}}      ', 'AAAABBBB'),
        "every_dtype": ('{"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},'
                        '"b":{"dtype":"I32","shape":[],"data_offsets":[4,8]},"c":{"dtype":"F32","shape":[1,0],"data_offsets":[8,8]}}',
                        'AAAABBBB'),
        "gap": ('{"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}',
                'AAAAxxxxBBBB'),
        "overlap": ('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
                    'AAAABBBBCCCC'),
        "unsupported": ('{"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}}', 'AAAA'),
    }
    for name, (header, data) in seeds.items():
        write("safetensors_header_fuzzer", name, image(header, data))


def chat_template_seeds():
    """The committed real templates (gpt-oss, Qwen3-Coder, Llama 3.1 Instruct) and one small
    template per construct from the golden constructs set."""
    templates = ROOT / "tests" / "golden" / "templates"
    for path in sorted(templates.glob("*.jinja")):
        write("chat_template_fuzzer", path.stem, path.read_text(encoding="utf-8"))
    constructs = json.loads((templates / "constructs.json").read_text(encoding="utf-8"))
    for case in constructs["cases"]:
        write("chat_template_fuzzer", "construct_" + case["id"], case["template"])


def openai_request_seeds():
    """Request bodies of /v1/chat/completions, /v1/completions and /v1/responses: each endpoint's
    usual requests, tools and tool results, extensions, and fields that are refused."""
    tool = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    bodies = {
        "chat": {"model": "qwen3", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16},
        "chat_stream": {"model": "llama", "messages": [{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": [{"type": "text", "text": "Hi"}]}], "stream": True,
                        "stream_options": {"include_usage": True}, "n": 2, "seed": 3, "stop": ["\n"]},
        "chat_tools": {"model": "qwen3", "tools": [tool], "tool_choice": "auto", "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "18 C"}],
            "chat_template_kwargs": {"enable_thinking": False}, "top_k": 20, "priority": 2},
        "chat_refused": {"model": "qwen3", "messages": [{"role": "user", "content": "x"}],
                         "response_format": {"type": "json_schema"}, "logprobs": True},
        "completion": {"model": "llama", "prompt": "def add(a, b):", "max_tokens": 8, "temperature": 0},
        "completion_ids": {"model": "qwen3", "prompt": [[1, 2, 3], [4, 5]], "echo": False, "best_of": 1},
        "responses": {"model": "qwen3", "instructions": "Be brief.", "input": "Hello", "background": True,
                      "max_output_tokens": 64, "metadata": {"k": "v"}, "reasoning": {"effort": "low"}},
        "responses_items": {"model": "llama", "tools": [{"type": "function", "name": "get_weather",
                            "parameters": tool["function"]["parameters"]}], "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "18 C"}], "stream": True},
    }
    for name, body in bodies.items():
        write("openai_request_fuzzer", name, json.dumps(body))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny-tokenizer", help="tokenizer.json written by flashq-model make-tiny")
    args = parser.parse_args()
    wire_seeds()
    redis_seeds()
    config_seeds()
    tokenizer_seeds(args.tiny_tokenizer)
    safetensors_seeds()
    chat_template_seeds()
    openai_request_seeds()


if __name__ == "__main__":
    main()
