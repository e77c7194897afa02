// The Vercel AI SDK middleware, on `ai` 6 (MockLanguageModelV3) and `ai` 7 (V3 and V4).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as ai6 from "ai";
import * as ai6test from "ai/test";
import * as ai7 from "ai7";
import * as ai7test from "ai7/test";
import { engramMiddleware } from "../src/ai-sdk.js";
import { type EngramClient, EngramError } from "../src/index.js";
import { memoryAgent, newTenant } from "./helpers.js";

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
