"""AsyncClient, the asyncio twin, against the same `flashq up`: the same results as the blocking
client, resumed streams, cancel, status, typed errors, and many jobs from one client at once."""

from __future__ import annotations

import asyncio

import pytest

import flashq

PROMPT = "def parse_header(line):"


def run(coroutine):
    return asyncio.run(coroutine)


def test_async_generate_equals_the_blocking_client(up):
    async def main():
        async with up.async_client() as client:
            return await client.generate(PROMPT, max_tokens=24)
    result = run(main())
    with up.client() as client:
        expected = client.generate(PROMPT, max_tokens=24)
    assert result.token_ids == expected.token_ids and result.text == expected.text
    assert result.finish_reason == expected.finish_reason


def test_async_stream_resumes_after_a_seq(up):
    async def main():
        async with up.async_client() as client:
            job_id = await client.submit(PROMPT, max_tokens=120, spec="off")
            head = []
            stream = await client.stream(job_id)
            async for event in stream:
                head.append(event)
                if len(head) == 4:
                    break
            await stream.aclose()
            rest = [e async for e in await client.stream(job_id, from_seq=head[-1].seq + 1)]
            whole = [e async for e in await client.stream(job_id)]
            return head, rest, whole
    head, rest, whole = run(main())
    assert head + rest == whole
    assert [e.seq for e in whole] == list(range(len(whole)))
    assert isinstance(whole[-1], flashq.FinalEvent) and whole[-1].usage.completion_tokens == 120


def test_async_jobs_run_concurrently_on_one_client(up):
    async def main():
        async with up.async_client() as client:
            return await asyncio.gather(*(client.generate(PROMPT, max_tokens=8 + i) for i in range(4)))
    results = run(main())
    assert [len(r.token_ids) for r in results] == [8, 9, 10, 11]
    assert all(r.token_ids == results[-1].token_ids[:len(r.token_ids)] for r in results)


def test_async_status_cancel_and_errors(up, idle_broker):
    async def main():
        async with up.async_client() as client:
            result = await client.generate(messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
            status = await client.status(result.job_id)
            assert status.state == "finished" and status.final == result.final
            with pytest.raises(flashq.NotFound):
                await client.cancel("py-async-unknown")
            with pytest.raises(flashq.NotFound):
                await client.stream("py-async-unknown")
            with pytest.raises(ValueError, match="top_p"):
                await client.submit(PROMPT, top_p=0)
        async with idle_broker.async_client() as client:
            job_id = await client.submit(PROMPT)
            assert (await client.status(job_id)).state == "queued"
            assert (await client.cancel(job_id)).final.finish_reason == "cancelled"
            await client.submit(PROMPT)
            with pytest.raises(flashq.Overloaded):
                await client.submit(PROMPT)
                await client.submit(PROMPT)
            with pytest.raises(flashq.UnknownModel):
                await client.submit(PROMPT, model="nothing-serves-this")
    run(main())


def test_async_models_equal_the_blocking_clients(up, idle_broker):
    async def main():
        async with up.async_client() as client:
            models = await client.models()
        async with idle_broker.async_client() as client:
            assert await client.models() == []
        return models
    models = run(main())
    with up.client() as client:
        assert models == client.models()
    assert [(m.name, m.workers, m.slots) for m in models] == [("target", 1, 2)]
