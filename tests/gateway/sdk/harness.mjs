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

async function httpStatus(port, urlPath) {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${urlPath}`);
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

// `flashq up` on the demo pair, ready once its /readyz says its worker registered.
export async function startUp() {
  const frontend = `tcp://127.0.0.1:${await freePort()}`;
  const stream = `tcp://127.0.0.1:${await freePort()}`;
  const httpPort = await freePort();
  const up = new Program('flashq', ['up', '--model', TARGET, '--drafter', DRAFTER, '--slots', '2', '--device', 'cpu',
    '--frontend', frontend, '--stream', stream, '--http', `127.0.0.1:${httpPort}`]);
  await waitFor(async () => !up.running() || (await httpStatus(httpPort, '/readyz')) === 200, 90, 'flashq up')
    .catch((e) => { throw new Error(`${e.message}\n${up.output()}`); });
  if (!up.running()) throw new Error(`flashq up exited:\n${up.output()}`);
  return { program: up, frontend, stream, httpPort };
}

// flashq-gateway in front of `broker` ({frontend, stream}), ready once /readyz says a broker
// serves a model (or, with `expectReady` false, once it answers /healthz).
export async function startGateway(broker, extraArgs = [], { expectReady = true } = {}) {
  const port = await freePort();
  const gateway = new Program('flashq-gateway', ['--port', String(port), '--broker', broker.frontend,
    '--stream', broker.stream, '--wait-for-models-ms', '2000', ...extraArgs]);
  const page = expectReady ? '/readyz' : '/healthz';
  await waitFor(async () => !gateway.running() || (await httpStatus(port, page)) === 200, 30, 'flashq-gateway')
    .catch((e) => { throw new Error(`${e.message}\n${gateway.output()}`); });
  if (!gateway.running()) throw new Error(`flashq-gateway exited:\n${gateway.output()}`);
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
export async function startBroker(extraArgs = []) {
  const frontend = `tcp://127.0.0.1:${await freePort()}`;
  const stream = `tcp://127.0.0.1:${await freePort()}`;
  const backend = `tcp://127.0.0.1:${await freePort()}`;
  const httpPort = await freePort();
  const broker = new Program('flashq-broker', ['--frontend', frontend, '--stream', stream, '--backend', backend,
    '--http', `127.0.0.1:${httpPort}`, '--drain-timeout-ms', '0', ...extraArgs]);
  await waitFor(async () => !broker.running() || (await httpStatus(httpPort, '/healthz')) === 200, 30, 'flashq-broker')
    .catch((e) => { throw new Error(`${e.message}\n${broker.output()}`); });
  if (!broker.running()) throw new Error(`flashq-broker exited:\n${broker.output()}`);
  return { program: broker, frontend, stream, backend, httpPort };
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
