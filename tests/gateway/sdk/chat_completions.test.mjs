// The gateway's chat completions, completions and models with the official OpenAI SDK for Node,
// against a real gateway, broker and worker (the demo pair): answers equal to the same job run in
// one process, streamed equal to whole, usage, ids, and every error status with the gateway still
// serving after it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_KEY, MODEL, OpenAI, client, generateDirectly, startGateway, startUp, stopGatewayAndUp } from './harness.mjs';

let up;
let gateway;
let openai;

before(async () => {
  up = await startUp();
  gateway = await startGateway(up, ['--api-key', API_KEY, '--max-body-bytes', '65536']);
  openai = client(gateway);
});

after(() => stopGatewayAndUp(gateway, up));

test('models lists the served model with its context length', async () => {
  const models = [];
  for await (const model of openai.models.list()) models.push(model);
  const served = models.find((m) => m.id === MODEL);
  assert.ok(served, JSON.stringify(models));
  assert.equal(served.object, 'model');
  assert.ok(Number.isInteger(served.max_model_len) && served.max_model_len > 0, JSON.stringify(served));
});

test('a chat completion is the job run directly, with usage and the job id', async () => {
  const direct = generateDirectly(['--chat', '--prompt', 'Tell me about the sea.', '--max-tokens', '12']);
  const { data, response } = await openai.chat.completions
    .create({ model: MODEL, messages: [{ role: 'user', content: 'Tell me about the sea.' }], max_tokens: 12, temperature: 0 })
    .withResponse();
  assert.equal(data.object, 'chat.completion');
  assert.equal(response.headers.get('x-flashq-job-id'), data.id);
  assert.equal(data.choices.length, 1);
  assert.equal(data.choices[0].message.role, 'assistant');
  assert.equal(data.choices[0].message.content, direct.text);
  assert.equal(data.usage.completion_tokens, direct.tokens.length);
  assert.ok(data.usage.prompt_tokens > 0);
  assert.equal(data.usage.total_tokens, data.usage.prompt_tokens + data.usage.completion_tokens);
  assert.ok(['stop', 'length'].includes(data.choices[0].finish_reason));
});

test('a streamed chat completion delivers the whole answer, then usage', async () => {
  const request = { model: MODEL, messages: [{ role: 'user', content: 'Count to ten.' }], max_completion_tokens: 16, temperature: 0 };
  const whole = await openai.chat.completions.create(request);
  const stream = await openai.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish;
  let usage;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += choice.delta.content ?? '';
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  assert.ok(chunks > 2);
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage, whole.usage);
});

test('completions take text or token ids and stream like the whole answer', async () => {
  const direct = generateDirectly(['--prompt', 'Once upon a time', '--max-tokens', '10']);
  const whole = await openai.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 10, temperature: 0 });
  assert.equal(whole.object, 'text_completion');
  assert.equal(whole.choices[0].text, direct.text);
  assert.equal(whole.usage.completion_tokens, direct.tokens.length);
  let streamed = '';
  for await (const chunk of await openai.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 10, temperature: 0, stream: true })) {
    for (const choice of chunk.choices) streamed += choice.text;
  }
  assert.equal(streamed, whole.choices[0].text);
  const byIds = await openai.completions.create({ model: MODEL, prompt: [1, 2, 3, 4], max_tokens: 4, temperature: 0 });
  assert.equal(byIds.usage.prompt_tokens, 4);
  assert.ok(byIds.usage.completion_tokens > 0);
});

test('n choices are n jobs, each with its own id', async () => {
  const { data, response } = await openai.chat.completions
    .create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 6, temperature: 0.8, seed: 7, n: 2 })
    .withResponse();
  assert.equal(data.choices.length, 2);
  assert.deepEqual(data.choices.map((c) => c.index), [0, 1]);
  const ids = response.headers.get('x-flashq-job-id').split(',');
  assert.equal(ids.length, 2);
  assert.equal(ids[0], data.id);
  assert.notEqual(ids[0], ids[1]);
});

async function rawPost(path, body, headers = {}) {
  const response = await fetch(`http://127.0.0.1:${gateway.port}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: response.status, headers: response.headers, body: await response.json() };
}

test('errors are OpenAI error objects with the status a client expects', async () => {
  const chat = { model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 };
  const noKey = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(noKey.chat.completions.create(chat), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  await assert.rejects(openai.chat.completions.create({ ...chat, model: 'no-such-model' }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
  await assert.rejects(openai.chat.completions.create({ ...chat, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { not: {} } } } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format' && e.code === 'invalid_value');
  await assert.rejects(openai.chat.completions.create({ ...chat, logprobs: true, top_logprobs: 21 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'top_logprobs');
  await assert.rejects(openai.chat.completions.create({ ...chat, temperature: -1 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
  await assert.rejects(openai.chat.completions.create({ ...chat, messages: [] }), (e) => e instanceof OpenAI.BadRequestError);

  const notJson = await rawPost('/v1/chat/completions', '{"model": ');
  assert.equal(notJson.status, 400);
  assert.equal(notJson.body.error.type, 'invalid_request_error');
  const oversize = await rawPost('/v1/chat/completions', JSON.stringify({ ...chat, messages: [{ role: 'user', content: 'x'.repeat(70000) }] }));
  assert.equal(oversize.status, 413);
  assert.equal(oversize.body.error.code, 'request_too_large');
  const badHeader = await rawPost('/v1/chat/completions', JSON.stringify(chat), { 'x-flashq-priority': 'high' });
  assert.equal(badHeader.status, 400);
  const unknownPath = await rawPost('/v1/nothing-here', '{}');
  assert.equal(unknownPath.status, 404);
  const wrongMethod = await fetch(`http://127.0.0.1:${gateway.port}/v1/chat/completions`, { headers: { authorization: `Bearer ${API_KEY}` } });
  assert.equal(wrongMethod.status, 405);

  // Still serving.
  const after = await openai.chat.completions.create(chat);
  assert.equal(after.choices.length, 1);
});

test('without a broker the answer is 503 with Retry-After', async () => {
  const nowhere = { frontend: 'tcp://127.0.0.1:1', stream: 'tcp://127.0.0.1:2' };
  const lonely = await startGateway(nowhere, [], { expectReady: false });
  try {
    const response = await fetch(`${lonely.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }] }),
    });
    const body = await response.json();
    // No broker has listed the model: the gateway cannot know it, and says so as unavailable.
    assert.equal(response.status, 503, JSON.stringify(body));
    assert.ok(Number(response.headers.get('retry-after')) >= 1);
    const ready = await fetch(`http://127.0.0.1:${lonely.port}/readyz`);
    assert.equal(ready.status, 503);
  } finally {
    assert.equal((await lonely.stop()).code, 0, lonely.output());
  }
});

test('operations pages: health, readiness, and metrics counting what was answered', async () => {
  const page = async (path) => {
    const response = await fetch(`http://127.0.0.1:${gateway.port}${path}`);
    return { status: response.status, text: await response.text() };
  };
  assert.equal((await page('/healthz')).status, 200);
  assert.equal((await page('/readyz')).status, 200);
  await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
  await page('/v1/no/such/path/42');
  const metrics = await page('/metrics');
  assert.equal(metrics.status, 200);
  assert.match(metrics.text, /^flashq_gateway_requests_total\{route="\/v1\/chat\/completions",status="200"\} [1-9]/m);
  // Unknown paths count under one label, whatever they are.
  assert.match(metrics.text, /^flashq_gateway_requests_total\{route="other",status="40[14]"\} [1-9]/m);
  assert.doesNotMatch(metrics.text, /no\/such\/path/);
  assert.match(metrics.text, /^flashq_gateway_time_to_first_token_seconds_count [1-9]/m);
  assert.match(metrics.text, /^flashq_gateway_open_streams 0$/m);
});

test("a conversation's user, or its x-flashq-session header, is the job's session", async () => {
  // The broker counts a job sent to the worker that ran its session before as routed by session.
  const bySession = async () => {
    const text = await (await fetch(`http://127.0.0.1:${up.httpPort}/metrics`)).text();
    return Number(text.match(/^flashq_routing_decisions_total\{reason="session"\} (\S+)$/m)?.[1]);
  };
  const before = await bySession();
  assert.ok(Number.isFinite(before));
  const turn = { model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2, user: 'conversation-1' };
  await openai.chat.completions.create(turn);
  assert.equal(await bySession(), before, 'the first turn of a session has no worker yet');
  await openai.chat.completions.create(turn);
  assert.equal(await bySession(), before + 1);
  const { user, ...anonymous } = turn;
  assert.equal(user, 'conversation-1');
  await openai.chat.completions.create(anonymous);
  assert.equal(await bySession(), before + 1, 'no user, no session');
  await openai.chat.completions.create(anonymous, { headers: { 'x-flashq-session': 'conversation-1' } });
  assert.equal(await bySession(), before + 2);
  await assert.rejects(openai.chat.completions.create({ ...turn, user: 'u'.repeat(257) }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'user');
});
