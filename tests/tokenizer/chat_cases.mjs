// tests/tokenizer/chat_cases.mjs — writes chat-template test cases as JSON
// lines {"messages": [...], "add_generation_prompt": bool[, "enable_thinking": bool]}:
// single- and multi-turn, with and without a system message, assistant turns
// with and without <think> blocks, contents with edge whitespace and non-ASCII.
const contents = ["What is 2 + 2?", "  padded with spaces  ", "\nleading and trailing newlines\n\n",
  "多语言内容：你好，世界 🙂", "Line one\nLine two\n\nLine four", "", "quotes ' \" and {{ braces }} {% x %}",
  "<tool_response>\nresult\n</tool_response>", "Tabs\tinside\tand <|im_end|> in text"];
const answers = ["4", "<think>\nadding\n</think>\n\nThe answer is 4.", "<think>short</think>Sure.",
  "Plain answer with trailing space ", "\n\nleading newlines", "回答：四。"];
const systems = ["You are a helpful assistant.", "  Be terse.  ", "系统提示"];
const cases = [];
let k = 0;
for (const sys of [null, ...systems]) {
  for (let turns = 1; turns <= 3; turns++) {
    const messages = [];
    if (sys !== null) messages.push({ role: "system", content: sys });
    for (let t = 0; t < turns; t++) {
      messages.push({ role: "user", content: contents[(k + t) % contents.length] });
      if (t < turns - 1) messages.push({ role: "assistant", content: answers[(k + t) % answers.length] });
    }
    for (const agp of [true, false]) {
      cases.push({ messages, add_generation_prompt: agp });
      k++;
    }
    cases.push({ messages, add_generation_prompt: true, enable_thinking: false });
    cases.push({ messages, add_generation_prompt: true, enable_thinking: true });
    // a conversation that ends with the assistant's turn
    cases.push({ messages: [...messages, { role: "assistant", content: answers[k % answers.length] }],
      add_generation_prompt: false });
  }
}
for (const c of contents) cases.push({ messages: [{ role: "user", content: c }], add_generation_prompt: true });
process.stdout.write(cases.map((c) => JSON.stringify(c)).join("\n") + "\n");
