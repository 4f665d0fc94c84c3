#!/usr/bin/env node
// Writes tests/golden/nfc_golden.json: what Hugging Face tokenizers' NFC normalizer (the Node
// binding @anush008/tokenizers) makes of strings built around every combining mark and every
// character with a canonical decomposition, and the code points its normalization tables do not
// know (they are Unicode 9.0), for tests/tokenizer/nfc_golden_test.cpp to match.
//
//   node tests/golden/make_nfc_golden.js   (from the repository root, after scripts/setup)
//
// Output: {"unknown_code_points": [...], "cases": [[text, nfc], ...]}. A code point is unknown
// where Hugging Face's NFC of a string built with it differs from the JavaScript engine's own
// (current Unicode); each such code point, and the parts of its canonical decomposition, go in
// "unknown_code_points" (worker/text/unicode_normalizer.cpp lists them), but for marks
// whose order it knows.
'use strict';

const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', '..');
const binding = path.join(root, 'third_party', 'npm', 'node_modules', '@anush008', 'tokenizers');
if (!fs.existsSync(binding)) {
  console.error(`missing ${binding}: run scripts/setup first`);
  process.exit(1);
}
const nfc = require(binding).nfcNormalizer();
const outputPath = path.join(__dirname, 'nfc_golden.json');

// Marks of canonical combining classes 1, 7, 9, 220, 230 and 240, to order others against.
const probes = [0x334, 0x93c, 0x94d, 0x323, 0x301, 0x345].map((c) => String.fromCodePoint(c));
const isMark = /^\p{M}$/u;

const candidates = new Set();
for (let c = 0; c <= 0x10ffff; ++c) {
  if (c >= 0xd800 && c <= 0xdfff) continue;
  const s = String.fromCodePoint(c);
  const decomposed = s.normalize('NFD');
  if (!isMark.test(s) && decomposed === s) continue;
  candidates.add(c);
  for (const part of decomposed) candidates.add(part.codePointAt(0));
}

const variants = (s) => ['a' + s, s, s.normalize('NFD'), ...probes.flatMap((p) => ['a' + s + p, 'a' + p + s])];
const unknown = new Set();
const cases = [];
for (const c of [...candidates].sort((x, y) => x - y)) {
  const s = String.fromCodePoint(c);
  const texts = variants(s);
  if (texts.some((text) => nfc.normalizeString(text) !== text.normalize('NFC'))) {
    unknown.add(c);
    // The parts of a later composition (U+11938 = U+11935 U+11930) are later characters too,
    // except the combining marks Hugging Face already orders (U+0307 in U+105C9).
    for (const part of s.normalize('NFD')) {
      const ordered = nfc.normalizeString('a' + part + probes[0]) !== 'a' + part + probes[0];
      if (!ordered) unknown.add(part.codePointAt(0));
    }
    texts.forEach((text) => cases.push([text, nfc.normalizeString(text)]));
  } else {
    // Known alike: two strings each, enough to see that nothing else changed.
    for (const text of [texts[2], texts[7]]) cases.push([text, nfc.normalizeString(text)]);
  }
}
// Unknown code points amid text, in runs, and next to the characters they would compose with.
const unknownList = [...unknown].sort((x, y) => x - y);
for (const c of unknownList) {
  const s = String.fromCodePoint(c);
  for (const text of [`e\u0301${s}\u0301`, `${s}${s}\u0327c\u0301`, `A${s}\u030a`, `\u1100${s}\u1161`]) {
    cases.push([text, nfc.normalizeString(text)]);
  }
}

const lines = cases.map((c) => `  ${JSON.stringify(c)}`);
fs.writeFileSync(outputPath, `{"unknown_code_points": ${JSON.stringify(unknownList)},\n"cases": [\n${lines.join(',\n')}\n]}\n`);
console.log(`wrote ${outputPath}: ${unknownList.length} unknown code points, ${cases.length} cases, ` +
            `${fs.statSync(outputPath).size} bytes`);
