// Reads Responses API event streams with OpenAI's own Node SDK (npm `openai`), as a client of
// the gateway would: each file named on the command line holds one stream as the gateway writes
// it (`event: <type>\ndata: <json>\n\n`); the SDK's client is given a fetch that answers with
// that text, so its SSE parser and its ResponseStream (the accumulation behind finalResponse())
// run unchanged. Prints one JSON line per file: the event types the SDK yielded, its final
// response, and its output_text; or {"error": message} when the SDK refused the stream.
'use strict';
const fs = require('fs');
const path = require('path');
const { OpenAI } = require(path.resolve(__dirname, '../../third_party/npm/node_modules/openai'));

async function read(file) {
  const sse = fs.readFileSync(file, 'utf8');
  const client = new OpenAI({
    apiKey: 'test',
    baseURL: 'http://gateway.invalid/v1',
    maxRetries: 0,
    fetch: async () => new Response(sse, { status: 200, headers: { 'content-type': 'text/event-stream' } }),
  });
  const stream = client.responses.stream({ model: 'm', input: 'x' });
  const types = [];
  for await (const event of stream) types.push(event.type);
  const final = await stream.finalResponse();
  return { types, final, output_text: final.output_text };
}

(async () => {
  for (const file of process.argv.slice(2)) {
    let line;
    try {
      line = await read(file);
    } catch (error) {
      line = { error: String(error && error.message ? error.message : error) };
    }
    process.stdout.write(JSON.stringify(line) + '\n');
  }
})();
