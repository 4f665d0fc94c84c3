// Real processes for the gateway's tests with the official OpenAI SDK: `flashq up` on the demo
// pair (a broker and a worker), and flashq-gateway in front of it, on free loopback ports.
// Programs come from FLASHQ_BIN; the SDK from third_party/npm (scripts/setup installs it).
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const require = createRequire(path.join(REPO, 'third_party/npm/package.json'));
export const OpenAI = require('openai');
// The SDK's typed-output helpers, zod (the schemas they take) and ajv (an independent JSON
// Schema validator), for the structured-output tests.
export const npm = (name) => require(name);
export const TARGET = path.join(REPO, 'models/demo/target');
export const DRAFTER = path.join(REPO, 'models/demo/drafter');
export const MODEL = 'target';  // the name a worker serves a model directory under
export const API_KEY = 'sk-flashq-test-key';

export function bin(name) {
  const file = path.join(process.env.FLASHQ_BIN || path.join(REPO, 'build/bin'), name);
  if (!fs.existsSync(file)) throw new Error(`${file} is not built (set FLASHQ_BIN to the build's bin directory)`);
  return file;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A program run for the tests (one of ours by name, or `command` as given); its output goes to a
// log file printed when it fails to start.
export class Program {
  constructor(name, args, { command = bin(name) } = {}) {
    this.logPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'flashq-gateway-test-')), `${name}.log`);
    const log = fs.openSync(this.logPath, 'w');
    this.child = spawn(command, args, {
      cwd: REPO, stdio: ['ignore', log, log], env: { ...process.env, OMP_NUM_THREADS: '1', PYTHONDONTWRITEBYTECODE: '1' },
    });
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
    this.exitCode = undefined;
    this.exited.then(({ code }) => { this.exitCode = code; });
  }
  output() { return fs.readFileSync(this.logPath, 'utf8'); }
  running() { return this.exitCode === undefined; }
  async stop() {
    if (this.running()) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 20000);
    const result = await this.exited;
    clearTimeout(timer);
    return result;
  }
}

// The status of a GET of `urlPath` on the loopback `port`; 0 while nothing answers there (within
// 5 s: a socket that takes the connection and never answers is not left waited on).
export async function httpStatus(port, urlPath) {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${urlPath}`, { signal: AbortSignal.timeout(5000) });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 0;
  }
}

export async function waitFor(predicate, seconds, what) {
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    if (await predicate()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

// A program started on free ports by `start` ({program, ...}), ready once `ready(started)` holds
// (within `seconds`); tried again on other ports while one was taken between freePort() and the
// bind.
async function startOnFreePorts(what, start, ready, seconds = 90) {
  for (let attempt = 1; ; ++attempt) {
    const started = await start();
    const { program } = started;
    await waitFor(async () => !program.running() || await ready(started), seconds, what)
      .catch((e) => { throw new Error(`${e.message}\n${program.output()}`); });
    if (program.running()) return started;
    await program.exited;
    if (attempt < 3 && program.output().includes('Address already in use')) continue;
    throw new Error(`${what} exited:\n${program.output()}`);
  }
}

// `flashq up` on the demo pair without its embedded gateway (the tests put flashq-gateway in
// front), ready once its /readyz says its worker registered.
export function startUp() {
  return startOnFreePorts('flashq up', async () => {
    const frontend = `tcp://127.0.0.1:${await freePort()}`;
    const stream = `tcp://127.0.0.1:${await freePort()}`;
    const httpPort = await freePort();
    const program = new Program('flashq', ['up', '--model', TARGET, '--drafter', DRAFTER, '--slots', '2',
      '--device', 'cpu', '--frontend', frontend, '--stream', stream, '--http', `127.0.0.1:${httpPort}`, '--gateway', '']);
    return { program, frontend, stream, httpPort };
  }, async ({ httpPort }) => (await httpStatus(httpPort, '/readyz')) === 200);
}

// `flashq up` on the model directory `dir` (and `drafter`, when given) with its own embedded
// gateway, on free loopback ports; ready once the gateway's /readyz says a model is served.
// Returns {program, baseURL}.
export async function startUpWithGateway(dir, { drafter } = {}) {
  const { program, gatewayPort } = await startOnFreePorts('flashq up', async () => {
    const [frontend, stream, http, gatewayPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const program = new Program('flashq', ['up', '--model', dir, ...(drafter ? ['--drafter', drafter] : []),
      '--slots', '2', '--device', 'cpu', '--frontend', `tcp://127.0.0.1:${frontend}`,
      '--stream', `tcp://127.0.0.1:${stream}`, '--http', `127.0.0.1:${http}`, '--gateway', `127.0.0.1:${gatewayPort}`]);
    return { program, gatewayPort };
  }, async ({ gatewayPort }) => (await httpStatus(gatewayPort, '/readyz')) === 200);
  return { program, baseURL: `http://127.0.0.1:${gatewayPort}/v1` };
}

// Stops `gateway`, then `up` (from startUp); either may be missing, as after a setup that failed.
// Both are stopped first; then it throws, with the program's output, unless each exited 0.
export async function stopGatewayAndUp(gateway, up) {
  const exits = [];
  for (const program of [gateway, up?.program]) {
    if (program) exits.push({ program, code: (await program.stop()).code });
  }
  for (const { program, code } of exits) {
    if (code !== 0) throw new Error(`a program exited ${code}:\n${program.output()}`);
  }
}

// flashq-gateway in front of `broker` ({frontend, stream}), ready once /readyz says a broker
// serves a model (or, with `expectReady` false, once it answers /healthz).
export async function startGateway(broker, extraArgs = [], { expectReady = true } = {}) {
  const page = expectReady ? '/readyz' : '/healthz';
  const { program: gateway, port } = await startOnFreePorts('flashq-gateway', async () => {
    const port = await freePort();
    const program = new Program('flashq-gateway', ['--port', String(port), '--broker', broker.frontend,
      '--stream', broker.stream, '--wait-for-models-ms', '2000', ...extraArgs]);
    return { program, port };
  }, async ({ port }) => (await httpStatus(port, page)) === 200, 30);
  gateway.port = port;
  gateway.baseURL = `http://127.0.0.1:${port}/v1`;
  return gateway;
}

export function client(gateway, options = {}) {
  return new OpenAI({ baseURL: gateway.baseURL, apiKey: API_KEY, maxRetries: 0, timeout: 60000, ...options });
}

// The same job run in one process, without broker or gateway: `flashq generate --json`.
export function generateDirectly(args) {
  const result = spawnSync(bin('flashq'), ['generate', '--model', TARGET, '--device', 'cpu', '--json', ...args],
    { cwd: REPO, encoding: 'utf8', env: { ...process.env, OMP_NUM_THREADS: '1' } });
  if (result.status !== 0) throw new Error(`flashq generate failed:\n${result.stdout}${result.stderr}`);
  return JSON.parse(result.stdout.trim().split('\n').pop());
}

// `flashq status ID --json` against `broker`.
export function jobStatus(broker, id) {
  const result = spawnSync(bin('flashq'), ['status', '--broker', broker.frontend, id], { cwd: REPO, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`flashq status failed:\n${result.stdout}${result.stderr}`);
  return JSON.parse(result.stdout.trim().split('\n').pop());
}

// ---- A broker with scripted workers behind it (the tool-call and reasoning tests). This part
// uses only the exports above and Node's own modules.

// A bare flashq-broker (no worker), for tests that put their own workers behind it; ready once
// its /healthz answers. Its backend is where workers connect.
export function startBroker(extraArgs = []) {
  return startOnFreePorts('flashq-broker', async () => {
    const frontend = `tcp://127.0.0.1:${await freePort()}`;
    const stream = `tcp://127.0.0.1:${await freePort()}`;
    const backend = `tcp://127.0.0.1:${await freePort()}`;
    const httpPort = await freePort();
    const program = new Program('flashq-broker', ['--frontend', frontend, '--stream', stream, '--backend', backend,
      '--http', `127.0.0.1:${httpPort}`, '--drain-timeout-ms', '0', ...extraArgs]);
    return { program, frontend, stream, backend, httpPort };
  }, async ({ httpPort }) => (await httpStatus(httpPort, '/healthz')) === 200, 30);
}

export const SCRIPTED_WORKER = path.join(REPO, 'tests/gateway/sdk/scripted_worker.py');

// The scripted worker (scripted_worker.py: no model, it streams the reply of the first rule
// whose `when` is in the job's last user or tool message) as a child process.
export class ScriptedWorker extends Program {
  constructor(broker, { model, rules, toolCallFormat = 'none', reasoningFormat = 'none', extraArgs = [] }) {
    const scriptPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'flashq-scripted-')), `${model}.json`);
    fs.writeFileSync(scriptPath, JSON.stringify(rules));
    super(`scripted-worker-${model}`, [SCRIPTED_WORKER, '--broker', broker.backend, '--model', model,
      '--script', scriptPath, '--tool-call-format', toolCallFormat, '--reasoning-format', reasoningFormat,
      ...extraArgs], { command: '/usr/bin/python3' });
    this.scriptPath = scriptPath;
  }
}

// A scripted worker serving `model` behind `broker` ({backend}), once the broker has answered
// its READY. Options: rules (the script), toolCallFormat (hermes, llama3_json, none),
// reasoningFormat (none, think, think_in_prompt), extraArgs (--max-model-len, --piece-bytes,
// --delay-ms, --slots).
export async function startScriptedWorker(broker, options) {
  const worker = new ScriptedWorker(broker, options);
  const what = `scripted worker ${options.model}`;
  await waitFor(() => !worker.running() || worker.output().includes('registered'), 30, what)
    .catch((e) => { throw new Error(`${e.message}\n${worker.output()}`); });
  if (!worker.running()) throw new Error(`scripted worker ${options.model} exited:\n${worker.output()}`);
  return worker;
}

// The pieces the scripted worker streams `text` in: at most `pieceBytes` UTF-8 bytes each, whole
// characters; one token each, so their count is the completion's usage.
export function scriptedPieces(text, pieceBytes = 7) {
  const pieces = [];
  let current = '';
  for (const ch of text) {
    if (current && Buffer.byteLength(current + ch) > pieceBytes) {
      pieces.push(current);
      current = '';
    }
    current += ch;
  }
  if (current) pieces.push(current);
  return pieces;
}

// The scripted worker's made-up prompt length of a chat: its messages' content bytes / 4, rounded
// up, at least 1.
export function scriptedPromptTokens(messages) {
  const bytes = messages.reduce(
    (sum, m) => sum + (typeof m.content === 'string' ? Buffer.byteLength(m.content) : 0), 0);
  return Math.max(1, Math.ceil(bytes / 4));
}

// ---- Redis behind the brokers (the durability tests).

// Whether a Redis server answers PING on `port` (NOAUTH also means it is up).
export function redisAnswers(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    socket.setTimeout(500, () => { socket.destroy(); resolve(false); });
    socket.on('error', () => resolve(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (data) => {
      reply += data.toString();
      if (reply.includes('\r\n')) {
        socket.destroy();
        resolve(reply.startsWith('+PONG') || reply.startsWith('-NOAUTH'));
      }
    });
  });
}

// A real redis-server on a free port in its own directory, append-only and fsynced on every
// write (a restart keeps every acknowledged write); `restart()` starts it again on the same port
// and directory. `url` is what brokers take as --redis.
export async function startRedis(extraArgs = []) {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flashq-redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'yes',
    '--appendfsync', 'always', '--protected-mode', 'no', ...extraArgs];
  const redis = { port, dir, url: `redis://127.0.0.1:${port}` };
  redis.restart = async () => {
    redis.program = new Program('redis-server', args, { command: '/usr/bin/redis-server' });
    await waitFor(async () => !redis.program.running() || await redisAnswers(port), 30, 'redis-server')
      .catch((e) => { throw new Error(`${e.message}\n${redis.program.output()}`); });
    if (!redis.program.running()) throw new Error(`redis-server exited:\n${redis.program.output()}`);
    return redis;
  };
  return redis.restart();
}

// A Redis connection speaking RESP2 (the tests' own, so that they need no Redis package):
// `command(...args)` sends one command and resolves with its reply (a string, number, array or
// null), or rejects with the server's error; commands sent together are pipelined.
export class RedisClient {
  static connect(port, { timeoutMs = 1000 } = {}) {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`redis on port ${port}: no answer in ${timeoutMs} ms`)));
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.removeListener('error', reject);
        resolve(new RedisClient(socket, port));
      });
    });
  }

  constructor(socket, port) {
    this.socket = socket;
    this.port = port;
    this.waiting = [];
    this.buffer = Buffer.alloc(0);
    socket.on('data', (data) => this.read(data));
    const fail = (error) => {
      for (const { reject } of this.waiting.splice(0)) reject(error ?? new Error(`redis on port ${port}: connection closed`));
    };
    socket.on('error', fail);
    socket.on('close', () => fail());
  }

  command(...args) {
    const parts = [`*${args.length}\r\n`];
    for (const arg of args) {
      const text = String(arg);
      parts.push(`$${Buffer.byteLength(text)}\r\n${text}\r\n`);
    }
    return new Promise((resolve, reject) => {
      if (this.socket.destroyed) {
        reject(new Error(`redis on port ${this.port}: connection closed`));
        return;
      }
      this.waiting.push({ resolve, reject });
      this.socket.write(parts.join(''));
    });
  }

  close() { this.socket.destroy(); }

  read(data) {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, data]) : data;
    for (;;) {
      const parsed = parseResp(this.buffer, 0);
      if (!parsed) return;
      this.buffer = this.buffer.subarray(parsed.end);
      const { resolve, reject } = this.waiting.shift();
      if (parsed.value instanceof Error) reject(parsed.value);
      else resolve(parsed.value);
    }
  }
}

// One RESP2 reply from `buffer` at `at`: {value, end}, or null while it is incomplete.
function parseResp(buffer, at) {
  const lineEnd = buffer.indexOf('\r\n', at);
  if (lineEnd < 0) return null;
  const kind = String.fromCharCode(buffer[at]);
  const line = buffer.toString('utf8', at + 1, lineEnd);
  const next = lineEnd + 2;
  switch (kind) {
    case '+': return { value: line, end: next };
    case '-': return { value: new Error(line), end: next };
    case ':': return { value: Number(line), end: next };
    case '$': {
      const length = Number(line);
      if (length < 0) return { value: null, end: next };
      if (buffer.length < next + length + 2) return null;
      return { value: buffer.toString('utf8', next, next + length), end: next + length + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, end: next };
      const items = [];
      let end = next;
      for (let i = 0; i < count; ++i) {
        const item = parseResp(buffer, end);
        if (!item) return null;
        items.push(item.value);
        end = item.end;
      }
      return { value: items, end };
    }
    default: throw new Error(`redis sent a reply of unknown kind '${kind}'`);
  }
}

// One command on a connection of its own; null when the server does not answer.
export async function redisCommand(port, ...args) {
  let redis;
  try {
    redis = await RedisClient.connect(port);
    return await redis.command(...args);
  } catch {
    return null;
  } finally {
    redis?.close();
  }
}

// Three redis-sentinel processes monitoring the primary on `primaryPort` (with its replica on
// `replicaPort`) as `masterName`, each with its config in its own directory (Sentinel rewrites
// it as it learns), told of the two others and of the replica up front, and ready once each of
// them names the primary and knows the others and the replica: only then can they agree that the
// primary is down and elect one of them to fail it over. Tight timings, so that a test sees a
// failover within seconds; shorter than 1000 ms down-after, a Sentinel started on a loaded
// machine can think a live primary down before its first PING is answered.
export async function startSentinels(primaryPort, replicaPort,
  { masterName = 'flashq', downAfterMs = 1000, failoverTimeoutMs = 3000 } = {}) {
  const ports = [await freePort(), await freePort(), await freePort()];
  const idOf = (port) => String(port).padStart(40, '0');
  const sentinels = ports.map((port) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flashq-sentinel-'));
    const lines = [`port ${port}`, 'bind 127.0.0.1', 'protected-mode no', `dir ${dir}`,
      `sentinel monitor ${masterName} 127.0.0.1 ${primaryPort} 2`,
      `sentinel down-after-milliseconds ${masterName} ${downAfterMs}`,
      `sentinel failover-timeout ${masterName} ${failoverTimeoutMs}`,
      `sentinel parallel-syncs ${masterName} 1`,
      `sentinel myid ${idOf(port)}`,
      ...ports.filter((other) => other !== port)
        .map((other) => `sentinel known-sentinel ${masterName} 127.0.0.1 ${other} ${idOf(other)}`),
      `sentinel known-replica ${masterName} 127.0.0.1 ${replicaPort}`];
    fs.writeFileSync(path.join(dir, 'sentinel.conf'), `${lines.join('\n')}\n`);
    const program = new Program('redis-sentinel', [path.join(dir, 'sentinel.conf')], { command: '/usr/bin/redis-sentinel' });
    return { port, program };
  });
  const group = {
    sentinels,
    masterName,
    downAfterMs,
    // What brokers take as --redis.
    url: `redis+sentinel://${ports.map((port) => `127.0.0.1:${port}`).join(',')}/${masterName}`,
    // The primary's port as a majority of the Sentinels names it now; 0 while they disagree.
    async primaryPort() {
      const votes = new Map();
      for (const { port } of sentinels) {
        const reply = await redisCommand(port, 'SENTINEL', 'get-master-addr-by-name', masterName);
        if (Array.isArray(reply)) votes.set(Number(reply[1]), (votes.get(Number(reply[1])) ?? 0) + 1);
      }
      for (const [port, count] of votes) if (count >= 2) return port;
      return 0;
    },
    logs() {
      return sentinels.map(({ port, program }) => `---- sentinel ${port} ----\n${program.output()}`).join('');
    },
  };
  const aware = async () => {
    for (const { port, program } of sentinels) {
      if (!program.running()) throw new Error(`redis-sentinel on ${port} exited:\n${program.output()}`);
      const reply = await redisCommand(port, 'SENTINEL', 'MASTER', masterName);
      if (!Array.isArray(reply)) return false;
      const field = (name) => reply[reply.indexOf(name) + 1];
      if (Number(field('port')) !== primaryPort || field('num-other-sentinels') !== '2' || field('num-slaves') !== '1') {
        return false;
      }
    }
    return true;
  };
  await waitFor(aware, 30, 'the Sentinels to know the primary, its replica and each other')
    .catch((e) => { throw new Error(`${e.message}\n${group.logs()}`); });
  return group;
}
