// Hugging Face tokenizers' encoding throughput, for `flashq-bench tokenizer`:
//   node hf_tokenizer_throughput.js TOKENIZER_JSON TEXT_FILE MIN_SECONDS
// prints one JSON line {"ids": N, "checksum": C, "first_encode_s": F, "seconds_per_encode": S}:
// the ids' count and checksum (sum of id * (position + 1) mod 2^32), and the whole file
// encoded (addSpecialTokens false) once on the fresh tokenizer (F), then again and again for at
// least MIN_SECONDS (S, the mean).
const fs = require('fs');
const path = require('path');

const [tokenizerJson, textFile, minSecondsArg] = process.argv.slice(2);
if (!tokenizerJson || !textFile) {
  console.error('usage: hf_tokenizer_throughput.js TOKENIZER_JSON TEXT_FILE [MIN_SECONDS]');
  process.exit(2);
}
const root = path.resolve(__dirname, '..', '..');
const { Tokenizer } = require(path.join(root, 'third_party', 'npm', 'node_modules', '@anush008', 'tokenizers'));

async function main() {
  const tokenizer = Tokenizer.fromFile(tokenizerJson);
  const text = fs.readFileSync(textFile, 'utf8');
  const minSeconds = Number(minSecondsArg || 2);
  const encode = async () => (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
  const first = process.hrtime.bigint();
  const ids = await encode();
  let checksum = 0;
  ids.forEach((id, i) => {
    checksum = (checksum + Math.imul(id, i + 1)) >>> 0;
  });
  const firstSeconds = Number(process.hrtime.bigint() - first) / 1e9;
  let calls = 0;
  const start = process.hrtime.bigint();
  let seconds = 0;
  do {
    await encode();
    calls += 1;
    seconds = Number(process.hrtime.bigint() - start) / 1e9;
  } while (seconds < minSeconds);
  console.log(JSON.stringify({ ids: ids.length, checksum, first_encode_s: firstSeconds, seconds_per_encode: seconds / calls }));
}

main().catch((error) => {
  console.error(error.message);
  process.exit(1);
});
