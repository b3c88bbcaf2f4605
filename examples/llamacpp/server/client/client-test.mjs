#!/usr/bin/env node
// client-test.mjs SERVER_URL - llama-server through the official OpenAI client for Node (the
// `openai` package, pinned in package.json): a streamed chat completion, a JSON-schema-constrained
// chat completion (response_format json_schema) and a non-streamed chat completion with usage.
// SERVER_URL is the server's root (http://127.0.0.1:PORT); the client talks to SERVER_URL/v1.
// Greedy (temperature 0) throughout, so a run is repeatable. Exits 0 when every check passes,
// 1 with a message per failed check otherwise, 2 on bad usage.
import OpenAI from "openai";
import { VERSION as openaiVersion } from "openai/version";

const url = process.argv[2];
if (!url || !/^https?:\/\//.test(url)) {
  console.error("usage: node client-test.mjs SERVER_URL   (e.g. http://127.0.0.1:8080)");
  process.exit(2);
}

const client = new OpenAI({
  baseURL: url.replace(/\/+$/, "") + "/v1",
  apiKey: "sk-no-key-required", // llama-server without --api-key accepts any key; the client needs one
  maxRetries: 0, // a retry would hide a failed request
  timeout: 60_000,
});

const failures = [];
function check(cond, what) {
  if (!cond) failures.push(what);
  return cond;
}

// The test model (stories260K) writes children's stories; prompts are story openings.
const messages = (text) => [{ role: "user", content: text }];

async function streamedChat() {
  const t0 = performance.now();
  const stream = await client.chat.completions.create({
    model: "test",
    messages: messages("Once upon a time, there was a little cat"),
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: 48,
    temperature: 0,
  });
  let chunks = 0, contentChunks = 0, text = "", finish = null, usage = null;
  for await (const chunk of stream) {
    chunks++;
    check(chunk.object === "chat.completion.chunk", `stream: chunk ${chunks} has object '${chunk.object}'`);
    for (const choice of chunk.choices ?? []) {
      const delta = choice.delta?.content;
      if (typeof delta === "string" && delta.length > 0) {
        contentChunks++;
        text += delta;
      }
      if (choice.finish_reason) {
        check(finish === null, `stream: a second finish_reason '${choice.finish_reason}'`);
        finish = choice.finish_reason;
      }
    }
    if (chunk.usage) usage = chunk.usage;
  }
  check(contentChunks >= 2, `stream: ${contentChunks} chunks with content, expected several`);
  check(text.trim().length > 0, "stream: the streamed text is empty");
  check(finish === "stop" || finish === "length", `stream: finish_reason is ${JSON.stringify(finish)}, expected "stop" or "length"`);
  if (check(usage !== null, "stream: no usage chunk although stream_options.include_usage was set")) {
    check(usage.completion_tokens > 0 && usage.completion_tokens <= 48,
      `stream: usage.completion_tokens ${usage.completion_tokens} not in 1..48`);
  }
  const ms = performance.now() - t0;
  console.log(`client-test: streamed chat: ${chunks} chunks, ${contentChunks} with content, finish_reason ${finish}, ` +
    `${usage?.completion_tokens} tokens, ${ms.toFixed(0)} ms: ${JSON.stringify(text.slice(0, 80))}...`);
}

// An object with a short string and a small integer: the grammar made from the schema bounds
// both, so max_tokens 160 is enough even when the model pads with the whitespace JSON allows.
const personSchema = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 12 },
    age: { type: "integer", minimum: 0, maximum: 99 },
  },
  required: ["name", "age"],
  additionalProperties: false,
};

function matchesPerson(v) {
  const errs = [];
  if (typeof v !== "object" || v === null || Array.isArray(v)) return ["not an object"];
  const extra = Object.keys(v).filter((k) => k !== "name" && k !== "age");
  if (extra.length) errs.push(`extra keys ${extra.join(",")}`);
  if (typeof v.name !== "string") errs.push("name is not a string");
  else if (v.name.length < 1 || v.name.length > 12) errs.push(`name length ${v.name.length} not in 1..12`);
  if (!Number.isInteger(v.age)) errs.push("age is not an integer");
  else if (v.age < 0 || v.age > 99) errs.push(`age ${v.age} not in 0..99`);
  return errs;
}

async function jsonSchemaChat() {
  const t0 = performance.now();
  const res = await client.chat.completions.create({
    model: "test",
    messages: messages("Lily was a girl. Tell me her name and age as JSON."),
    response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: personSchema } },
    max_tokens: 160,
    temperature: 0,
  });
  const choice = res.choices?.[0];
  const content = choice?.message?.content ?? "";
  let parsed;
  try {
    parsed = JSON.parse(content);
  } catch (e) {
    check(false, `json_schema: the output does not parse as JSON (${e.message}): ${JSON.stringify(content)}` +
      (choice?.finish_reason === "length" ? " (finish_reason length: max_tokens too small?)" : ""));
    return;
  }
  const errs = matchesPerson(parsed);
  check(errs.length === 0, `json_schema: the output does not match the schema (${errs.join("; ")}): ${content}`);
  check(choice.finish_reason === "stop", `json_schema: finish_reason ${choice.finish_reason}, expected stop (the grammar ends the object)`);
  const ms = performance.now() - t0;
  console.log(`client-test: json_schema chat: ${res.usage?.completion_tokens} tokens, ${ms.toFixed(0)} ms: ${content.trim()}`);
}

async function plainChat() {
  const t0 = performance.now();
  const maxTokens = 32;
  const res = await client.chat.completions.create({
    model: "test",
    messages: messages("Tom had a big red ball"),
    max_tokens: maxTokens,
    temperature: 0,
  });
  check(res.object === "chat.completion", `chat: object '${res.object}'`);
  check(Array.isArray(res.choices) && res.choices.length === 1, `chat: ${res.choices?.length} choices, expected 1`);
  const choice = res.choices?.[0];
  const content = choice?.message?.content ?? "";
  check(choice?.message?.role === "assistant", `chat: role '${choice?.message?.role}'`);
  check(content.trim().length > 0, "chat: the content is empty");
  check(choice?.finish_reason === "stop" || choice?.finish_reason === "length", `chat: finish_reason ${choice?.finish_reason}`);
  const u = res.usage;
  if (check(u != null, "chat: no usage")) {
    check(Number.isInteger(u.prompt_tokens) && u.prompt_tokens > 0, `chat: usage.prompt_tokens ${u.prompt_tokens}`);
    check(Number.isInteger(u.completion_tokens) && u.completion_tokens > 0 && u.completion_tokens <= maxTokens,
      `chat: usage.completion_tokens ${u.completion_tokens} not in 1..${maxTokens}`);
    check(u.total_tokens === u.prompt_tokens + u.completion_tokens,
      `chat: usage.total_tokens ${u.total_tokens} != ${u.prompt_tokens} + ${u.completion_tokens}`);
    if (choice?.finish_reason === "length") {
      check(u.completion_tokens === maxTokens, `chat: finish_reason length after ${u.completion_tokens} of ${maxTokens} tokens`);
    }
  }
  const ms = performance.now() - t0;
  console.log(`client-test: chat: usage ${u?.prompt_tokens}+${u?.completion_tokens}=${u?.total_tokens}, ` +
    `finish_reason ${choice?.finish_reason}, ${ms.toFixed(0)} ms: ${JSON.stringify(content.slice(0, 80))}...`);
  return content;
}

async function models() {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  check(ids.length >= 1, "models: /v1/models lists no model");
  console.log(`client-test: models: ${ids.join(", ")}`);
}

const t0 = performance.now();
console.log(`client-test: openai ${openaiVersion} (node ${process.versions.node}) against ${url}`);
for (const [name, fn] of [["models", models], ["streamed chat", streamedChat], ["json_schema chat", jsonSchemaChat], ["chat", plainChat]]) {
  try {
    await fn();
  } catch (e) {
    const status = e?.status ? ` (HTTP ${e.status})` : "";
    failures.push(`${name}: request failed${status}: ${e?.message ?? e}`);
  }
}
// Greedy decoding: the same request twice gives the same text.
try {
  const a = await plainChat();
  const b = await plainChat();
  check(a === b, `chat: two greedy runs of one request differ: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
} catch (e) {
  failures.push(`chat repeat: request failed: ${e?.message ?? e}`);
}

const secs = ((performance.now() - t0) / 1000).toFixed(1);
if (failures.length) {
  console.error(`client-test: FAILED (${failures.length} check(s), ${secs} s):`);
  for (const f of failures) console.error(`  - ${f}`);
  process.exit(1);
}
console.log(`client-test: all checks passed (${secs} s)`);
