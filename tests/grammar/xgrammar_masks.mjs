// The independent oracle for grammar masks: XGrammar (@mlc-ai/web-xgrammar, its WASM build) given
// the same GBNF text and the same tokenizer.json, answering which token ids it allows after each
// prefix. Usage: node xgrammar_masks.mjs request.json > answer.json, where the request holds
// {tokenizer_json, grammar, stop_ids, special_ids, prefixes: [[ids...]...]} and the answer
// {results: [{accepted: bool, allowed: [ids]}...]}. Special tokens are given to XGrammar as empty
// strings, which it never allows, as flashq does.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const xgrammarPath = path.join(here, "../../third_party/npm/node_modules/@mlc-ai/web-xgrammar/lib/index.js");
// The package's UMD bundle, loaded as an ES module, reads `require` and `__filename` (CommonJS
// names) and leaves its exports on globalThis.xgrammar.
globalThis.require = createRequire(xgrammarPath);
globalThis.__filename = xgrammarPath;
await import(xgrammarPath);
const xgr = globalThis.xgrammar;

const request = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const tokenizer = JSON.parse(fs.readFileSync(request.tokenizer_json, "utf8"));
let size = 0;
for (const id of Object.values(tokenizer.model.vocab)) size = Math.max(size, id + 1);
for (const t of tokenizer.added_tokens) size = Math.max(size, t.id + 1);
const vocab = new Array(size).fill("");
for (const [token, id] of Object.entries(tokenizer.model.vocab)) vocab[id] = token;
for (const t of tokenizer.added_tokens) vocab[t.id] = t.content;
for (const id of request.special_ids) vocab[id] = "";

const info = await xgr.TokenizerInfo.createTokenizerInfo(vocab, "byte_level", false, size, request.stop_ids);
const compiler = await xgr.GrammarCompiler.createGrammarCompiler(info);
const compiled = await compiler.compileGrammar(request.grammar, "root");
const results = [];
for (const prefix of request.prefixes) {
  const matcher = await xgr.GrammarMatcher.createGrammarMatcher(compiled);
  let accepted = true;
  for (const id of prefix) accepted = accepted && matcher.acceptToken(id);
  const allowed = [];
  if (accepted) {
    const bitmask = await matcher.getNextTokenBitmask();
    for (let id = 0; id < size; ++id) {
      if ((bitmask[id >> 5] >>> (id & 31)) & 1) allowed.push(id);
    }
  }
  results.push({ accepted, allowed });
  matcher.dispose();
}
process.stdout.write(JSON.stringify({ results }));
