// Reads the gateway's chat completion and completion bodies with the official OpenAI SDK for Node
// (npm `openai`), as a client would: a fetch that answers each case's recorded HTTP response
// stands in for the network. For every case it prints what the SDK made of it: the object
// `create()` returned, the chunks a stream yielded and the completion ChatCompletionStream
// accumulated, or the error the SDK threw, with how many requests it sent (its retries).
//
// Usage: node tests/gateway/openai_sdk_read.mjs CASES.json RESULTS.json  (from the repository root)
// CASES.json: [{name, endpoint: "chat" | "completions", stream, status, body}], body being the
// JSON text of a whole response or error, or the SSE text of a stream (`data: ...\n\n` lines).
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const sdk = await import(pathToFileURL(path.resolve('third_party/npm/node_modules/openai/index.mjs')).href);
const OpenAI = sdk.default;

const cases = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const results = [];

for (const c of cases) {
  let fetches = 0;
  const fetch = async () => {
    fetches += 1;
    const headers = {
      'content-type': c.stream && c.status === 200 ? 'text/event-stream' : 'application/json',
      // Retries, where the SDK makes them, come at once.
      'retry-after-ms': '1',
    };
    return new Response(c.body, { status: c.status, headers });
  };
  const client = new OpenAI({ apiKey: 'test-key', baseURL: 'http://gateway.invalid/v1', fetch, maxRetries: 2 });
  const params = { model: 'm', stream: c.stream };
  if (c.endpoint === 'chat') params.messages = [{ role: 'user', content: 'hi' }];
  else params.prompt = 'hi';
  const result = { name: c.name };
  try {
    if (c.endpoint === 'chat' && c.stream) {
      // The SDK's own accumulation of chat chunks.
      const stream = client.chat.completions.stream(params);
      result.chunks = [];
      for await (const chunk of stream) result.chunks.push(chunk);
      result.final = await stream.finalChatCompletion();
    } else if (c.stream) {
      result.chunks = [];
      for await (const chunk of await client.completions.create(params)) result.chunks.push(chunk);
    } else if (c.endpoint === 'chat') {
      result.response = await client.chat.completions.create(params);
    } else {
      result.response = await client.completions.create(params);
    }
  } catch (e) {
    result.error = {
      class: e.constructor.name,
      status: e.status ?? null,
      type: e.type ?? null,
      code: e.code ?? null,
      param: e.param ?? null,
      message: e.message,
    };
  }
  result.fetches = fetches;
  results.push(result);
}
writeFileSync(process.argv[3], JSON.stringify(results));
