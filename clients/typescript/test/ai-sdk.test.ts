// The Vercel AI SDK middleware, on `ai` 6 (MockLanguageModelV3) and `ai` 7 (V3 and V4).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as ai6 from "ai";
import * as ai6test from "ai/test";
import * as ai7 from "ai7";
import * as ai7test from "ai7/test";
import { engramMiddleware } from "../src/ai-sdk.js";
import { EngramClient, EngramError } from "../src/index.js";
import { closedAddress, hangingAddress, memoryAgent, newTenant } from "./helpers.js";

// Compile-time: the middleware is a middleware of both majors.
export const typeCheck6 = (m: ReturnType<typeof engramMiddleware>): ai6.LanguageModelMiddleware => m;
export const typeCheck7 = (m: ReturnType<typeof engramMiddleware>): ai7.LanguageModelMiddleware => m;

const usage = {
  inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 2, text: 2, reasoning: 0 },
};
const text = (value: string, reason = "stop") => ({
  content: [{ type: "text", text: value }],
  finishReason: { unified: reason, raw: reason },
  usage,
  warnings: [],
});
const toolCall = {
  content: [{ type: "tool-call", toolCallId: "call-1", toolName: "weather", input: "{}" }],
  finishReason: { unified: "tool-calls", raw: "tool_calls" },
  usage,
  warnings: [],
};
const streamOf = (deltas: string[]) => ({
  stream: new ReadableStream({
    start(controller) {
      controller.enqueue({ type: "stream-start", warnings: [] });
      controller.enqueue({ type: "text-start", id: "t" });
      for (const delta of deltas) controller.enqueue({ type: "text-delta", id: "t", delta });
      controller.enqueue({ type: "text-end", id: "t" });
      controller.enqueue({ type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage });
      controller.close();
    },
  }),
});

// biome-ignore lint: the matrix mixes two majors whose types differ only nominally
type Any = any;
const matrix: { name: string; sdk: Any; Mock: Any }[] = [
  { name: "ai 6, LanguageModelV3", sdk: ai6, Mock: ai6test.MockLanguageModelV3 },
  { name: "ai 7, LanguageModelV3", sdk: ai7, Mock: ai7test.MockLanguageModelV3 },
  { name: "ai 7, LanguageModelV4", sdk: ai7, Mock: ai7test.MockLanguageModelV4 },
];

async function setup() {
  const { client } = newTenant();
  const agentId = await memoryAgent(client);
  await client.rememberFact(agentId, "alice", { fact: "Prefers tea over coffee" });
  return { client, agentId };
}

const contents = async (client: EngramClient, id: string) =>
  (await client.listMessages(id)).items.map((m) => m.content);

const systemTexts = (prompt: { role: string; content: unknown }[]) =>
  prompt.filter((m) => m.role === "system").map((m) => String(m.content));

for (const { name, sdk, Mock } of matrix) {
  describe(name, () => {
    test("generate: the prompt holds the memory block, Engram holds the turn", async () => {
      const { client, agentId } = await setup();
      const model = new Mock({ doGenerate: text("You like tea.") });
      const middleware = engramMiddleware({ client, agentId, externalRef: "alice", conversationKey: "chat-1" });
      const result = await sdk.generateText({
        model: sdk.wrapLanguageModel({ model, middleware }),
        prompt: "Which drink should I order?",
      });
      assert.equal(result.text, "You like tea.");
      const [block] = systemTexts(model.doGenerateCalls[0].prompt);
      assert.match(block ?? "", /<user-memory>\n- Prefers tea over coffee\n<\/user-memory>/);
      const [conversation] = (await client.listConversations({ agent_id: agentId, key: "chat-1" })).items;
      const messages = (await client.listMessages(conversation!.id)).items;
      assert.deepEqual(
        messages.map((m) => [m.role, m.content]),
        [
          ["user", "Which drink should I order?"],
          ["assistant", "You like tea."],
        ],
      );
    });

    test("stream: every text delta reaches the reader and Engram", async () => {
      const { client, agentId } = await setup();
      const conversation = await client.createConversation({ agent_id: agentId, external_ref: "alice" });
      const model = new Mock({ doStream: streamOf(["Tea", ", ", "of course", "."]) });
      const middleware = engramMiddleware({ client, agentId, externalRef: "alice", conversationId: conversation.id });
      const result = sdk.streamText({ model: sdk.wrapLanguageModel({ model, middleware }), prompt: "Drink?" });
      let streamed = "";
      for await (const delta of result.textStream) streamed += delta;
      assert.equal(streamed, "Tea, of course.");
      assert.match(systemTexts(model.doStreamCalls[0].prompt)[0] ?? "", /Prefers tea over coffee/);
      assert.deepEqual(await contents(client, conversation.id), ["Drink?", "Tea, of course."]);
    });

    test("a tool loop is stored once, with identity from providerOptions.engram", async () => {
      const { client, agentId } = await setup();
      const conversation = await client.createConversation({ agent_id: agentId, external_ref: "alice" });
      const model = new Mock({ doGenerate: [toolCall, text("Sunny, have an iced tea.")] });
      const result = await sdk.generateText({
        model: sdk.wrapLanguageModel({ model, middleware: engramMiddleware({ client, agentId }) }),
        prompt: "Weather?",
        tools: {
          weather: sdk.tool({ inputSchema: sdk.jsonSchema({ type: "object", properties: {} }), execute: async () => "sunny" }),
        },
        stopWhen: sdk.stepCountIs(3),
        providerOptions: { engram: { externalRef: "alice", conversationId: conversation.id } },
      });
      assert.equal(result.steps.length, 2, "two model calls");
      for (const call of model.doGenerateCalls) assert.equal(systemTexts(call.prompt).length, 1, "each step has the block");
      assert.deepEqual(await contents(client, conversation.id), ["Weather?", "Sunny, have an iced tea."]);
    });

    test("memory off or consent refused: no block; Engram's errors reach the caller", async () => {
      const { client, agentId } = await setup();
      await client.putConsent("alice", { ai_consent: false });
      const model = new Mock({ doGenerate: text("ok") });
      const middleware = engramMiddleware({ client, agentId, externalRef: "alice", conversationKey: "c" });
      await sdk.generateText({ model: sdk.wrapLanguageModel({ model, middleware }), prompt: "hi" });
      assert.deepEqual(systemTexts(model.doGenerateCalls[0].prompt), []);

      const bad = engramMiddleware({ client, agentId, externalRef: "alice", conversationKey: "not a key!" });
      await assert.rejects(
        sdk.generateText({ model: sdk.wrapLanguageModel({ model, middleware: bad }), prompt: "hi" }),
        (error: unknown) => error instanceof EngramError && error.code === "invalid_request" && error.status === 400,
      );
    });
  });
}

describe("before the model is called", () => {
  const { sdk, Mock } = matrix[0]!;
  const wrapped = (model: Any, options: Parameters<typeof engramMiddleware>[0]) =>
    sdk.wrapLanguageModel({ model, middleware: engramMiddleware(options) });

  test("a key naming another person's conversation, or no key, fails with no model call", async () => {
    const { client, agentId } = await setup();
    const model = new Mock({ doGenerate: text("ok") });
    const as = (externalRef: string) => wrapped(model, { client, agentId, externalRef, conversationKey: "chat-1" });
    await sdk.generateText({ model: as("alice"), prompt: "hi" });
    await assert.rejects(
      sdk.generateText({ model: as("bob"), prompt: "hi" }),
      (error: unknown) => error instanceof EngramError && error.code === "conflict" && /unique per agent/.test(error.message),
    );
    for (const onEngramError of ["throw", "continue"] as const) {
      // No key is a mistake, not an outage: "continue" does not pass over it.
      await assert.rejects(
        sdk.generateText({ model: wrapped(model, { client, agentId, externalRef: "bob", onEngramError }), prompt: "hi" }),
        (error: unknown) => error instanceof EngramError && error.code === "invalid_request",
      );
    }
    assert.equal(model.doGenerateCalls.length, 1, "only alice's call reached the model");
    const [conversation] = (await client.listConversations({ agent_id: agentId, key: "chat-1" })).items;
    assert.deepEqual(await contents(client, conversation!.id), ["hi", "ok"]);
  });

  test("Engram down: 'throw' fails before the model, 'continue' answers without memory", async () => {
    const baseUrl = await closedAddress();
    const down = new EngramClient({ baseUrl, token: "t", maxRetries: 0 });
    const model = new Mock({ doGenerate: text("ok") });
    const who = { client: down, agentId: "a", externalRef: "alice", conversationKey: "k" };
    await assert.rejects(
      sdk.generateText({ model: wrapped(model, who), prompt: "hi" }),
      (error: unknown) => error instanceof EngramError && error.code === "network",
    );
    assert.equal(model.doGenerateCalls.length, 0);

    const heard: EngramError[] = [];
    const onError = (error: EngramError) => heard.push(error);
    const result = await sdk.generateText({
      model: wrapped(model, { ...who, onEngramError: "continue", onError }),
      prompt: "hi",
    });
    assert.equal(result.text, "ok");
    assert.deepEqual(systemTexts(model.doGenerateCalls[0].prompt), [], "no memory block");
    assert.ok(heard.length > 0 && heard.every((error) => error.code === "network"), "each failure was reported");
    assert.match(heard[0]!.message, /ECONNREFUSED/);
  });

  test("Engram hanging: 'continue' gives up after memoryTimeoutMs and the model answers", async () => {
    const { baseUrl, close } = await hangingAddress();
    try {
      const slow = new EngramClient({ baseUrl, token: "t", timeoutMs: 500, maxRetries: 0 });
      const model = new Mock({ doGenerate: text("ok") });
      const heard: EngramError[] = [];
      const result = await sdk.generateText({
        model: wrapped(model, {
          client: slow,
          agentId: "a",
          externalRef: "alice",
          conversationKey: "k",
          memoryTimeoutMs: 200,
          onEngramError: "continue",
          onError: (error) => heard.push(error),
        }),
        prompt: "hi",
      });
      assert.equal(result.text, "ok");
      assert.equal(model.doGenerateCalls.length, 1);
      assert.ok(heard.length > 0 && heard.every((error) => error.code === "timeout"), "each timeout was reported");
    } finally {
      await close();
    }
  });

  test("a thread that never ends learns as it goes: turn 1's fact is in the prompt of turn N+1", async () => {
    const { client, agentId } = await setup();
    const n = 2;
    await client.putConfig(agentId, { min_user_turns: 1, extract_every_user_turns: n });
    const model = new Mock({ doGenerate: text("Noted.") });
    const middleware = engramMiddleware({ client, agentId, externalRef: "alice", conversationKey: "alice:open" });
    const say = (prompt: string) => sdk.generateText({ model: sdk.wrapLanguageModel({ model, middleware }), prompt });
    await say("My name is Alice.");
    for (let turn = 2; turn <= n; turn++) await say(`Which book should I read next, number ${turn}?`);
    // The Nth user turn queued the segment; no end call: wait for its job only.
    const conversation = await middleware.conversation();
    const deadline = Date.now() + 30_000;
    let jobs = (await client.listJobs({ conversation_id: conversation.id })).items;
    while (!(jobs.length === 1 && jobs[0]!.status === "succeeded") && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      jobs = (await client.listJobs({ conversation_id: conversation.id })).items;
    }
    assert.deepEqual(
      jobs.map((job) => [job.status, job.from_seq, job.through_seq]),
      [["succeeded", 0, 2 * n]],
      "one segment of the first N turns",
    );
    await say("Can you greet me by name?");
    const block = systemTexts(model.doGenerateCalls[n]!.prompt)[0] ?? "";
    assert.match(block, /- Name is Alice/, "turn N+1's prompt holds turn 1's fact");
    assert.equal((await client.getConversation(conversation.id)).status, "open", "never ended");
  });

  test("the middleware hands out its conversation, which ends and is extracted", async () => {
    const { client, agentId } = await setup();
    await client.putConfig(agentId, { memory_enabled: true, min_user_turns: 1, extract_every_user_turns: null });
    const model = new Mock({ doGenerate: text("Noted.") });
    const middleware = engramMiddleware({ client, agentId, externalRef: "alice", conversationKey: "alice:trip" });
    await sdk.generateText({ model: sdk.wrapLanguageModel({ model, middleware }), prompt: "I live in Lyon." });
    const conversation = await middleware.conversation();
    assert.deepEqual(await contents(client, conversation.id), ["I live in Lyon.", "Noted."]);
    const ended = await conversation.end();
    assert.equal(ended.conversation.status, "ended");
    const job = await client.waitForJob(ended.extraction.job_id!, { timeoutMs: 30_000 });
    assert.equal(job.status, "succeeded");
    const facts = (await client.listFacts(agentId, "alice")).items.map((f) => f.fact);
    assert.ok(facts.some((fact) => /Lyon/.test(fact)), `extracted: ${facts}`);
  });
});
