// Background responses through the gateway with brokers on Redis (docs/gateway.md, "Responses
// across brokers"), with the official OpenAI SDK for Node: a response is followed through a
// gateway whose broker did not run the job, after the broker that ran it died, and once only
// Redis holds its events. Real redis-server, brokers, scripted workers and gateways.
//
//   FLASHQ_BIN=build/bin node --test tests/gateway/sdk/redis_responses.test.mjs
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { Program, client, startBroker, startGateway, startRedis, startScriptedWorker, waitFor }
  from './harness.mjs';

const MODEL = 'scripted-hermes';
const STORY = 'Once upon a time a queue held many jobs, and every one of them was served in its turn. '.repeat(3);
// Slow: 7-byte pieces every 40 ms, about 1.5 s in all, so a broker dies while the job runs.
const RULES = [{ when: 'Tell a story', reply: STORY, delay_ms: 40 }, { when: '', reply: 'Nothing is scripted.' }];

let redis;
const programs = [];  // everything started, stopped (or found dead) at the end

function brokerFlags(consumer) {
  return ['--redis', redis.url, '--redis-consumer', consumer, '--redis-claim-idle-ms', '1500'];
}

async function broker(consumer) {
  const started = await startBroker(brokerFlags(consumer));
  programs.push(started.program);
  started.consumer = consumer;
  return started;
}

// The same broker again (same endpoints and consumer name) after it was killed.
async function restart(killed) {
  const program = new Program('flashq-broker', ['--frontend', killed.frontend, '--stream', killed.stream, '--backend',
    killed.backend, '--http', `127.0.0.1:${killed.httpPort}`, '--drain-timeout-ms', '0', ...brokerFlags(killed.consumer)]);
  programs.push(program);
  await waitFor(async () => {
    try {
      return (await fetch(`http://127.0.0.1:${killed.httpPort}/healthz`)).status === 200;
    } catch {
      return false;
    }
  }, 30, 'the restarted broker');
  killed.program = program;
  return killed;
}

async function worker(behind) {
  const started = await startScriptedWorker(behind, { model: MODEL, rules: RULES, toolCallFormat: 'hermes',
  });
  programs.push(started);
  return started;
}

async function gatewayFor(behind) {
  const started = await startGateway(behind);
  programs.push(started);
  return started;
}

function kill(program) {
  program.child.kill('SIGKILL');
  return program.exited;
}

async function rawStream(gateway, id, startingAfter) {
  const query = startingAfter === undefined ? 'stream=true' : `stream=true&starting_after=${startingAfter}`;
  const response = await fetch(`${gateway.baseURL}/responses/${id}?${query}`);
  assert.equal(response.status, 200, await response.clone().text());
  const body = await response.text();
  return body.split('\n\n').filter((block) => block.length).map((block) => ({
    type: block.match(/^event: (.*)$/m)?.[1],
    data: JSON.parse(block.match(/^data: (.*)$/m)[1]),
    text: `${block}\n\n`,
  }));
}

const textOf = (events) => events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.data.delta).join('');

before(async () => {
  redis = await startRedis();
  programs.push(redis.program);
});

after(async () => {
  for (const program of programs.reverse()) if (program.running()) await program.stop();
});

test('a response is followed through another broker after the one running it dies, then from Redis alone', async () => {
  // Broker a and its worker take the job; broker b is not there yet.
  const a = await broker('a');
  const workerOfA = await worker(a);
  const gatewayOfA = await gatewayFor(a);
  const started = await client(gatewayOfA).responses.create({ model: MODEL, input: 'Tell a story.', background: true });
  await waitFor(async () => (await client(gatewayOfA).responses.retrieve(started.id)).status === 'in_progress', 30,
    'the story to start on broker a');

  // Broker b with its own worker and gateway; a and its worker die mid-job. b knows nothing of the
  // job in memory: STATUS (with the job's metadata) and REPLAY come from Redis, and once a's
  // entry idles past the claim timeout b claims it and finishes it as a continuation.
  const b = await broker('b');
  await worker(b);
  const gatewayOfB = await gatewayFor(b);
  await kill(a.program);
  await kill(workerOfA);
  const polled = await client(gatewayOfB).responses.retrieve(started.id);
  assert.equal(polled.id, started.id);
  assert.ok(['queued', 'in_progress'].includes(polled.status), polled.status);
  const followed = await rawStream(gatewayOfB, started.id);
  assert.equal(followed.at(-1).type, 'response.completed');
  followed.forEach((event, i) => assert.equal(event.data.sequence_number, i));
  assert.equal(textOf(followed), STORY);
  const done = await client(gatewayOfB).responses.retrieve(started.id);
  assert.equal(done.status, 'completed');
  assert.equal(done.output_text, STORY);

  // A resumed stream is the tail of the whole one, byte for byte.
  const middle = Math.floor(followed.length / 2);
  const tail = await rawStream(gatewayOfB, started.id, middle);
  assert.deepEqual(tail.map((e) => e.text), followed.slice(middle + 1).map((e) => e.text));

  // Broker a restarted holds nothing in memory: through its gateway the response is read from Redis.
  await restart(a);
  await waitFor(async () => (await fetch(`${gatewayOfA.baseURL}/responses/${started.id}`)).status === 200, 30,
    'the gateway of a to reach its restarted broker');
  const again = await rawStream(gatewayOfA, started.id);
  assert.deepEqual(again.map((e) => e.text), followed.map((e) => e.text));
  const fromRedis = await client(gatewayOfA).responses.retrieve(started.id);
  assert.equal(fromRedis.status, 'completed');
  assert.equal(fromRedis.output_text, STORY);
});

test('a response another broker runs is read through a gateway whose broker serves no model', async () => {
  // c has no worker, so it takes nothing from Redis: d runs the job. A gateway in front of c alone
  // serves no model, yet renders the response from the job's metadata, which c reads from Redis.
  const c = await broker('c');
  const d = await broker('d');
  await worker(d);
  const gatewayOfD = await gatewayFor(d);
  const started = await client(gatewayOfD).responses.create({ model: MODEL, input: 'Tell a story.', background: true });
  const gatewayOfC = await startGateway(c, [], { expectReady: false });
  programs.push(gatewayOfC);
  const events = await rawStream(gatewayOfC, started.id);
  assert.equal(events.at(-1).type, 'response.completed');
  assert.equal(textOf(events), STORY);
  const whole = await rawStream(gatewayOfD, started.id);
  assert.deepEqual(events.map((e) => e.text), whole.map((e) => e.text), 'the same bytes through either broker');
  assert.equal((await client(gatewayOfC).responses.retrieve(started.id)).output_text, STORY);
});
