// tests/tokenizer/gen_corpus.mjs — writes the tokenizer test corpus as JSON
// lines {"text": ...} to stdout: deterministic (seeded PRNG), generated from
// the small word lists below (our own), about 250 KB of UTF-8.
//
// Each line mixes the hard cases of byte-level BPE: English prose with
// contractions in several cases, source code, CJK, Arabic, Devanagari,
// Cyrillic, emoji (ZWJ sequences, flags, skin tones), combining marks and
// decomposed letters, NBSP / zero-width characters, runs of spaces, tabs, CR
// and LF, long digit runs, and special tokens inside the text.
//
// usage: node gen_corpus.mjs [target_bytes]

const target = Number(process.argv[2] || 250000);

let state = 0x2545f491;
function rnd() { // xorshift32
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state / 4294967296;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];
const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
const cp = (lo, hi) => String.fromCodePoint(int(lo, hi));

const nouns = ["river", "lantern", "engine", "garden", "ledger", "orbit", "kettle", "harbor",
  "signal", "matrix", "pebble", "canyon", "thread", "window", "compiler", "gradient", "token",
  "sparrow", "meadow", "beacon", "circuit", "harvest", "violin", "archive", "summit"];
const verbs = ["carries", "folds", "measures", "echoes", "builds", "scatters", "returns",
  "tunes", "gathers", "splits", "encodes", "rewards", "samples", "drifts", "compiles"];
const adjs = ["quiet", "brittle", "golden", "restless", "hollow", "bright", "ancient",
  "crooked", "patient", "electric", "narrow", "velvet", "stubborn", "lucid"];
const contractions = ["don't", "DON'T", "Don'T", "it's", "IT'S", "It'S", "we'll", "WE'LL",
  "they're", "THEY'RE", "They'Re", "I'm", "I'M", "you've", "YOU'VE", "she'd", "SHE'D",
  "can't", "won't", "y'all", "o'clock", "rock 'n' roll", "'s", "'T", "'Ve", "'lL"];
const zh = ["我们今天讨论模型的训练", "数据集很大", "这是一个测试句子", "请把结果写下来",
  "强化学习的奖励", "中文分词没有空格", "北京", "上海的天气不错"];
const ja = ["これはテストです", "カタカナとひらがな", "東京の夜", "モデルを訓練する", "ありがとう"];
const ko = ["안녕하세요", "한국어 문장입니다", "모델 학습", "서울의 밤"];
const ar = ["مرحبا بالعالم", "هذا اختبار", "اللغة العربية جميلة", "نموذج لغوي", "١٢٣٤٥"];
const hi = ["नमस्ते दुनिया", "यह एक परीक्षण है", "भाषा मॉडल", "हिन्दी में लिखा", "१२३४"];
const ru = ["Привет, мир", "Это проверка", "ЁЖИК в тумане", "модель учится", "Съешь же ещё"];
const emoji = ["🙂", "🚀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵🇺🇸", "❤️", "🧑🏿‍💻", "👩‍❤️‍💋‍👨",
  "🐈‍⬛", "1️⃣", "🫠", "☺︎", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"];
const combining = ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "Z\u0351\u0362\u0334",
  "\u0065\u0300\u0301", "A\u030A", "i\u0307", "ﬁ", "\u212b", "\u2126", "\u1100\u1161\u11a8", "\u0958", "ｆｕｌｌｗｉｄｔｈ", "ℌ", "①"];
const spaces = ["\u00a0", "\u200b", "\u200c", "\u200d", "\ufeff", "\u202f", "\u3000", "\u2009",
  "  ", "   ", "\t", "\t\t", "\r\n", "\n\n", "\r", " \n ", "\n\t  ", "    \n"];
const specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>",
  "<|eot_id|>", "<|start_header_id|>", "<think>", "</think>", "<tool_call>", "<|im_sta",
  "<|eot_id", "< |im_end| >", "<|reserved_special_token_5|>"];

function word() {
  const r = rnd();
  if (r < 0.45) return pick(nouns);
  if (r < 0.65) return pick(verbs);
  if (r < 0.8) return pick(adjs);
  if (r < 0.9) return pick(contractions);
  const w = pick(nouns);
  return rnd() < 0.5 ? w.toUpperCase() : w[0].toUpperCase() + w.slice(1);
}

function prose() {
  const n = int(6, 18), out = [];
  for (let i = 0; i < n; i++) out.push(word());
  let s = out.join(" ");
  s = s[0].toUpperCase() + s.slice(1);
  return s + pick([".", "!", "?", "...", ";", ":", " —", ","]);
}

function digits() {
  const n = int(1, 40);
  let s = "";
  for (let i = 0; i < n; i++) s += String(int(0, 9));
  return pick(["", "$", "#", "-", "+", "v", "0x"]) + s + pick(["", ".5", ",000", "%", "th", "e10"]);
}

function code() {
  const name = pick(nouns) + "_" + pick(verbs);
  const ind = pick(["    ", "\t", "  "]);
  const c = pick([
    `int ${name}(const float *x, int n) {\n${ind}float acc = 0.0f;\n${ind}for (int i = 0; i < n; i++) acc += x[i] * ${int(1, 999)};\n${ind}return acc > 1e-6f ? 1 : 0;\n}\n`,
    `def ${name}(self, xs: list[int]) -> dict:\n${ind}"""${prose()}"""\n${ind}return {k: v**2 for k, v in enumerate(xs) if v != ${int(0, 99)}}\n`,
    `const ${name} = async (req) => {\n${ind}if (!req?.body) throw new Error(\`bad: \${req.id}\`);\n${ind}return req.body.map((x) => x >>> ${int(1, 7)});\n};\n`,
    `#include <stdio.h>\n#define MAX_${name.toUpperCase()} ${digits()}\n// ${prose()}\n`,
    `SELECT id, COUNT(*) AS n FROM ${name} WHERE score >= ${int(0, 100)} GROUP BY id;\n`,
    `<div class="${name}">&nbsp;${prose()}</div>\n`,
    `{"${name}": [${int(0, 9)}, ${int(10, 99)}, null, true], "s": "${pick(contractions)}"}\n`,
  ]);
  return c;
}

function script() {
  return pick([() => pick(zh) + pick(["，", "。", "！", ""]), () => pick(ja) + "。",
    () => pick(ko), () => pick(ar), () => pick(hi), () => pick(ru),
    () => { let s = ""; for (let i = int(2, 12); i > 0; i--) s += cp(0x4e00, 0x9fff); return s; },
    () => { let s = ""; for (let i = int(2, 12); i > 0; i--) s += cp(0x0600, 0x06ff); return s; },
    () => { let s = ""; for (let i = int(2, 12); i > 0; i--) s += cp(0x0900, 0x097f); return s; },
    () => { let s = ""; for (let i = int(2, 12); i > 0; i--) s += cp(0x0400, 0x04ff); return s; },
    () => { let s = ""; for (let i = int(2, 8); i > 0; i--) s += cp(0xac00, 0xd7a3); return s; },
    () => { let s = ""; for (let i = int(2, 8); i > 0; i--) s += cp(0x3040, 0x30ff); return s; },
    () => { let s = ""; for (let i = int(1, 6); i > 0; i--) s += cp(0x1f300, 0x1faff); return s; },
    () => { let s = ""; for (let i = int(1, 6); i > 0; i--) s += cp(0x00a0, 0x024f); return s; },
    () => { let s = ""; for (let i = int(1, 6); i > 0; i--) s += cp(0x2000, 0x2bff); return s; },
  ])();
}

function piece() {
  const r = rnd();
  if (r < 0.35) return prose();
  if (r < 0.47) return code();
  if (r < 0.62) return script();
  if (r < 0.7) return pick(emoji) + pick(emoji);
  if (r < 0.76) return word() + pick(combining) + word();
  if (r < 0.84) return pick(spaces);
  if (r < 0.91) return digits();
  return pick(specials);
}

let bytes = 0, lines = 0;
const out = [];
while (bytes < target) {
  const n = int(1, 40);
  let s = "";
  for (let i = 0; i < n; i++) s += piece() + pick([" ", " ", " ", "", "\n", "  ", "\t"]);
  if (rnd() < 0.1) s = pick(spaces) + s; // leading whitespace
  if (rnd() < 0.1) s = s.trimEnd();
  const line = JSON.stringify({ text: s });
  out.push(line);
  bytes += Buffer.byteLength(s);
  lines++;
}
out.push(JSON.stringify({ text: "" }));
out.push(JSON.stringify({ text: " " }));
out.push(JSON.stringify({ text: "\n" }));
out.push(JSON.stringify({ text: "a" }));
out.push(JSON.stringify({ text: "<|im_start|><|im_end|><|endoftext|>" }));
process.stdout.write(out.join("\n") + "\n");
process.stderr.write(`corpus: ${lines + 5} lines, ${bytes} bytes of text\n`);
