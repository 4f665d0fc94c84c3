// Log-probabilities through the gateway with the official OpenAI SDK for Node, on the demo pair:
// chat completions' logprobs / top_logprobs, completions' logprobs and the Responses API's
// include ["message.output_text.logprobs"] with top_logprobs, whole and streamed. At temperature 0
// the values are the same with and without speculation (the verifier's rows are the rows plain
// decoding computes); each token's bytes spell the text; the chosen token is its row's most
// likely; the streamed pieces add up to the whole answer; bad values are 400s naming the field.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_KEY, MODEL, client, startGateway, startUp, stopGatewayAndUp } from './harness.mjs';

let up;
let gateway;
let openai;

before(async () => {
  up = await startUp();
  gateway = await startGateway(up, ['--api-key', API_KEY]);
  openai = client(gateway);
});

after(() => stopGatewayAndUp(gateway, up));

const PROMPT = 'def fibonacci(n):';
const MESSAGES = [{ role: 'user', content: 'Write a function that adds two numbers.' }];

// Checks one token entry ({token, logprob, bytes, top_logprobs}) of a greedy answer: `top`
// candidates, most likely first, the chosen token among them at the head.
function assertGreedyEntry(entry, top) {
  assert.ok(Number.isFinite(entry.logprob) && entry.logprob <= 0, JSON.stringify(entry));
  assert.ok(Array.isArray(entry.bytes) && entry.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256));
  assert.equal(entry.top_logprobs.length, top, JSON.stringify(entry));
  for (let i = 1; i < entry.top_logprobs.length; ++i) {
    assert.ok(entry.top_logprobs[i - 1].logprob >= entry.top_logprobs[i].logprob, JSON.stringify(entry.top_logprobs));
  }
  if (top > 0) {
    assert.deepEqual(entry.top_logprobs[0].bytes, entry.bytes, 'temperature 0 takes the most likely token');
    assert.equal(entry.top_logprobs[0].logprob, entry.logprob);
  }
}

const spelled = (entries) => Buffer.from(entries.flatMap((e) => e.bytes)).toString('utf8');

async function chatLogprobs(spec, top) {
  const completion = await openai.chat.completions.create({
    model: MODEL, messages: MESSAGES, max_tokens: 24, temperature: 0, spec, logprobs: true, top_logprobs: top,
  });
  return completion;
}

test('chat: one entry per completion token, spelling the content, the same off and dflash', async () => {
  const off = await chatLogprobs('off', 3);
  const dflash = await chatLogprobs('dflash', 3);
  const choice = off.choices[0];
  const content = choice.logprobs.content;
  assert.equal(content.length, off.usage.completion_tokens);
  for (const entry of content) assertGreedyEntry(entry, 3);
  assert.equal(spelled(content), choice.message.content);
  assert.equal(dflash.choices[0].message.content, choice.message.content);
  assert.deepEqual(dflash.choices[0].logprobs, choice.logprobs);
});

test('chat: streamed chunks carry the same entries as the whole answer', async () => {
  const whole = await chatLogprobs('dflash', 2);
  const stream = await openai.chat.completions.create({
    model: MODEL, messages: MESSAGES, max_tokens: 24, temperature: 0, spec: 'dflash', logprobs: true, top_logprobs: 2,
    stream: true,
  });
  const entries = [];
  let text = '';
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    text += choice.delta?.content ?? '';
    if (choice.logprobs) entries.push(...choice.logprobs.content);
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.deepEqual(entries, whole.choices[0].logprobs.content);
});

test('chat: logprobs without top_logprobs has empty candidate lists; none asked is null', async () => {
  const asked = await openai.chat.completions.create({
    model: MODEL, messages: MESSAGES, max_tokens: 8, temperature: 0, logprobs: true,
  });
  for (const entry of asked.choices[0].logprobs.content) assertGreedyEntry(entry, 0);
  const plain = await openai.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 8, temperature: 0 });
  assert.equal(plain.choices[0].logprobs, null);
});

test('completions: tokens spell the text, offsets count their bytes, the same streamed', async () => {
  const whole = await openai.completions.create({
    model: MODEL, prompt: PROMPT, max_tokens: 24, temperature: 0, logprobs: 4, spec: 'dflash',
  });
  const choice = whole.choices[0];
  const { tokens, token_logprobs: values, top_logprobs: tops, text_offset: offsets } = choice.logprobs;
  assert.equal(tokens.length, whole.usage.completion_tokens);
  assert.equal(tokens.join(''), choice.text);
  assert.equal(values.length, tokens.length);
  let offset = 0;
  for (let i = 0; i < tokens.length; ++i) {
    assert.equal(offsets[i], offset);
    offset += Buffer.byteLength(tokens[i]);
    assert.ok(values[i] <= 0);
    assert.ok(Object.keys(tops[i]).length <= 4 && Object.keys(tops[i]).length >= 1);
    assert.equal(Math.max(...Object.values(tops[i])), values[i], 'temperature 0 takes the most likely token');
  }
  const off = await openai.completions.create({
    model: MODEL, prompt: PROMPT, max_tokens: 24, temperature: 0, logprobs: 4, spec: 'off',
  });
  assert.deepEqual(off.choices[0].logprobs, choice.logprobs);

  const stream = await openai.completions.create({
    model: MODEL, prompt: PROMPT, max_tokens: 24, temperature: 0, logprobs: 4, stream: true,
  });
  const streamed = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  for await (const chunk of stream) {
    const part = chunk.choices[0]?.logprobs;
    if (!part) continue;
    for (const key of Object.keys(streamed)) streamed[key].push(...part[key]);
  }
  assert.deepEqual(streamed, choice.logprobs);
});

test('responses: include message.output_text.logprobs, whole and streamed alike', async () => {
  const request = {
    model: MODEL, input: 'Write a function that adds two numbers.', max_output_tokens: 24, temperature: 0,
    include: ['message.output_text.logprobs'], top_logprobs: 2,
  };
  const whole = await openai.responses.create(request);
  const part = whole.output.find((item) => item.type === 'message').content[0];
  assert.equal(part.logprobs.length, whole.usage.output_tokens);
  for (const entry of part.logprobs) assertGreedyEntry(entry, 2);
  assert.equal(spelled(part.logprobs), part.text);
  assert.equal(whole.top_logprobs, 2);

  const deltas = [];
  let done;
  for await (const event of await openai.responses.create({ ...request, stream: true })) {
    if (event.type === 'response.output_text.delta') deltas.push(...event.logprobs);
    if (event.type === 'response.output_text.done') done = event.logprobs;
  }
  assert.deepEqual(deltas, part.logprobs);
  assert.deepEqual(done, part.logprobs);
});

test('bad logprobs requests are 400s naming the field', async () => {
  const cases = [
    [() => openai.chat.completions.create({ model: MODEL, messages: MESSAGES, logprobs: true, top_logprobs: 21 }), 'top_logprobs'],
    [() => openai.chat.completions.create({ model: MODEL, messages: MESSAGES, top_logprobs: 3 }), 'top_logprobs'],
    [() => openai.chat.completions.create({ model: MODEL, messages: MESSAGES, logprobs: 'yes' }), 'logprobs'],
    [() => openai.completions.create({ model: MODEL, prompt: PROMPT, logprobs: 21 }), 'logprobs'],
    [() => openai.completions.create({ model: MODEL, prompt: PROMPT, logprobs: -1 }), 'logprobs'],
    [() => openai.responses.create({ model: MODEL, input: 'hi', top_logprobs: 99 }), 'top_logprobs'],
  ];
  for (const [call, param] of cases) {
    await assert.rejects(call, (error) => {
      assert.equal(error.status, 400, String(error));
      assert.equal(error.param, param, String(error));
      return true;
    });
  }
});
