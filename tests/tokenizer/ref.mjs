// tests/tokenizer/ref.mjs — the JavaScript reference side of the tokenizer tests.
// Runs HF's own tokenizers.js / jinja on the same inputs as `grpo tokenize`.
//
//   node ref.mjs encode MODEL_DIR IN.jsonl [special]   {"text"} lines -> {"ids"} lines
//   node ref.mjs decode MODEL_DIR IN.jsonl [skip] [raw] {"ids"} lines -> {"text"} lines (raw: no
//                                                      clean_up_tokenization_spaces, else the config's)
//   node ref.mjs compare GOT.jsonl WANT.jsonl           field-wise equality, first diffs shown
//   node ref.mjs roundtrip IN.jsonl DECODED.jsonl [nfc] text == decode(encode(text))
//   node ref.mjs chat MODEL_DIR CASES.jsonl             {"messages", ...} lines -> {"text"} lines
//   node ref.mjs bench MODEL_DIR IN.jsonl               encode MB/s, single thread
//
// Module resolution: NODE_PATH is not honoured by ESM, so packages are loaded
// from $NPM_MODULES (set by the shell tests) through createRequire.
import fs from "fs";
import path from "path";
import { createRequire } from "module";

const modules = process.env.NPM_MODULES;
if (!modules) throw new Error("NPM_MODULES is not set (run tests/tokenizer/setup_npm.sh)");
const require = createRequire(path.join(modules, "noop.js"));

function loadTokenizer(dir) {
  const { Tokenizer } = require("@huggingface/tokenizers");
  const tj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const cj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  return new Tokenizer(tj, cj);
}

// Lines as a UTF-8 TextDecoder (replacement) reads them, as `grpo tokenize` does.
function readLines(file) {
  const text = new TextDecoder("utf-8", { fatal: false }).decode(fs.readFileSync(file));
  const lines = text.split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  return lines;
}

const [mode, a, b, c] = process.argv.slice(2);
const out = [];

if (mode === "encode") {
  const tok = loadTokenizer(a);
  for (const line of readLines(b)) {
    const ids = tok.encode(JSON.parse(line).text, { add_special_tokens: c === "special" }).ids;
    out.push(`{"ids": [${ids.join(", ")}]}`);
  }
} else if (mode === "decode") {
  const tok = loadTokenizer(a);
  for (const line of readLines(b)) {
    const ids = JSON.parse(line).ids;
    const opts = { skip_special_tokens: c === "skip" };
    if (process.argv.includes("raw")) opts.clean_up_tokenization_spaces = false;
    const text = ids.length ? tok.decode(ids, opts) : "";
    out.push(JSON.stringify({ text }));
  }
} else if (mode === "compare" || mode === "roundtrip") {
  const got = readLines(a), want = readLines(b);
  let bad = 0;
  if (got.length !== want.length) {
    console.error(`line count differs: ${got.length} vs ${want.length}`);
    process.exit(1);
  }
  for (let i = 0; i < got.length; i++) {
    let g = JSON.parse(got[i]), w = JSON.parse(want[i]);
    if (mode === "roundtrip") { // a: inputs, b: decoded
      g = g.text; w = w.text;
      if (c === "nfc") g = g.normalize("NFC");
    }
    const gs = JSON.stringify(g), ws = JSON.stringify(w);
    if (gs !== ws) {
      if (++bad <= 3) {
        let k = 0;
        while (k < gs.length && gs[k] === ws[k]) k++;
        console.error(`line ${i + 1} differs at char ${k}:\n  got  ...${gs.slice(Math.max(0, k - 80), k + 80)}\n  want ...${ws.slice(Math.max(0, k - 80), k + 80)}`);
      }
    }
  }
  if (bad) { console.error(`${bad} of ${got.length} lines differ`); process.exit(1); }
  console.log(`${got.length} lines equal`);
  process.exit(0);
} else if (mode === "chat") {
  const { Template } = require("@huggingface/jinja");
  const cfg = JSON.parse(fs.readFileSync(path.join(a, "tokenizer_config.json"), "utf8"));
  const tmpl = new Template(cfg.chat_template);
  const tokstr = (v) => (v && typeof v === "object" ? v.content : v);
  for (const line of readLines(b)) {
    const cs = JSON.parse(line);
    // as transformers: the special tokens the config sets, add_generation_prompt, messages
    const ctx = { messages: cs.messages, add_generation_prompt: cs.add_generation_prompt ?? true };
    for (const k of ["bos_token", "eos_token", "pad_token", "unk_token"])
      if (tokstr(cfg[k]) != null) ctx[k] = tokstr(cfg[k]);
    if (cs.enable_thinking !== undefined) ctx.enable_thinking = cs.enable_thinking;
    if (cs.tools != null) ctx.tools = cs.tools; // apply_chat_template's tools=
    out.push(JSON.stringify({ text: tmpl.render(ctx) }));
  }
} else if (mode === "bench") {
  const tok = loadTokenizer(a);
  const texts = readLines(b).map((l) => JSON.parse(l).text);
  const bytes = texts.reduce((s, t) => s + Buffer.byteLength(t), 0);
  for (const t of texts) tok.encode(t, { add_special_tokens: false }); // warm-up
  let reps = 0, t0 = performance.now(), el = 0;
  while (el < 2000 || reps < 2) {
    for (const t of texts) tok.encode(t, { add_special_tokens: false });
    reps++;
    el = performance.now() - t0;
  }
  console.log(JSON.stringify({ mb_per_s: (bytes * reps) / 1e6 / (el / 1000), bytes, reps }));
  process.exit(0);
} else {
  console.error("usage: node ref.mjs encode|decode|compare|roundtrip|chat|bench ...");
  process.exit(2);
}
process.stdout.write(out.length ? out.join("\n") + "\n" : "");
