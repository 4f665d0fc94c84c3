// A gpt-oss model served end to end: a random tiny gpt-oss checkpoint (MXFP4 experts, sinks,
// sliding layers; flashq-model make-tiny --family gpt-oss) with the published gpt-oss chat
// template, run by `flashq up` (broker, worker and the embedded gateway), read by the official
// OpenAI SDK for Node. The worker reads the template's harmony formats (the models list and the
// answers show it), tools reach the template (a request with tools has a longer prompt), and the
// streamed answer equals the whole one. No random model writes a tool call: parsing the harmony
// output into calls is tool_calls.test.mjs's, with a scripted worker.
//
//   FLASHQ_BIN=build/bin node --test tests/gateway/sdk/gpt_oss.test.mjs
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { OpenAI, REPO, bin, startUpWithGateway } from './harness.mjs';

const TOOLS = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The current weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];
const ASK = [{ role: 'user', content: 'What is the weather in Paris?' }];

let dir;
let up;
let openai;
let model;

before(async () => {
  dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'flashq-gpt-oss-')), 'gpt-oss-tiny');
  const made = spawnSync(bin('flashq-model'), ['make-tiny', '--family', 'gpt-oss', '--out', dir, '--layers', '2',
    '--hidden', '64', '--heads', '4', '--kv-heads', '2', '--head-dim', '16', '--inter', '64', '--experts', '8',
    '--experts-per-token', '2', '--sliding-window', '8', '--dtype', 'f32'], { encoding: 'utf8' });
  assert.equal(made.status, 0, made.stdout + made.stderr);
  // The published template in place of the tiny tokenizer's own.
  const configPath = path.join(dir, 'tokenizer_config.json');
  const tokenizerConfig = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  tokenizerConfig.chat_template = fs.readFileSync(path.join(REPO, 'tests/golden/templates/gpt_oss.jinja'), 'utf8');
  fs.writeFileSync(configPath, JSON.stringify(tokenizerConfig, null, 2));
  model = path.basename(dir);

  const started = await startUpWithGateway(dir);
  up = started.program;
  openai = new OpenAI({ baseURL: started.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
});

after(async () => {
  if (up) {
    const { code } = await up.stop();
    assert.equal(code, 0, up.output());
  }
  if (dir) fs.rmSync(path.dirname(dir), { recursive: true, force: true });
});

test('the models list serves the gpt-oss model', async () => {
  const models = [];
  for await (const m of openai.models.list()) models.push(m);
  assert.ok(models.some((m) => m.id === model), JSON.stringify(models));
});

test('tools reach the published template: the same question with tools is a longer prompt', async () => {
  const plain = await openai.chat.completions.create({ model, messages: ASK, max_tokens: 4 });
  const withTools = await openai.chat.completions.create({ model, messages: ASK, tools: TOOLS, max_tokens: 4 });
  assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens,
    `${withTools.usage.prompt_tokens} with tools, ${plain.usage.prompt_tokens} without`);
  for (const completion of [plain, withTools]) {
    const [choice] = completion.choices;
    assert.ok(['stop', 'length', 'tool_calls'].includes(choice.finish_reason), choice.finish_reason);
    assert.equal(choice.message.role, 'assistant');
    assert.ok(completion.usage.completion_tokens >= 1 && completion.usage.completion_tokens <= 4);
  }
});

test('a greedy answer streamed equals the whole answer, read through the harmony parser', async () => {
  const request = { model, messages: ASK, tools: TOOLS, max_tokens: 24, temperature: 0 };
  const whole = await openai.chat.completions.create(request);
  const stream = await openai.chat.completions.create({ ...request, stream: true });
  let content = '';
  let reasoning = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      content += choice.delta?.content ?? '';
      reasoning += choice.delta?.reasoning ?? '';
      finish = choice.finish_reason ?? finish;
    }
  }
  const [choice] = whole.choices;
  assert.equal(content, choice.message.content ?? '');
  assert.equal(reasoning, choice.message.reasoning ?? '');
  assert.equal(finish, choice.finish_reason);
});
