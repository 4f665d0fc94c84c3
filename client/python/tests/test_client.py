"""The blocking client against `flashq up` serving the demo pair: results equal to the model run in
one process, resumed streams, cancel, status, idempotent submission and the models served."""

from __future__ import annotations

import itertools
import json
import pathlib
import subprocess
import time

import pytest
from conftest import TARGET, bin_path, flashq_generate

import flashq
from flashq.job import build_job

PROMPT = "def parse_header(line):"


def test_generate_greedy_equals_flashq_generate(up):
    with up.client() as client:
        result = client.generate(PROMPT, max_tokens=24, spec="dflash", block_size=4)
    plain = flashq_generate(PROMPT, 24)
    assert result.token_ids == plain["tokens"]
    assert result.text == plain["text"]
    assert result.finish_reason == plain["finish_reason"]
    assert result.usage == flashq.Usage(prompt_tokens=plain["stats"]["prompt_tokens"], completion_tokens=24)
    assert result.final.spec_stats.draft_steps >= 1, "the job ran without its drafter"
    assert not result.incomplete


def test_logprobs_come_with_each_token_the_same_with_and_without_speculation(up):
    with up.client() as client:
        dflash = client.generate(PROMPT, max_tokens=16, spec="dflash", logprobs=3)
        off = client.generate(PROMPT, max_tokens=16, spec="off", logprobs=3)
        plain = client.generate(PROMPT, max_tokens=16, spec="off")
    assert dflash.token_ids == off.token_ids == plain.token_ids
    assert len(dflash.logprobs) == len(dflash.token_ids) == 16
    assert dflash.logprobs == off.logprobs, "the verifier's rows are plain decoding's"
    assert plain.logprobs == [], "none unless asked"
    for token_id, entry in zip(dflash.token_ids, dflash.logprobs):
        assert entry.token == token_id and entry.logprob <= 0 and isinstance(entry.bytes, bytes)
        assert len(entry.top) == 3 and entry.top[0].token == token_id, "greedy takes the most likely token"
        assert entry.top[0].logprob >= entry.top[1].logprob >= entry.top[2].logprob
    assert b"".join(e.bytes for e in dflash.logprobs).decode() == dflash.text
    with pytest.raises(ValueError, match="logprobs"):
        build_job(prompt="x", logprobs=21)


def test_chat_job_with_messages_equals_flashq_generate_chat(up):
    with up.client() as client:
        result = client.generate(messages=[{"role": "user", "content": "Hello there"}], max_tokens=16)
    plain = flashq_generate("Hello there", 16, "--chat")
    assert result.token_ids == plain["tokens"]
    assert result.text == plain["text"]
    assert result.usage.prompt_tokens == plain["stats"]["prompt_tokens"]


def test_prompt_tokens_job_equals_the_same_job_from_the_cli(up):
    prompt_tokens = [13, 260, 340, 726, 289]
    with up.client() as client:
        result = client.generate(prompt_tokens=prompt_tokens, max_tokens=12, stop_token_ids=[4096])
    cli = subprocess.run([bin_path("flashq"), "submit", "--broker", up.frontend, "--stream-endpoint", up.stream,
                          "--prompt-tokens", ",".join(map(str, prompt_tokens)), "--max-tokens", "12",
                          "--stop-token-id", "4096", "--wait-timeout-ms", "20000", "--json"],
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    job = json.loads(cli.stdout.strip().splitlines()[-1])
    assert result.token_ids == job["tokens"] and result.text == job["text"]
    assert result.usage.prompt_tokens == len(prompt_tokens)


def test_stream_yields_typed_events_in_seq_order_ending_with_the_final(up):
    with up.client() as client:
        job_id = client.submit(PROMPT, max_tokens=32)
        events = list(client.stream(job_id))
    assert [e.seq for e in events] == list(range(len(events)))
    assert all(type(e) is flashq.TokenEvent for e in events[:-1])
    final = events[-1]
    assert isinstance(final, flashq.FinalEvent)
    assert final.finish_reason == "length"
    assert sum(len(e.token_ids) for e in events) == final.usage.completion_tokens == 32
    assert final.final.timings.total_ms >= final.final.timings.ttft_ms


def test_resume_from_seq_equals_the_tail_of_the_uninterrupted_stream(up):
    with up.client() as client:
        job_id = client.submit(PROMPT, max_tokens=200, spec="off")
        # Broken off after 5 events while the job runs, then resumed where it broke off.
        stream = client.stream(job_id)
        head = list(itertools.islice(stream, 5))
        stream.close()
        rest = list(client.stream(job_id, from_seq=head[-1].seq + 1))
        whole = list(client.stream(job_id))
        for n in (1, 7, len(whole) - 1):
            assert list(client.stream(job_id, from_seq=n)) == whole[n:]
    assert head + rest == whole
    assert [e.seq for e in whole] == list(range(len(whole)))
    assert whole[-1].usage.completion_tokens == 200


def test_status_of_a_finished_job_and_of_an_unknown_one(up):
    with up.client() as client:
        result = client.generate(PROMPT, max_tokens=8)
        status = client.status(result.job_id)
        assert status.state == "finished"
        assert status.attempt == 1
        assert status.final == result.final
        assert status.seq == len(list(client.stream(result.job_id)))
        assert client.status("py-never-submitted").state == "unknown"


def test_resubmitting_an_id_returns_it_and_runs_nothing_new(up):
    with up.client() as client:
        first = client.generate(PROMPT, max_tokens=8, id="py-idempotent")
        assert client.submit("A different prompt", max_tokens=64, id="py-idempotent") == "py-idempotent"
        again = client.generate("Yet another", max_tokens=3, id="py-idempotent")
        status = client.status("py-idempotent")
    assert first.job_id == again.job_id == "py-idempotent"
    assert again.token_ids == first.token_ids and again.final == first.final
    assert status.attempt == 1 and status.final.usage.completion_tokens == 8


def test_cancel_a_running_job_ends_its_stream(up):
    with up.client() as client:
        job_id = client.submit(PROMPT, max_tokens=480, spec="off")
        stream = client.stream(job_id)
        first = next(stream)
        client.cancel(job_id)
        events = [first] + list(stream)
    final = events[-1]
    # The demo model writes 480 tokens in about 0.1 s: the cancel may come after the end.
    assert final.finish_reason in ("cancelled", "length")
    if final.finish_reason == "cancelled":
        assert final.usage.completion_tokens < 480
    assert sum(len(e.token_ids) for e in events) == final.usage.completion_tokens


def test_generate_calls_on_event_for_each_event(up):
    seen = []
    with up.client() as client:
        result = client.generate(PROMPT, max_tokens=10, on_event=seen.append)
    assert "".join(e.text for e in seen) == result.text
    assert isinstance(seen[-1], flashq.FinalEvent)


def test_a_stream_whose_early_events_are_gone_is_marked_incomplete(short_memory_cluster):
    with short_memory_cluster.client(timeout=20) as client:
        job_id = client.submit(PROMPT, max_tokens=24, spec="off")
        while (status := client.status(job_id)).state != "finished":
            time.sleep(0.01)
        published = status.seq
        assert published > 8
        stream = client.stream(job_id)
        events = list(stream)
        # Only the last 4 are kept: those, once each, and the stream says what it lacks.
        assert [e.seq for e in events] == list(range(published - 4, published))
        assert stream.incomplete
        assert events[-1].final == status.final and events[-1].usage.completion_tokens == 24
        # What is still kept is served exactly.
        tail = client.stream(job_id, from_seq=published - 3)
        assert [e.seq for e in tail] == list(range(published - 3, published)) and not tail.incomplete


def test_tools_reach_the_worker_whose_template_refuses_them_as_a_rejected_final(up):
    # The demo target has no chat template of its own; its ChatML default takes no tools, so the
    # worker ends the job rejected, saying why: the tools travelled through the broker to it.
    parameters = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool = {"type": "function",
            "function": {"name": "get_weather", "description": "Weather of a city", "parameters": parameters}}
    with up.client() as client:
        result = client.generate(messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[tool],
                                 chat_template_kwargs={"enable_thinking": False}, max_tokens=8)
    assert result.finish_reason == "rejected"
    assert "tools" in result.final.error
    assert result.token_ids == [] and result.text == ""


def test_models_lists_the_served_model_with_its_context_length(up, idle_broker):
    config = json.loads((pathlib.Path(TARGET) / "config.json").read_text())
    with up.client() as client:
        # The demo target has no chat template of its own: the family default writes neither format.
        assert client.models() == [flashq.ModelInfo(name=pathlib.Path(TARGET).name,
                                                    max_model_len=config["max_position_embeddings"],
                                                    tool_call_format="none", reasoning_format="none",
                                                    workers=1, slots=2)]
    with idle_broker.client() as client:
        assert client.models() == []
