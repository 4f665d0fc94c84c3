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

// A program run for the tests; its output goes to a log file printed when it fails to start.
export class Program {
  constructor(name, args) {
    this.logPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'flashq-gateway-test-')), `${name}.log`);
    const log = fs.openSync(this.logPath, 'w');
    this.child = spawn(bin(name), args, { cwd: REPO, stdio: ['ignore', log, log], env: { ...process.env, OMP_NUM_THREADS: '1' } });
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
  return { program: up, frontend, stream };
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
