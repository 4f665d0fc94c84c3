// The Responses API's lifecycle through flashq-gateway with the official OpenAI SDK for Node, and
// what it shares with chat completions: a scripted worker behind a real flashq-broker streams
// known replies, some slowly, so that responses can be polled, resumed, cancelled and left while
// they run. A resumed stream is compared with the uninterrupted one byte for byte, also after the
// gateway restarted.
//
//   FLASHQ_BIN=build/bin node --test tests/gateway/sdk/responses.test.mjs
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { OpenAI, client, jobStatus, startBroker, startGateway, startScriptedWorker, waitFor } from './harness.mjs';

const MODEL = 'scripted-hermes';
const REASONING = 'A greeting wants a greeting back.';
const GREETING = 'Hello there! How can I help you today?';
const STORY = 'Once upon a time a queue held many jobs, and every one of them was served in its turn. '.repeat(2);
const RULES = [
  { when: 'Say hello', reply: `<think>\n${REASONING}\n</think>\n\n${GREETING}` },
  // Slow: 7-byte pieces every 60 ms, a few seconds in all.
  { when: 'Tell a story', reply: STORY, delay_ms: 60 },
  { when: '', reply: 'Nothing is scripted for that.' },
];

let broker;
let worker;
let gateway;
let openai;

before(async () => {
  broker = await startBroker();
  worker = await startScriptedWorker(broker, { model: MODEL, rules: RULES, toolCallFormat: 'hermes', reasoningFormat: 'think' });
  gateway = await startGateway(broker);
  openai = client(gateway);
});

after(async () => {
  const problems = [];
  for (const program of [gateway, worker, broker?.program]) {
    if (!program) continue;
    const { code } = await program.stop();
    if (code !== 0) problems.push(`exited with ${code}:\n${program.output()}`);
  }
  assert.deepEqual(problems, []);
});

// The raw server-sent events of a GET /v1/responses/{id} stream (or any response body), as
// [{type, data, text}] with `text` the event's bytes exactly as sent.
function parseEvents(body) {
  return body.split('\n\n').filter((block) => block.length).map((block) => {
    const type = block.match(/^event: (.*)$/m)?.[1];
    const data = JSON.parse(block.match(/^data: (.*)$/m)[1]);
    return { type, data, text: `${block}\n\n` };
  });
}

async function rawStream(id, startingAfter) {
  const query = startingAfter === undefined ? 'stream=true' : `stream=true&starting_after=${startingAfter}`;
  const response = await fetch(`${gateway.baseURL}/responses/${id}?${query}`);
  assert.equal(response.status, 200);
  return parseEvents(await response.text());
}

// Runs `read`, which aborts its request: an abort error is the expected end, any other a failure.
async function leave(read) {
  try {
    await read();
  } catch (e) {
    if (!(e instanceof OpenAI.APIUserAbortError) && e.name !== 'AbortError') throw e;
  }
}

function checkSequence(events, first = 0) {
  events.forEach((event, i) => assert.equal(event.sequence_number ?? event.data.sequence_number, first + i));
}

test('a response: reasoning and text, whole and streamed', async () => {
  const whole = await openai.responses.create({ model: MODEL, input: 'Say hello.' });
  assert.equal(whole.status, 'completed');
  assert.equal(whole.output_text, GREETING);
  const reasoning = whole.output.find((item) => item.type === 'reasoning');
  assert.equal(reasoning.content[0].text, REASONING);
  assert.ok(whole.usage.output_tokens > 0);

  const events = [];
  for await (const event of await openai.responses.create({ model: MODEL, input: 'Say hello.', stream: true })) events.push(event);
  checkSequence(events);
  assert.equal(events[0].type, 'response.created');
  assert.equal(events.at(-1).type, 'response.completed');
  const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  assert.equal(text, GREETING);
  assert.equal(events.at(-1).response.output_text ?? GREETING, GREETING);
});

test('a background response answers at once, is polled to its end, and streams again from the start', async () => {
  const started = await openai.responses.create({ model: MODEL, input: 'Tell a story.', background: true });
  assert.ok(['queued', 'in_progress'].includes(started.status), started.status);
  let polled = await openai.responses.retrieve(started.id);
  assert.equal(polled.id, started.id);
  await waitFor(async () => (polled = await openai.responses.retrieve(started.id)).status === 'completed', 60, 'the story');
  assert.equal(polled.output_text, STORY);

  const replayed = [];
  for await (const event of await openai.responses.retrieve(started.id, { stream: true })) replayed.push(event);
  checkSequence(replayed);
  assert.equal(replayed.at(-1).type, 'response.completed');
  assert.equal(replayed.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join(''), STORY);
});

test('a background stream dropped midway resumes after its last sequence number, byte for byte', async () => {
  const response = await fetch(`${gateway.baseURL}/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, input: 'Tell a story.', background: true, stream: true }),
  });
  assert.equal(response.status, 200);
  // Read until a few text deltas came, then drop the connection.
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let seen = '';
  while ((seen.match(/output_text\.delta/g) ?? []).length < 3) seen += decoder.decode((await reader.read()).value, { stream: true });
  await reader.cancel();
  const before = parseEvents(seen.slice(0, seen.lastIndexOf('\n\n') + 2));
  const id = before[0].data.response.id;
  const last = before.at(-1).data.sequence_number;

  // The SDK resumes it while it still runs.
  const resumed = [];
  for await (const event of await openai.responses.retrieve(id, { stream: true, starting_after: last })) resumed.push(event);
  checkSequence(resumed, last + 1);
  assert.equal(resumed.at(-1).type, 'response.completed');

  // The whole stream again, raw: the dropped part and the resumed part are exactly its bytes.
  const whole = await rawStream(id);
  assert.deepEqual(before.map((e) => e.text), whole.slice(0, before.length).map((e) => e.text));
  const tail = await rawStream(id, last);
  assert.deepEqual(tail.map((e) => e.text), whole.slice(before.length).map((e) => e.text));
  assert.equal(whole.filter((e) => e.type === 'response.output_text.delta').map((e) => e.data.delta).join(''), STORY);
});

test('a background response survives a gateway restart and resumes through the new one', async () => {
  const started = await openai.responses.create({ model: MODEL, input: 'Tell a story.', background: true });
  assert.equal((await gateway.stop()).code, 0, gateway.output());
  gateway = await startGateway(broker);
  openai = client(gateway);
  const events = [];
  for await (const event of await openai.responses.retrieve(started.id, { stream: true, starting_after: 2 })) events.push(event);
  checkSequence(events, 3);
  assert.equal(events.at(-1).type, 'response.completed');
  const whole = await rawStream(started.id);
  assert.deepEqual(events.map((e) => JSON.stringify(e)), whole.slice(3).map((e) => JSON.stringify(e.data)));
});

test('a background response is cancelled by its id', async () => {
  const started = await openai.responses.create({ model: MODEL, input: 'Tell a story.', background: true });
  const cancelled = await openai.responses.cancel(started.id);
  assert.equal(cancelled.id, started.id);
  assert.equal(cancelled.status, 'cancelled');
  assert.notEqual(cancelled.output_text, STORY);
  assert.equal((await openai.responses.retrieve(started.id)).status, 'cancelled');
});

test('a client that leaves a stream cancels its job: responses and chat completions', async () => {
  const controller = new AbortController();
  const stream = await openai.responses.create({ model: MODEL, input: 'Tell a story.', stream: true }, { signal: controller.signal });
  let id;
  let deltas = 0;
  // Leaving: the SDK ends the iteration (or throws its abort error) once the request is aborted.
  await leave(async () => {
    for await (const event of stream) {
      id ??= event.response?.id;
      if (event.type === 'response.output_text.delta') {
        deltas += 1;
        controller.abort();
        break;
      }
    }
  });
  assert.equal(deltas, 1);
  await waitFor(async () => (await openai.responses.retrieve(id)).status === 'cancelled', 30, `response ${id} to be cancelled`);

  const chatController = new AbortController();
  const { data: chat, response } = await openai.chat.completions
    .create({ model: MODEL, messages: [{ role: 'user', content: 'Tell a story.' }], stream: true },
      { signal: chatController.signal })
    .withResponse();
  const jobId = response.headers.get('x-flashq-job-id');
  await leave(async () => {
    for await (const chunk of chat) {
      if (chunk.choices[0]?.delta?.content) {
        chatController.abort();
        break;
      }
    }
  });
  await waitFor(async () => jobStatus(broker, jobId).state === 'finished', 30, `job ${jobId} to end`);
  const status = jobStatus(broker, jobId);
  assert.equal(status.final.finish_reason, 'cancelled', JSON.stringify(status));
  assert.ok(status.final.usage.completion_tokens < 40);
});

test('responses that do not exist, and bad resumption parameters, are clear errors', async () => {
  await assert.rejects(openai.responses.retrieve('resp_nothing'), (e) => e.status === 404);
  await assert.rejects(openai.responses.cancel('resp_nothing'), (e) => e.status === 404);
  const bad = await fetch(`${gateway.baseURL}/responses/resp_nothing?stream=true&starting_after=minus-one`);
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error.param, 'starting_after');
  await assert.rejects(openai.responses.create({ model: MODEL, input: 'Hi', previous_response_id: 'resp_x' }), (e) => e.status === 400);
  // A job of another endpoint is no response.
  const chat = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say hello.' }] });
  await assert.rejects(openai.responses.retrieve(chat.id), (e) => e.status === 404);
});
