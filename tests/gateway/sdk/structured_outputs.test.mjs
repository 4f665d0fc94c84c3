// Structured outputs through the gateway with the official OpenAI SDK for Node, on the demo pair
// (a small model trained on code, which writes no JSON of its own: the grammar carries it):
// response_format json_schema (strict) and json_object give content that parses and that the
// schema accepts, off and with DFlash; an unsupported keyword is a 400 naming it; max_tokens
// inside an unfinished document ends `length`.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_KEY, MODEL, client, npm, startGateway, startUp, stopGatewayAndUp } from './harness.mjs';

const { z } = npm('zod');
const { zodResponseFormat, zodTextFormat } = npm('openai/helpers/zod');
const Ajv = npm('ajv');

let up;
let gateway;
let openai;

before(async () => {
  up = await startUp();
  gateway = await startGateway(up, ['--api-key', API_KEY]);
  openai = client(gateway);
});

after(() => stopGatewayAndUp(gateway, up));

const schema = {
  type: 'object',
  properties: {
    language: { type: 'string', enum: ['python', 'c++', 'rust'] },
    lines: { type: 'integer', minimum: 0, maximum: 999 },
    tested: { type: 'boolean' },
  },
  required: ['language', 'lines', 'tested'],
  additionalProperties: false,
};

// The schema's own check, written out: every key, its type and its bounds.
function assertMatchesSchema(doc) {
  assert.deepEqual(Object.keys(doc).sort(), ['language', 'lines', 'tested']);
  assert.ok(['python', 'c++', 'rust'].includes(doc.language), JSON.stringify(doc));
  assert.ok(Number.isInteger(doc.lines) && doc.lines >= 0 && doc.lines <= 999, JSON.stringify(doc));
  assert.equal(typeof doc.tested, 'boolean');
}

for (const spec of ['off', 'dflash']) {
  test(`json_schema (strict): every answer is a document the schema accepts, spec ${spec}`, async () => {
    for (const prompt of ['Describe the project.', 'How many lines?', 'def main():']) {
      const completion = await openai.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: prompt }],
        max_tokens: 200,
        temperature: 0,
        spec,
        response_format: { type: 'json_schema', json_schema: { name: 'project', schema, strict: true } },
      });
      const choice = completion.choices[0];
      assert.equal(choice.finish_reason, 'stop', JSON.stringify(choice));
      assertMatchesSchema(JSON.parse(choice.message.content));
    }
  });
}

test('json_schema answers are the same with and without speculation at temperature 0', async () => {
  const answer = async (spec) => (await openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Describe the project.' }],
    max_tokens: 200,
    temperature: 0,
    spec,
    response_format: { type: 'json_schema', json_schema: { name: 'project', schema, strict: true } },
  })).choices[0].message.content;
  assert.equal(await answer('dflash'), await answer('off'));
});

test('json_object gives a JSON object', async () => {
  const completion = await openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Reply in JSON.' }],
    max_tokens: 300,
    temperature: 0,
    response_format: { type: 'json_object' },
  });
  const choice = completion.choices[0];
  if (choice.finish_reason === 'stop') {
    const doc = JSON.parse(choice.message.content);
    assert.equal(typeof doc, 'object');
    assert.ok(doc !== null && !Array.isArray(doc));
  } else {
    assert.equal(choice.finish_reason, 'length');
    assert.ok(choice.message.content.startsWith('{'), choice.message.content);
  }
});

test('max_tokens inside an unfinished document ends length, not stop', async () => {
  const completion = await openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Describe the project.' }],
    max_tokens: 3,
    temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: 'project', schema, strict: true } },
  });
  assert.equal(completion.choices[0].finish_reason, 'length');
  assert.throws(() => JSON.parse(completion.choices[0].message.content));
});

test('an unsupported keyword or a malformed format is a 400 naming it', async () => {
  const cases = [
    [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', patternProperties: { '^a': {} } } } }, 'patternProperties'],
    [{ type: 'json_schema', json_schema: { name: 'x' } }, 'schema'],
    [{ type: 'xml' }, 'xml'],
  ];
  for (const [responseFormat, named] of cases) {
    await assert.rejects(
      openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, response_format: responseFormat }),
      (error) => {
        assert.equal(error.status, 400, String(error));
        assert.ok(String(error.message).includes(named), error.message);
        assert.equal(error.param, 'response_format');
        return true;
      });
  }
  // The gateway still serves.
  const plain = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, response_format: { type: 'text' } });
  assert.equal(plain.choices.length, 1);
});

test('Responses text.format json_schema: the output text is a document the schema accepts', async () => {
  const response = await openai.responses.create({
    model: MODEL,
    input: 'Describe the project.',
    max_output_tokens: 200,
    temperature: 0,
    text: { format: { type: 'json_schema', name: 'project', schema, strict: true } },
  });
  assert.equal(response.status, 'completed', JSON.stringify(response));
  assert.equal(response.text.format.type, 'json_schema');
  assert.equal(response.text.format.name, 'project');
  assertMatchesSchema(JSON.parse(response.output_text));
});

test('Responses: max_output_tokens inside the document is incomplete, and a bad format a 400', async () => {
  const response = await openai.responses.create({
    model: MODEL,
    input: 'Describe the project.',
    max_output_tokens: 3,
    text: { format: { type: 'json_schema', name: 'project', schema, strict: true } },
  });
  assert.equal(response.status, 'incomplete');
  await assert.rejects(
    openai.responses.create({
      model: MODEL,
      input: 'hi',
      text: { format: { type: 'json_schema', name: 'x', schema: { type: 'object', not: { type: 'null' } } } },
    }),
    (error) => {
      assert.equal(error.status, 400, String(error));
      assert.ok(String(error.message).includes('not'), error.message);
      assert.equal(error.param, 'text.format');
      return true;
    });
});

test("completions take vLLM's guided fields: a choice is one of the choices", async () => {
  const completion = await openai.completions.create({
    model: MODEL, prompt: 'Is the queue empty? Answer:', max_tokens: 8, temperature: 0, guided_choice: ['yes', 'no', 'maybe'],
  });
  assert.ok(['yes', 'no', 'maybe'].includes(completion.choices[0].text), JSON.stringify(completion.choices[0]));
  assert.equal(completion.choices[0].finish_reason, 'stop');
  const digits = await openai.completions.create({
    model: MODEL, prompt: 'The year was', max_tokens: 12, temperature: 0, structured_outputs: { regex: ' [0-9]{4}' },
  });
  assert.match(digits.choices[0].text, /^ [0-9]{4}$/);
});

// The SDK's own typed-output path: a zod schema turned into a strict json_schema by the SDK, the
// answer parsed back into a typed object by the SDK, and checked again by ajv against the schema
// the SDK sent.
test('chat.completions.parse and responses.parse with a zod schema give typed, valid objects', async () => {
  const Project = z.object({
    language: z.enum(['python', 'c++', 'rust']),
    lines: z.number().int(),
    tested: z.boolean(),
    tags: z.array(z.string()),
  });
  const format = zodResponseFormat(Project, 'project');
  const validate = new Ajv({ strict: false }).compile(format.json_schema.schema);
  for (const spec of ['off', 'dflash']) {
    const completion = await openai.chat.completions.parse({
      model: MODEL,
      messages: [{ role: 'user', content: 'Describe the project.' }],
      max_tokens: 200,
      temperature: 0,
      spec,
      response_format: format,
    });
    const { message, finish_reason: finish } = completion.choices[0];
    assert.equal(finish, 'stop', message.content);
    assert.ok(validate(JSON.parse(message.content)), JSON.stringify(validate.errors));
    assert.ok(Project.safeParse(message.parsed).success, JSON.stringify(message.parsed));
  }
  const response = await openai.responses.parse({
    model: MODEL,
    input: 'Describe the project.',
    max_output_tokens: 200,
    temperature: 0,
    text: { format: zodTextFormat(Project, 'project') },
  });
  assert.equal(response.status, 'completed', JSON.stringify(response));
  assert.ok(Project.safeParse(response.output_parsed).success, JSON.stringify(response.output_parsed));
});
