#!/usr/bin/env node
// Writes tests/golden/oniguruma_categories.json: which code points Hugging Face tokenizers' regex
// engine (Oniguruma, through the Node binding @anush008/tokenizers) puts in each \p{...} class that
// tokenizer.json split patterns use, and in \s. tests/tokenizer/oniguruma_categories_test.cpp
// checks that the split patterns here (PCRE2, with worker/text/oniguruma_categories.cpp's
// additions) agree on every code point.
//
//   node tests/golden/make_oniguruma_categories_golden.js   (from the repository root, after scripts/setup)
//
// The output maps each class ("\\p{L}", ..., "\\s") to its members as sorted, disjoint inclusive
// ranges [[first, last], ...]. Each class is asked of Oniguruma itself: a Split pre-tokenizer with
// behavior "Removed" runs the class over a text of every code point (surrogates excepted), and
// the code points it removes are the members.
'use strict';

const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', '..');
const binding = path.join(root, 'third_party', 'npm', 'node_modules', '@anush008', 'tokenizers');
if (!fs.existsSync(binding)) {
  console.error(`missing ${binding}: run scripts/setup first`);
  process.exit(1);
}
const { Tokenizer } = require(binding);
const outputPath = path.join(__dirname, 'oniguruma_categories.json');

const classes = ['L', 'Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'M', 'N', 'Nd', 'Nl', 'No', 'P', 'S']
  .map((name) => `\\p{${name}}`).concat(['\\s']);

const codePoints = [];
for (let c = 0; c <= 0x10ffff; ++c) if (c < 0xd800 || c > 0xdfff) codePoints.push(c);
const text = codePoints.map((c) => String.fromCodePoint(c)).join('');

function members(regex) {
  const tokenizer = Tokenizer.fromString(JSON.stringify({
    version: '1.0', added_tokens: [], normalizer: null, post_processor: null, decoder: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: regex }, behavior: 'Removed', invert: false },
    model: { type: 'BPE', vocab: {}, merges: [] },
  }));
  // Offsets count characters (code points): index i of the text is codePoints[i].
  const kept = new Uint8Array(codePoints.length);
  for (const [, [begin, end]] of tokenizer.getPreTokenizer().preTokenizeString(text)) kept.fill(1, begin, end);
  const ranges = [];
  codePoints.forEach((c, i) => {
    if (kept[i]) return;
    const last = ranges[ranges.length - 1];
    if (last && last[1] === c - 1) last[1] = c;
    else ranges.push([c, c]);
  });
  return ranges;
}

const out = {};
for (const regex of classes) out[regex] = members(regex);
// One class per line, so a change in one reads as one changed line.
const lines = classes.map((regex) => `  ${JSON.stringify(regex)}: ${JSON.stringify(out[regex])}`);
fs.writeFileSync(outputPath, `{\n${lines.join(',\n')}\n}\n`);
console.log(`wrote ${outputPath}: ${classes.map((r) => `${r} ${out[r].length} ranges`).join(', ')}`);
