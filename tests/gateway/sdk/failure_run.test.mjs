// The failure run through the front door (docs/redis.md, "Sentinel and failover"; docs/gateway.md,
// "Responses across brokers"), with the official OpenAI SDK for Node against real processes: a
// Redis primary with one replica and three Sentinels, two brokers on redis+sentinel:// with
// --redis-wait-replicas 1, three workers on the demo pair with its drafter spread over them, and
// one gateway in front of both brokers. Background responses and streaming chat completions run
// once without faults, for the reference, then again while a worker, a broker and the gateway
// are killed (and restarted) and the Redis primary fails over. Every response must end exactly
// as in the fault-free run and resume byte for byte; every chat stream must complete with the
// reference text or fail with an error, never end short as a success; and in Redis every job
// has a gap-free result stream with exactly one final.
//
//   FLASHQ_BIN=build/bin node --test tests/gateway/sdk/failure_run.test.mjs
//   FLASHQ_SOAK=1 ...   more requests, and the faults repeated
//   FLASHQ_VERBOSE=1 ... what happens when, and each chat stream that failed, on stderr
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import { DRAFTER, MODEL, OpenAI, Program, RedisClient, TARGET, API_KEY, freePort, redisCommand, startBroker,
  startRedis, startSentinels, waitFor } from './harness.mjs';

const SOAK = process.env.FLASHQ_SOAK === '1';
const ROUNDS = SOAK ? 4 : 1;             // each round: every fault once
const WAVE_RESPONSES = SOAK ? 30 : 20;   // background responses a wave creates (a fault strikes meanwhile)
const WAVE_CHATS = SOAK ? 6 : 4;         // chat streams a wave starts first
const FAULTS = ['worker', 'broker', 'gateway', 'redis primary'];
const WAVES = ROUNDS * FAULTS.length + 1;  // the last wave runs after the last fault
const TERMINAL = new Set(['completed', 'incomplete', 'failed', 'cancelled']);

const programs = [];  // everything started, stopped at the end
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const since = (start) => Date.now() - start;
const runStarted = Date.now();
const note = (what) => {
  if (process.env.FLASHQ_VERBOSE) console.error(`${(since(runStarted) / 1000).toFixed(2)} s: ${what}`);
};

after(async () => {
  for (const program of programs.reverse()) if (program.running()) await program.stop();
});

function track(program) {
  programs.push(program);
  return program;
}

function kill(program) {
  program.child.kill('SIGKILL');
  return program.exited;
}

async function httpGet(port, urlPath) {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${urlPath}`);
    return { status: response.status, text: await response.text() };
  } catch {
    return { status: 0, text: '' };
  }
}

// ---- The requests: the same ones in both runs, greedy; the responses short.

function responseRequest(i) {
  return { model: MODEL, input: `Request ${i}: what does the queue hold today?`, background: true,
    temperature: 0, max_output_tokens: 24 + (i % 25) };
}

// Longer than the responses, so that the faults find chat streams under way.
function chatRequest(i) {
  return { model: MODEL, messages: [{ role: 'user', content: `Chat ${i}: tell me about the broker.` }],
    stream: true, temperature: 0, max_tokens: 320 + 16 * (i % 5) };
}

// ---- The deployment.

let sentinels;
let primary;   // the Redis first started as the primary
let replica;   // and its replica
const brokers = [];
const workers = [];
let gatewayPort;
let gateway;
let openai;

function brokerFlags(consumer) {
  return ['--redis', sentinels.url, '--redis-consumer', consumer, '--redis-claim-idle-ms', '1500',
    '--redis-wait-replicas', '1'];
}

async function brokerWorkers(broker) {
  const { text } = await httpGet(broker.httpPort, '/metrics');
  const line = text.split('\n').find((l) => l.startsWith('flashq_workers '));
  return line ? Number(line.split(' ')[1]) : -1;
}

async function startBrokerNamed(consumer) {
  const broker = await startBroker(brokerFlags(consumer));
  track(broker.program);
  broker.consumer = consumer;
  return broker;
}

// The same broker again, on its endpoints and with its consumer name, after it was killed.
async function restartBroker(broker) {
  broker.program = track(new Program('flashq-broker', ['--frontend', broker.frontend, '--stream', broker.stream,
    '--backend', broker.backend, '--http', `127.0.0.1:${broker.httpPort}`, '--drain-timeout-ms', '0',
    ...brokerFlags(broker.consumer)]));
  await waitFor(async () => !broker.program.running() || (await httpGet(broker.httpPort, '/healthz')).status === 200,
    60, `broker ${broker.consumer} to restart`);
  assert.ok(broker.program.running(), broker.program.output());
}

function startWorker(broker) {
  const worker = track(new Program('flashq-worker', ['--broker', broker.backend, '--model', TARGET, '--drafter', DRAFTER,
    '--device', 'cpu', '--slots', '2']));
  worker.broker = broker;
  return worker;
}

async function waitForWorkers(broker, count) {
  await waitFor(async () => (await brokerWorkers(broker)) >= count, 90, `${count} workers on broker ${broker.consumer}`);
}

async function startGatewayProgram() {
  gateway = track(new Program('flashq-gateway', ['--port', String(gatewayPort), '--wait-for-models-ms', '2000',
    ...brokers.flatMap((b) => ['--broker', b.frontend, '--stream', b.stream])]));
  await waitFor(async () => !gateway.running() || (await httpGet(gatewayPort, '/readyz')).status === 200, 60,
    'the gateway to be ready');
  assert.ok(gateway.running(), gateway.output());
}

async function deploy() {
  // Both data nodes append-only; a replica syncs at once rather than waiting for others to share
  // the primary's snapshot.
  const dataFlags = ['--repl-diskless-sync-delay', '0'];
  primary = await startRedis(dataFlags);
  track(primary.program);
  replica = await startRedis([...dataFlags, '--replicaof', '127.0.0.1', String(primary.port)]);
  track(replica.program);
  await waitFor(async () => (await redisCommand(replica.port, 'INFO', 'replication'))?.includes('master_link_status:up'),
    30, 'the replica to sync');
  sentinels = await startSentinels(primary.port, replica.port);
  sentinels.sentinels.forEach(({ program }) => track(program));

  brokers.push(await startBrokerNamed('a'), await startBrokerNamed('b'));
  workers.push(startWorker(brokers[0]), startWorker(brokers[0]), startWorker(brokers[1]));
  await waitForWorkers(brokers[0], 2);
  await waitForWorkers(brokers[1], 1);
  gatewayPort = await freePort();
  await startGatewayProgram();
  openai = new OpenAI({ baseURL: `http://127.0.0.1:${gatewayPort}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 60000 });
}

// ---- Talking to the gateway while it, or what is behind it, may be away.

const retryable = (e) => e.retry || e instanceof OpenAI.APIConnectionError ||
  (e instanceof OpenAI.APIError && (e.status === undefined || e.status === 429 || e.status >= 500));

// `call` until it answers, through connection errors and 5xx/429 answers (a gateway restarting,
// a broker away, no primary yet, a replica missing for --redis-wait-replicas).
async function retrying(what, call, seconds = 120) {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    try {
      return await call();
    } catch (e) {
      if (!retryable(e)) throw e;
      if (Date.now() > end) throw new Error(`${what}: still failing after ${seconds} s: ${e.message}`);
      await sleep(100);
    }
  }
}

// When a client last heard of progress: a chat chunk, or a response created (ACCEPTED).
const heard = { lastMs: 0 };

async function createResponse(i) {
  const created = await retrying(`creating response ${i}`, () => openai.responses.create(responseRequest(i)));
  heard.lastMs = Date.now();
  return created.id;
}

// Creates of `indices`, a few at a time; their ids by index into `ids`.
async function createResponses(indices, ids) {
  const queue = [...indices];
  await Promise.all(Array.from({ length: 8 }, async () => {
    for (let i = queue.shift(); i !== undefined; i = queue.shift()) ids[i] = await createResponse(i);
  }));
}

// Whether `e` is how the SDK reports a failed request: an OpenAI error, or (while it iterates a
// stream, where the SDK passes errors on unwrapped) the connection cut under the stream.
const requestFailed = (e) => e instanceof OpenAI.APIConnectionError || e instanceof OpenAI.APIError ||
  (e instanceof TypeError && e.message === 'terminated');

// A streaming chat completion, once: its text and finish reason, or the error it failed with.
async function runChat(i, streaming) {
  let id;
  let text = '';
  let finishReason = null;
  try {
    const stream = await openai.chat.completions.create(chatRequest(i));
    for await (const chunk of stream) {
      heard.lastMs = Date.now();
      if (id === undefined) streaming.now += 1;
      id ??= chunk.id;
      const choice = chunk.choices[0];
      if (choice?.delta?.content) text += choice.delta.content;
      if (choice?.finish_reason) finishReason = choice.finish_reason;
    }
  } catch (e) {
    if (requestFailed(e)) {
      note(`chat ${i} (${id ?? 'no id'}) failed after ${text.length} characters: ${e.constructor.name} ${e.message}`);
      return { id, error: e };
    }
    throw e;
  } finally {
    if (id !== undefined) streaming.now -= 1;
    streaming.ended += 1;
  }
  return { id, text, finishReason };
}

async function poll(id) {
  return retrying(`polling ${id}`, () => openai.responses.retrieve(id));
}

// Polls `ids` until every one is finished; their last answers by id.
async function waitUntilFinished(ids, seconds = 180) {
  const finished = new Map();
  const end = Date.now() + seconds * 1000;
  for (;;) {
    for (const id of ids) {
      if (finished.has(id)) continue;
      const response = await poll(id);
      if (TERMINAL.has(response.status)) finished.set(id, response);
    }
    if (finished.size === ids.length) return finished;
    if (Date.now() > end) {
      const unfinished = ids.filter((id) => !finished.has(id));
      throw new Error(`responses never finished: ${unfinished.join(' ')}\n${await whereTheyAre(unfinished)}`);
    }
    await sleep(200);
  }
}

// What Redis and the programs' logs say of jobs that never finished, for the failure's message.
async function whereTheyAre(ids) {
  const lines = [];
  try {
    const redis = await RedisClient.connect(await sentinels.primaryPort());
    try {
      for (const id of ids) {
        const hash = await redis.command('HGETALL', `flashq:job:{${id}}`);
        const fields = (hash ?? []).flatMap((v, n) => (n % 2 || ['final', 'metadata'].includes(v) ? [] : [`${v}=${hash[n + 1]}`]));
        lines.push(`${id}: ${fields.join(' ')}; ${await redis.command('XLEN', `flashq:out:{${id}}`)} results`);
      }
      for (const stream of ['flashq:jobs', 'flashq:model:target:jobs']) {
        const pending = await redis.command('XPENDING', stream, 'flashq').catch((e) => e.message);
        lines.push(`${stream}: length ${await redis.command('XLEN', stream)}, pending ${JSON.stringify(pending)}`);
      }
    } finally {
      redis.close();
    }
  } catch (e) {
    lines.push(`Redis: ${e.message}`);
  }
  const tail = (program) => program.output().trimEnd().split('\n').slice(-40).join('\n');
  for (const b of brokers) {
    const { text } = await httpGet(b.httpPort, '/metrics');
    const gauges = text.split('\n').filter((l) => /^flashq_(queue|workers|jobs_running|worker_slots|redis)/.test(l));
    lines.push(`--- broker ${b.consumer} (${gauges.join(', ')}):\n${tail(b.program)}`);
  }
  workers.forEach((w, n) => lines.push(`--- worker ${n} (broker ${w.broker.consumer}):\n${tail(w)}`));
  if (gateway) lines.push(`--- gateway:\n${tail(gateway)}`);
  return lines.join('\n');
}

// The raw server-sent events of GET /v1/responses/{id}?stream=true, as [{type, data, text}] with
// `text` the event's bytes exactly as sent.
async function rawStream(id, startingAfter) {
  const query = startingAfter === undefined ? 'stream=true' : `stream=true&starting_after=${startingAfter}`;
  const body = await retrying(`streaming ${id}`, async () => {
    const response = await fetch(`http://127.0.0.1:${gatewayPort}/v1/responses/${id}?${query}`,
      { headers: { authorization: `Bearer ${API_KEY}` } })
      .catch((e) => { throw Object.assign(new Error(`no gateway: ${e.message}`), { retry: true }); });
    const text = await response.text();
    if (response.status !== 200) {
      throw Object.assign(new Error(`${response.status}: ${text}`), { retry: response.status >= 500 });
    }
    return text;
  });
  return body.split('\n\n').filter((block) => block.length).map((block) => ({
    type: block.match(/^event: (.*)$/m)?.[1],
    data: JSON.parse(block.match(/^data: (.*)$/m)[1]),
    text: `${block}\n\n`,
  }));
}

const textOf = (events) => events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.data.delta).join('');

// ---- The faults.

const figures = { faults: [], failover: [] };

async function killWorker(round) {
  const worker = workers[round % workers.length];
  const serving = workers.filter((w) => w.broker === worker.broker).length;
  await kill(worker);
  // Back once its broker counted it gone (and took its jobs back, to run as continuations): not
  // later, since a broker whose last worker died holds the jobs it took until a worker returns
  // (docs/redis.md, "Limits").
  await waitFor(async () => {
    const left = await brokerWorkers(worker.broker);
    return left >= 0 && left < serving;
  }, 60, `broker ${worker.broker.consumer} to count its worker gone`);
  workers[workers.indexOf(worker)] = startWorker(worker.broker);
  await waitForWorkers(worker.broker, serving);
}

async function killBroker(round, waveIds) {
  const broker = brokers[round % brokers.length];
  await kill(broker.program);
  // Down while the wave runs on the other: its entries go to the other broker once idle.
  await waitUntilFinished(await waveIds);
  await restartBroker(broker);
  await waitForWorkers(broker, workers.filter((w) => w.broker === broker).length);
}

async function killGateway() {
  await kill(gateway);
  await startGatewayProgram();
}

// What Redis holds of the jobs on `port`: per job id, its state and next seq.
async function jobsOn(port) {
  const redis = await RedisClient.connect(port);
  try {
    const keys = [];
    let cursor = '0';
    do {
      const [next, batch] = await redis.command('SCAN', cursor, 'MATCH', 'flashq:job:*', 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    const states = await Promise.all(keys.map((key) => redis.command('HMGET', key, 'state', 'next_seq')));
    // flashq:job:{<id>}: the id is the key's hash tag.
    return new Map(keys.map((key, i) => [key.slice('flashq:job:{'.length, -1),
      { state: states[i][0], nextSeq: Number(states[i][1] ?? 0) }]));
  } finally {
    redis.close();
  }
}

// Whether any job on `port` moved on from `before` (a job's next seq or state changed, or a job
// submitted since was taken by a broker): jobs flow.
async function jobsMovedOn(port, before) {
  const now = await jobsOn(port).catch(() => null);
  if (!now) return false;
  for (const [id, job] of now) {
    const was = before.get(id);
    if (was ? was.nextSeq !== job.nextSeq || was.state !== job.state : job.state !== 'queued') return true;
  }
  return false;
}

async function unfinishedJobs() {
  const jobs = await jobsOn(await sentinels.primaryPort());
  return [...jobs.values()].filter((job) => job.state !== 'finished').length;
}

const nodeOn = (port) => (port === primary.port ? primary : replica);
const otherNode = (node) => (node === primary ? replica : primary);

// Whether the node the Sentinels name as primary has the other as its replica, in sync.
async function replicated() {
  const port = await sentinels.primaryPort();
  if (!port) return false;
  const info = await redisCommand(otherNode(nodeOn(port)).port, 'INFO', 'replication');
  return Boolean(info?.includes('master_link_status:up') && info.includes(`master_port:${port}`));
}

async function failOverPrimary() {
  const oldPort = await sentinels.primaryPort();
  const old = nodeOn(oldPort);
  // No write is held first: with --redis-wait-replicas 1, whatever a broker told anyone (ACCEPTED,
  // an event, a final) is on the replica already (docs/redis.md, "Sentinel and failover").
  await kill(old.program);
  const killed = Date.now();
  // The replica's data stays as the primary left it until it is promoted.
  const before = await jobsOn(otherNode(old).port);
  await waitFor(async () => ![0, oldPort].includes(await sentinels.primaryPort()), 60,
    'the Sentinels to promote the replica')
    .catch((e) => { throw new Error(`${e.message}\n${sentinels.logs()}`); });
  const promoted = Date.now();
  // Back as a replica of the new primary (Sentinel makes it one), which --redis-wait-replicas 1
  // needs before anything is accepted or delivered again.
  const restarted = old.restart();
  await waitFor(async () => jobsMovedOn(await sentinels.primaryPort(), before), 60,
    'the brokers to write to the promoted replica');
  const writingMs = since(killed);
  await restarted;
  track(old.program);
  // A primary and its replica again: as a rule the old primary, a replica of the promoted one. On
  // a loaded machine the Sentinels may fail over once more (a new primary slow to answer their
  // PINGs for down-after is down to them), to the returning node; what anyone was told is on both.
  await waitFor(replicated, 60, 'a primary with its replica in sync again')
    .catch((e) => { throw new Error(`${e.message}\n${sentinels.logs()}`); });
  const replicaBackMs = since(killed);
  const failedBack = (await sentinels.primaryPort()) === oldPort;
  // Jobs flow again when a client hears of progress (nothing is told before the promotion): the
  // requests struck, or else the next wave's.
  const flowing = waitFor(() => heard.lastMs > promoted, 120, 'a client to hear of progress after the failover')
    .then(() => heard.lastMs - killed);
  figures.failover.push({ promotedMs: promoted - killed, writingMs, replicaBackMs, failedBack, flowing });
}

async function inject(fault, round, waveIds, chatsStreaming) {
  figures.faults.push({ fault, jobsUnfinished: await unfinishedJobs(), chatsStreaming });
  if (fault === 'worker') await killWorker(round);
  if (fault === 'broker') await killBroker(round, waveIds);
  if (fault === 'gateway') await killGateway();
  if (fault === 'redis primary') await failOverPrimary();
  note(`${fault} killed and back`);
}

// ---- The run.

// Every request once, in waves of chat streams and responses. In a wave with a fault, the fault
// strikes once the wave's chat streams are under way (should they all be over by then, at once),
// while its responses are being created: so that it hits requests in flight and creates still
// coming. The responses' ends by index, and the chat results.
async function runAll(faultOf) {
  const ids = [];
  const chats = [];
  for (let wave = 0; wave < WAVES; ++wave) {
    // How many of the wave's chat streams have begun (a first chunk) and not ended, and ended.
    const streaming = { now: 0, ended: 0 };
    for (let c = 0; c < WAVE_CHATS; ++c) {
      const i = wave * WAVE_CHATS + c;
      chats[i] = runChat(i, streaming);
    }
    // The chat streams start first, one after another at the gateway, which takes brokers in
    // turn: so they are spread over both brokers.
    await waitFor(() => streaming.now + streaming.ended === WAVE_CHATS, 120, `the chat streams of wave ${wave} to start`);
    const indices = Array.from({ length: WAVE_RESPONSES }, (_, r) => wave * WAVE_RESPONSES + r);
    const creating = createResponses(indices, ids).then(() => indices.map((i) => ids[i]));
    const fault = faultOf(wave);
    if (fault) {
      await inject(fault, Math.floor(wave / FAULTS.length), creating, streaming.now);
      // Each chat stream the fault struck ends, completed or failed, once what it struck is back:
      // none is left open without events (and none is ended by the next fault instead).
      await waitFor(() => streaming.ended === WAVE_CHATS, 30,
        `the chat streams of wave ${wave} to end after the ${fault} was back (${streaming.now} still open)`);
    }
    await creating;
    note(`wave ${wave}: ${indices.length} responses created`);
  }
  const finished = await waitUntilFinished(ids);
  return { ids, ends: ids.map((id) => finished.get(id)), chats: await Promise.all(chats) };
}

test('a failure run: every response ends as without faults, every chat stream whole or failed, Redis exact', async () => {
  const started = Date.now();
  await deploy();

  const reference = await runAll(() => null);
  reference.chats.forEach((chat, i) => {
    assert.equal(chat.error, undefined, `reference chat ${i}: ${chat.error?.message}`);
    assert.ok(chat.finishReason, `reference chat ${i} ended without a finish reason`);
  });
  const referenceMs = since(started);

  const faulty = await runAll((wave) => (wave < ROUNDS * FAULTS.length ? FAULTS[wave % FAULTS.length] : null))
    .catch(async (e) => {
      // Where things stood, unless the failure says so already.
      if (!e.message.startsWith('responses never finished')) e.message += `\n${await whereTheyAre([])}`;
      throw e;
    });

  // Every response ends exactly as in the fault-free run.
  faulty.ends.forEach((end, i) => {
    assert.equal(end.status, reference.ends[i].status, `response ${i} (${faulty.ids[i]}): status`);
    assert.equal(end.output_text, reference.ends[i].output_text, `response ${i} (${faulty.ids[i]}): output_text`);
  });

  // Each one's stream, whole and resumed from its middle: the resumed one is the whole one's
  // tail, byte for byte.
  let resumed = 0;
  for (const [i, id] of faulty.ids.entries()) {
    const whole = await rawStream(id);
    whole.forEach((event, n) => assert.equal(event.data.sequence_number, n, `response ${id}: sequence numbers`));
    assert.ok(['response.completed', 'response.incomplete', 'response.failed'].includes(whole.at(-1).type),
      `response ${id} ends with ${whole.at(-1).type}`);
    assert.equal(textOf(whole), reference.ends[i].output_text, `response ${id}: streamed text`);
    const middle = Math.floor(whole.length / 2);
    const tail = await rawStream(id, middle);
    assert.deepEqual(tail.map((e) => e.text), whole.slice(middle + 1).map((e) => e.text), `response ${id}: resumed`);
    resumed += 1;
  }

  // Every chat stream completed with the reference text, or failed with an error.
  let chatsCompleted = 0;
  let chatsFailed = 0;
  faulty.chats.forEach((chat, i) => {
    if (chat.error) {
      chatsFailed += 1;
      return;
    }
    assert.ok(chat.finishReason, `chat ${i} (${chat.id}) ended without a finish reason: a truncated success`);
    assert.equal(chat.text, reference.chats[i].text, `chat ${i} (${chat.id}): text`);
    chatsCompleted += 1;
  });

  // In Redis, on whichever node is primary now: every job finished, its result stream seqs
  // 0..n with no gap, exactly one final, and it last.
  const primaryPort = await sentinels.primaryPort();
  const jobs = await jobsOn(primaryPort);
  for (const id of [...reference.ids, ...faulty.ids]) assert.ok(jobs.has(id), `response ${id} is not in Redis`);
  const redis = await RedisClient.connect(primaryPort);
  let duplicateFinals = 0;
  let gaps = 0;
  try {
    for (const [id, job] of jobs) {
      assert.equal(job.state, 'finished', `job ${id}: state`);
      const entries = await redis.command('XRANGE', `flashq:out:{${id}}`, '-', '+');
      const fields = entries.map(([, list]) => Object.fromEntries(list.flatMap((v, n) => (n % 2 ? [] : [[v, list[n + 1]]]))));
      fields.forEach((entry, n) => { if (Number(entry.seq) !== n) gaps += 1; });
      const finals = fields.filter((entry) => entry.final !== undefined).length;
      duplicateFinals += Math.max(0, finals - 1);
      assert.equal(finals, 1, `job ${id}: ${finals} finals in flashq:out:{${id}}`);
      assert.ok(fields.at(-1).final !== undefined, `job ${id}: the final is not last`);
    }
    assert.equal(gaps, 0, 'result streams with a gap');
    assert.equal(await redis.command('XLEN', 'flashq:dead'), 0, 'dead letters');
  } finally {
    redis.close();
  }

  const failovers = [];
  for (const f of figures.failover) {
    const back = f.failedBack ? 'the old primary promoted again (a second failover), with its replica'
      : 'the old primary back as a replica';
    failovers.push(`promoted after ${f.promotedMs} ms, brokers writing to it after ${f.writingMs} ms, ${back} ` +
      `after ${f.replicaBackMs} ms, jobs flowing to clients again after ${await f.flowing} ms`);
  }
  console.log([
    `failure run (${SOAK ? 'soak' : 'quick'}): ${faulty.ids.length} responses, each as without faults ` +
      `(reference run ${(referenceMs / 1000).toFixed(1)} s with the start, whole run ${(since(started) / 1000).toFixed(1)} s)`,
    `chat streams: ${chatsCompleted} completed with the reference text, ${chatsFailed} failed with an error, 0 truncated`,
    `resumed streams checked byte for byte: ${resumed}`,
    `faults injected: ${figures.faults.length}, each with jobs unfinished and chat streams under way: ` +
      figures.faults.map((f) => `${f.fault} (${f.jobsUnfinished} jobs, ${f.chatsStreaming} chats)`).join(', '),
    `Redis: ${jobs.size} jobs, every one finished, ${gaps} gaps, ${duplicateFinals} duplicate finals`,
    ...failovers.map((line) => `primary failover (down-after ${sentinels.downAfterMs} ms): ${line}`),
  ].join('\n'));
});
