// What the queue's limits look like through flashq-gateway with the official OpenAI SDK for Node:
// a full queue is 429 with Retry-After, a job past the deadline its header set is 504, and a
// client that does not read its stream is dropped rather than slowing the gateway. A
// flashq-broker holding one queued job, with one scripted worker of one slot behind it, runs a
// slow reply so that the queue fills; a second worker floods (megabytes of text, fast).
//
//   FLASHQ_BIN=build/bin node --test tests/gateway/sdk/queue_limits.test.mjs
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';

import { OpenAI, client, startBroker, startGateway, startScriptedWorker, waitFor } from './harness.mjs';

const MODEL = 'scripted-slow';
// About 4 s of reply (39 pieces of 7 bytes, 100 ms apart): the first test's requests must all
// arrive while the first job still runs, also on a loaded machine.
const SLOW_REPLY = 'A slow and steady answer, piece by piece, for as long as it takes. '.repeat(4);
const RULES = [
  { when: 'Take your time', reply: SLOW_REPLY, delay_ms: 100 },
  { when: '', reply: 'Quick.' },
];

const FLOOD_MODEL = 'scripted-flood';
const FLOOD = 'All work and no play. '.repeat(150000);  // 3.3 MB

let broker;
let worker;
let flooder;
let gateway;
let openai;

before(async () => {
  broker = await startBroker(['--max-queued-jobs', '1']);
  worker = await startScriptedWorker(broker, { model: MODEL, rules: RULES, extraArgs: ['--slots', '1'] });
  flooder = await startScriptedWorker(broker, { model: FLOOD_MODEL, rules: [{ when: '', reply: FLOOD }],
    extraArgs: ['--piece-bytes', '16384', '--max-model-len', '10000000'] });
  gateway = await startGateway(broker, ['--max-queued-bytes', '65536']);
  openai = client(gateway);
});

after(async () => {
  const problems = [];
  for (const program of [gateway, worker, flooder, broker?.program]) {
    if (!program) continue;
    const { code } = await program.stop();
    if (code !== 0) problems.push(`exited with ${code}:\n${program.output()}`);
  }
  assert.deepEqual(problems, []);
});

const SLOW = { model: MODEL, messages: [{ role: 'user', content: 'Take your time.' }], max_tokens: 100 };

test('a full queue is 429 with Retry-After, and the gateway serves again once it drains', async () => {
  // One job runs (its first chunk came), one waits (its stream's status came: it was accepted).
  const running = new AbortController();
  const first = await openai.chat.completions.create({ ...SLOW, stream: true }, { signal: running.signal });
  const firstChunks = first[Symbol.asyncIterator]();
  await firstChunks.next();
  const waiting = new AbortController();
  await openai.chat.completions.create({ ...SLOW, stream: true }, { signal: waiting.signal });

  const full = await fetch(`${gateway.baseURL}/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(SLOW),
  });
  const body = await full.json();
  assert.equal(full.status, 429, JSON.stringify(body));
  assert.equal(body.error.type, 'rate_limit_error');
  assert.ok(Number(full.headers.get('retry-after')) >= 1);
  await assert.rejects(openai.chat.completions.create(SLOW), (e) => e instanceof OpenAI.RateLimitError);

  // Leaving cancels both; then a request is served.
  running.abort();
  waiting.abort();
  const quick = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }] });
  assert.equal(quick.choices[0].message.content, 'Quick.');
});

test('a job past the deadline its header set is 504; a bad header is 400', async () => {
  await assert.rejects(
    openai.chat.completions.create(SLOW, { headers: { 'x-flashq-deadline-ms': '300', 'x-flashq-priority': '-5' } }),
    (e) => e instanceof OpenAI.InternalServerError && e.status === 504 && e.code === 'timeout');
  const quick = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }] },
    { headers: { 'x-flashq-deadline-ms': '30000', 'x-flashq-priority': '3' } });
  assert.equal(quick.choices[0].message.content, 'Quick.');
  await assert.rejects(openai.chat.completions.create(SLOW, { headers: { 'x-flashq-deadline-ms': 'soon' } }),
    (e) => e instanceof OpenAI.BadRequestError);
});

test('a client that does not read its stream is dropped, and the gateway serves on', async () => {
  const metric = async (name) => {
    const text = await (await fetch(`http://127.0.0.1:${gateway.port}/metrics`)).text();
    return Number(text.match(new RegExp(`^${name} (\\S+)$`, 'm'))?.[1]);
  };
  const droppedBefore = await metric('flashq_gateway_clients_dropped_total');
  // A raw connection that sends its request and never reads, with a small receive buffer so that
  // the kernel holds little of the stream: the gateway's queue for it passes --max-queued-bytes.
  const body = JSON.stringify({ model: FLOOD_MODEL, prompt: 'flood', max_tokens: 100000, stream: true });
  const request = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n`
    + `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  const idle = spawn('/usr/bin/python3', ['-c', [
    'import socket, sys, time',
    's = socket.socket()',
    's.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)',
    `s.connect(("127.0.0.1", ${gateway.port}))`,
    's.sendall(sys.stdin.buffer.read())',
    'time.sleep(600)',
  ].join('\n')], { stdio: ['pipe', 'ignore', 'inherit'] });
  idle.stdin.end(request);
  await waitFor(async () => (await metric('flashq_gateway_clients_dropped_total')) > droppedBefore, 60, 'the slow client to be dropped');
  // Meanwhile and after, others are served.
  const quick = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }] });
  assert.equal(quick.choices[0].message.content, 'Quick.');
  idle.kill();
});
