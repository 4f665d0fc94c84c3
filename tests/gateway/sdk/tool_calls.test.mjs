// Tool calls and reasoning through flashq-gateway, read by the official OpenAI SDK for Node: a
// flashq-broker with two scripted workers behind it (scripted_worker.py), which stream each
// model family's real output text, as no random test model writes tool calls:
//   scripted-hermes  Qwen3 / Hermes: <tool_call>{"name", "arguments"}</tool_call>, <think> reasoning
//   scripted-llama   Llama 3.x: {"name", "parameters"} as the whole message, no reasoning
//   scripted-harmony gpt-oss's harmony: a commentary message to=functions.NAME per call, the
//                    analysis channel as reasoning, the final channel as the answer
// For each: the call non-streamed and streamed (delta.tool_calls with index, id, name, then
// argument fragments), two calls at once, the round trip (the tool's result sent back, the model
// answers with text), tool_choice "none" (the call text stays content), and Qwen3's <think>.
//
//   FLASHQ_BIN=build/bin node --test tests/gateway/sdk/
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  client, scriptedPieces, scriptedPromptTokens, startBroker, startGateway, startScriptedWorker,
} from './harness.mjs';

const TOOLS = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The current weather in a city.',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city'],
    },
  },
}];

// What the model writes as a call's arguments; the gateway hands them on as written.
const PARIS_ARGS = '{"city": "Paris", "unit": "celsius"}';
const TOKYO_ARGS = '{"city": "Tokyo", "unit": "celsius"}';
const TOOL_RESULT = '{"temperature": 21, "unit": "celsius", "sky": "sunny"}';
const ANSWER = 'It is 21 °C and sunny in Paris — a fine day.';
const REASONING = 'The user greets me; a short answer will do.';
const GREETING = 'Hello! How can I help?';
const THINKING_REPLY = `<think>\n${REASONING}\n</think>\n\n${GREETING}`;
const DEFAULT_REPLY = 'Nothing is scripted for that.';

const FAMILIES = [
  {
    model: 'scripted-hermes',
    toolCallFormat: 'hermes',
    reasoningFormat: 'think',
    maxModelLen: 4096,
    oneCall: `<tool_call>\n{"name": "get_weather", "arguments": ${PARIS_ARGS}}\n</tool_call>`,
    twoCalls: `<tool_call>\n{"name": "get_weather", "arguments": ${PARIS_ARGS}}\n</tool_call>\n`
      + `<tool_call>\n{"name": "get_weather", "arguments": ${TOKYO_ARGS}}\n</tool_call>`,
    readsReasoning: true,
  },
  {
    model: 'scripted-llama',
    toolCallFormat: 'llama3_json',
    reasoningFormat: 'none',
    maxModelLen: 8192,
    oneCall: `{"name": "get_weather", "parameters": ${PARIS_ARGS}}`,
    twoCalls: `{"name": "get_weather", "parameters": ${PARIS_ARGS}}; `
      + `{"name": "get_weather", "parameters": ${TOKYO_ARGS}}`,
    readsReasoning: false,
  },
  {
    model: 'scripted-harmony',
    toolCallFormat: 'harmony',
    reasoningFormat: 'harmony',
    maxModelLen: 131072,
    oneCall: `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${PARIS_ARGS}<|call|>`,
    twoCalls: `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${PARIS_ARGS}<|call|>`
      + '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
      + `${TOKYO_ARGS}<|call|>`,
    answer: `<|channel|>final<|message|>${ANSWER}`,
    thinkingReply: `<|channel|>analysis<|message|>${REASONING}<|end|><|start|>assistant<|channel|>final`
      + `<|message|>${GREETING}`,
    readsReasoning: true,
  },
];

// First match wins: the tool's result comes before the question it answers, which is still in
// the conversation but no longer its last user or tool message.
// A family's answer and reasoning as its model writes them (Qwen3's and Llama's plain and in
// <think> tags, unless the family says otherwise).
const answerOf = (family) => family.answer ?? ANSWER;
const thinkingReplyOf = (family) => family.thinkingReply ?? THINKING_REPLY;

function rules(family) {
  return [
    { when: '"temperature": 21', reply: answerOf(family) },
    { when: 'Paris and in Tokyo', reply: family.twoCalls },
    { when: 'weather in Paris', reply: family.oneCall },
    { when: 'Say hello', reply: thinkingReplyOf(family) },
    { when: '', reply: DEFAULT_REPLY },
  ];
}

const ASK_PARIS = [{ role: 'user', content: 'What is the weather in Paris?' }];
const ASK_BOTH = [{ role: 'user', content: 'What is the weather in Paris and in Tokyo?' }];
const SAY_HELLO = [{ role: 'user', content: 'Say hello.' }];

let broker;
let workers = [];
let gateway;
let openai;

before(async () => {
  broker = await startBroker();
  workers = await Promise.all(FAMILIES.map((family) => startScriptedWorker(broker, {
    model: family.model, rules: rules(family), toolCallFormat: family.toolCallFormat,
    reasoningFormat: family.reasoningFormat, extraArgs: ['--max-model-len', String(family.maxModelLen)],
  })));
  gateway = await startGateway(broker);
  openai = client(gateway);
});

after(async () => {
  const problems = [];
  if (gateway) {
    const { code } = await gateway.stop();
    if (code !== 0) problems.push(`flashq-gateway exited with ${code}:\n${gateway.output()}`);
  }
  for (const worker of workers) {
    const { code } = await worker.stop();
    if (code !== 0) problems.push(`a scripted worker exited with ${code}:\n${worker.output()}`);
  }
  if (broker) await broker.program.stop();
  assert.deepEqual(problems, []);
});

// A streamed chat completion read chunk by chunk, checking the shape of each delta as OpenAI
// streams it: a call's first delta carries its index, id, type and name, later ones only
// argument fragments; calls are numbered 0, 1, ... in order of their first delta.
async function readStream(stream) {
  const out = {
    content: '', reasoning: '', reasoningContent: '', calls: [], finishReason: null, usage: null, role: null,
  };
  for await (const chunk of stream) {
    if (chunk.usage) out.usage = chunk.usage;
    for (const choice of chunk.choices) {
      assert.equal(choice.index, 0);
      const delta = choice.delta ?? {};
      if (delta.role) out.role = delta.role;
      if (typeof delta.content === 'string') out.content += delta.content;
      if (typeof delta.reasoning === 'string') out.reasoning += delta.reasoning;
      if (typeof delta.reasoning_content === 'string') out.reasoningContent += delta.reasoning_content;
      for (const piece of delta.tool_calls ?? []) {
        assert.equal(typeof piece.index, 'number');
        if (piece.index === out.calls.length) {
          assert.ok(typeof piece.id === 'string' && piece.id.length > 0, `call ${piece.index} starts without an id`);
          assert.equal(piece.type, 'function');
          assert.ok(piece.function?.name, `call ${piece.index} starts without a name`);
          out.calls.push({ id: piece.id, name: piece.function.name, arguments: piece.function.arguments ?? '' });
        } else {
          assert.ok(piece.index < out.calls.length, `call ${piece.index} before call ${out.calls.length}`);
          assert.ok(!piece.id && !piece.function?.name, `call ${piece.index} started twice`);
          out.calls[piece.index].arguments += piece.function?.arguments ?? '';
        }
      }
      if (choice.finish_reason) {
        assert.equal(out.finishReason, null, 'two finish reasons');
        out.finishReason = choice.finish_reason;
      }
    }
  }
  return out;
}

function chat(model, messages, extra = {}) {
  return openai.chat.completions.create({ model, messages, tools: TOOLS, ...extra });
}

function chatStream(model, messages, extra = {}) {
  return chat(model, messages, { stream: true, stream_options: { include_usage: true }, ...extra });
}

test('the models list shows every scripted model with its context', async () => {
  const models = [];
  for await (const model of openai.models.list()) models.push(model);
  for (const family of FAMILIES) {
    const served = models.find((m) => m.id === family.model);
    assert.ok(served, `${family.model} is not in ${JSON.stringify(models)}`);
    assert.equal(served.object, 'model');
    assert.equal(served.max_model_len, family.maxModelLen);
  }
});

for (const family of FAMILIES) {
  const { model } = family;

  describe(`${model} (${family.toolCallFormat})`, () => {
    test('a call, not streamed: message.tool_calls and finish_reason tool_calls', async () => {
      const completion = await chat(model, ASK_PARIS);
      assert.equal(completion.object, 'chat.completion');
      assert.equal(completion.choices.length, 1);
      const [choice] = completion.choices;
      assert.equal(choice.finish_reason, 'tool_calls');
      assert.equal(choice.message.role, 'assistant');
      assert.equal(choice.message.content, null);  // OpenAI: null in a message that only calls tools
      assert.equal(choice.message.tool_calls.length, 1);
      const [call] = choice.message.tool_calls;
      assert.ok(typeof call.id === 'string' && call.id.length > 0);
      assert.equal(call.type, 'function');
      assert.equal(call.function.name, 'get_weather');
      assert.equal(call.function.arguments, PARIS_ARGS);
      assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris', unit: 'celsius' });
      assert.equal(completion.usage.completion_tokens, scriptedPieces(family.oneCall).length);
      assert.equal(completion.usage.prompt_tokens, scriptedPromptTokens(ASK_PARIS));
      assert.equal(completion.usage.total_tokens, completion.usage.prompt_tokens + completion.usage.completion_tokens);
    });

    test('a call, streamed: index, id and name first, then fragments that join into the arguments', async () => {
      const streamed = await readStream(await chatStream(model, ASK_PARIS));
      assert.equal(streamed.role, 'assistant');
      assert.equal(streamed.finishReason, 'tool_calls');
      assert.equal(streamed.content, '');
      assert.equal(streamed.calls.length, 1);
      assert.equal(streamed.calls[0].name, 'get_weather');
      assert.equal(streamed.calls[0].arguments, PARIS_ARGS);  // as the non-streamed message has them
      assert.ok(streamed.usage, 'no usage chunk with stream_options.include_usage');
      assert.equal(streamed.usage.completion_tokens, scriptedPieces(family.oneCall).length);
      assert.equal(streamed.usage.prompt_tokens, scriptedPromptTokens(ASK_PARIS));
    });

    test("the SDK's own stream helper folds the deltas into the same message", async () => {
      const runner = openai.chat.completions.stream({ model, messages: ASK_PARIS, tools: TOOLS });
      const done = [];
      runner.on('tool_calls.function.arguments.done',
        (event) => done.push({ name: event.name, arguments: event.arguments }));
      const completion = await runner.finalChatCompletion();
      const [choice] = completion.choices;
      assert.equal(choice.finish_reason, 'tool_calls');
      assert.deepEqual(choice.message.tool_calls.map((c) => [c.type, c.function.name, c.function.arguments]),
        [['function', 'get_weather', PARIS_ARGS]]);
      assert.deepEqual(done, [{ name: 'get_weather', arguments: PARIS_ARGS }]);
    });

    test('two calls at once, numbered 0 and 1, each with its own id', async () => {
      const completion = await chat(model, ASK_BOTH);
      const [choice] = completion.choices;
      assert.equal(choice.finish_reason, 'tool_calls');
      assert.deepEqual(choice.message.tool_calls.map((c) => [c.function.name, c.function.arguments]),
        [['get_weather', PARIS_ARGS], ['get_weather', TOKYO_ARGS]]);
      const ids = choice.message.tool_calls.map((c) => c.id);
      assert.equal(new Set(ids).size, 2);
      const streamed = await readStream(await chatStream(model, ASK_BOTH));
      assert.equal(streamed.finishReason, 'tool_calls');
      assert.deepEqual(streamed.calls.map((c) => [c.name, c.arguments]),
        [['get_weather', PARIS_ARGS], ['get_weather', TOKYO_ARGS]]);
      assert.equal(new Set(streamed.calls.map((c) => c.id)).size, 2);
    });

    test('the round trip: the tool result goes back and the model answers with text', async () => {
      const first = await chat(model, ASK_PARIS);
      const assistant = first.choices[0].message;  // sent back as the SDK returned it
      assert.equal(assistant.tool_calls.length, 1);
      const messages = [...ASK_PARIS, assistant,
        { role: 'tool', tool_call_id: assistant.tool_calls[0].id, content: TOOL_RESULT }];
      const second = await chat(model, messages);
      const [choice] = second.choices;
      assert.equal(choice.finish_reason, 'stop');
      assert.equal(choice.message.content, ANSWER);
      assert.ok(!choice.message.tool_calls || choice.message.tool_calls.length === 0);
      assert.equal(second.usage.completion_tokens, scriptedPieces(answerOf(family)).length);
      assert.equal(second.usage.prompt_tokens, scriptedPromptTokens(messages));
      assert.notEqual(second.id, first.id);  // two jobs
      const streamed = await readStream(await chatStream(model, messages));
      assert.equal(streamed.content, ANSWER);
      assert.equal(streamed.finishReason, 'stop');
      assert.deepEqual(streamed.calls, []);
    });

    test('tool_choice "none": the call text stays in the content', async () => {
      const completion = await chat(model, ASK_PARIS, { tool_choice: 'none' });
      const [choice] = completion.choices;
      assert.equal(choice.finish_reason, 'stop');
      assert.equal(choice.message.content, family.oneCall);
      assert.ok(!choice.message.tool_calls || choice.message.tool_calls.length === 0);
      const streamed = await readStream(await chatStream(model, ASK_PARIS, { tool_choice: 'none' }));
      assert.equal(streamed.content, family.oneCall);
      assert.equal(streamed.finishReason, 'stop');
      assert.deepEqual(streamed.calls, []);
    });

    if (family.readsReasoning) {
      test('reasoning (Qwen3 <think>, harmony analysis) goes to reasoning and reasoning_content, the rest to content', async () => {
        const completion = await chat(model, SAY_HELLO);
        const { message } = completion.choices[0];
        assert.equal(completion.choices[0].finish_reason, 'stop');
        assert.equal(message.reasoning, REASONING);  // the newlines inside the tags and after </think> are layout
        assert.equal(message.reasoning_content, REASONING);
        assert.equal(message.content, GREETING);
        assert.equal(completion.usage.completion_tokens, scriptedPieces(thinkingReplyOf(family)).length);
        const streamed = await readStream(await chatStream(model, SAY_HELLO));
        assert.equal(streamed.reasoning, REASONING);
        assert.equal(streamed.reasoningContent, REASONING);
        assert.equal(streamed.content, GREETING);
        assert.equal(streamed.finishReason, 'stop');
      });
    } else {
      test('no reasoning format: <think> text is content, as written', async () => {
        const completion = await chat(model, SAY_HELLO);
        const { message } = completion.choices[0];
        assert.equal(completion.choices[0].finish_reason, 'stop');
        assert.equal(message.content, THINKING_REPLY);
        assert.ok(!message.reasoning && !message.reasoning_content);
        const streamed = await readStream(await chatStream(model, SAY_HELLO));
        assert.equal(streamed.content, THINKING_REPLY);
        assert.equal(streamed.reasoning, '');
      });
    }

    test('a plain answer with tools offered: content, finish_reason stop', async () => {
      const messages = [{ role: 'user', content: 'Tell me something.' }];
      const completion = await chat(model, messages);
      assert.equal(completion.choices[0].finish_reason, 'stop');
      assert.equal(completion.choices[0].message.content, DEFAULT_REPLY);
      assert.ok(!completion.choices[0].message.tool_calls || completion.choices[0].message.tool_calls.length === 0);
    });
  });
}
