// VoltAgent with Engram as its storage: a real Agent, a real Memory, the AI SDK's mock model.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Agent, Memory } from "@voltagent/core";
import { MockLanguageModelV3 } from "ai/test";
import { EngramError } from "../src/index.js";
import { EngramStorage } from "../src/voltagent.js";
import { memoryAgent, newTenant } from "./helpers.js";

const usage = {
  inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 2, text: 2, reasoning: 0 },
};
const reply = (text: string) => ({
  content: [{ type: "text" as const, text }],
  finishReason: { unified: "stop" as const, raw: "stop" },
  usage,
  warnings: [],
});
const textOf = (content: unknown) =>
  typeof content === "string"
    ? content
    : (content as { type: string; text?: string }[]).map((p) => p.text ?? "").join("");

describe("VoltAgent StorageAdapter", () => {
  test("an Agent with Memory({ storage: engram }) remembers the first turn in the second", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const model = new MockLanguageModelV3({ doGenerate: [reply("Hello Alice!"), reply("You are Alice.")] });
    const agent = new Agent({
      id: agentId,
      name: "assistant",
      instructions: "Answer briefly.",
      model,
      memory: new Memory({ storage: new EngramStorage({ client, agentId }) }),
    });
    const who = { userId: "alice", conversationId: "voltagent-thread-1" };
    // VoltAgent persists the user's input in the background, apart from the answer; which
    // of a turn's two lands first is its race (its in-memory store has it too). So the test
    // waits (a little) for a turn to reach Engram, and compares what is held, sorted.
    const held = async (count: number) => {
      let stored: string[][] = [];
      for (let i = 0; i < 50 && stored.length < count; i++) {
        if (i > 0) await new Promise((resolve) => setTimeout(resolve, 100));
        const [conversation] = (await client.listConversations({ agent_id: agentId, key: who.conversationId })).items;
        if (conversation) {
          assert.equal(conversation.external_ref, "alice");
          stored = (await client.listMessages(conversation.id)).items.map((m) => [m.role, textOf(m.content)]);
        }
      }
      return stored.sort();
    };
    assert.equal((await agent.generateText("My name is Alice.", who)).text, "Hello Alice!");
    assert.equal((await held(2)).length, 2);
    assert.equal((await agent.generateText("What is my name?", who)).text, "You are Alice.");

    const second = model.doGenerateCalls[1]!.prompt.map((m) => [m.role, textOf(m.content)]);
    assert.ok(
      second.some(([role, text]) => role === "user" && text === "My name is Alice."),
      `the second prompt holds the first question: ${JSON.stringify(second)}`,
    );
    assert.ok(second.some(([role, text]) => role === "assistant" && text === "Hello Alice!"));
    const stored = await held(4);
    assert.deepEqual(stored.sort(), [
      ["assistant", "Hello Alice!"],
      ["assistant", "You are Alice."],
      ["user", "My name is Alice."],
      ["user", "What is my name?"],
    ]);
  });

  test("conversations and messages round-trip; erasure empties them", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const storage = new EngramStorage({ client, agentId });
    const created = await storage.createConversation({
      id: "c-1",
      resourceId: agentId,
      userId: "bob",
      title: "First",
      metadata: { topic: "tea" },
    });
    assert.deepEqual([created.id, created.userId, created.title, created.metadata], ["c-1", "bob", "First", { topic: "tea" }]);
    await storage.addMessages(
      [
        { id: "m1", role: "user", parts: [{ type: "text", text: "hi" }] },
        { id: "m2", role: "assistant", parts: [{ type: "text", text: "hello" }], metadata: { model: "x" } },
      ],
      "bob",
      "c-1",
    );
    const messages = await storage.getMessages("bob", "c-1");
    assert.deepEqual(
      messages.map((m) => [m.id, m.role, m.parts]),
      [
        ["m1", "user", [{ type: "text", text: "hi" }]],
        ["m2", "assistant", [{ type: "text", text: "hello" }]],
      ],
    );
    assert.equal((messages[1]!.metadata as { model?: string }).model, "x");
    assert.ok(messages[0]!.metadata!.createdAt instanceof Date);
    assert.deepEqual((await storage.getMessages("bob", "c-1", { limit: 1 })).map((m) => m.id), ["m2"]);
    assert.equal((await storage.updateConversation("c-1", { title: "Renamed" })).title, "Renamed");
    assert.equal(await storage.countConversations({ userId: "bob" }), 1);

    await client.eraseUser("bob");
    assert.equal(await new EngramStorage({ client, agentId }).getConversation("c-1"), null);
    assert.deepEqual(await storage.getMessages("bob", "c-1"), [], "an erased conversation reads as empty");
  });

  test("what Engram has no home for fails loudly, naming it", async () => {
    const { client } = newTenant();
    const storage = new EngramStorage({ client, agentId: "a" });
    for (const call of [
      () => storage.getWorkingMemory(),
      () => storage.setWorkingMemory(),
      () => storage.setWorkflowState(),
      () => storage.deleteMessages(),
    ]) {
      await assert.rejects(call(), (error: unknown) => error instanceof EngramError && error.code === "unsupported");
    }
    await assert.rejects(storage.setWorkingMemory(), /working memory/);
    await assert.rejects(storage.setWorkflowState(), /workflow state/);
  });

  test("an invalid conversation id reaches VoltAgent as Engram's 400", async () => {
    const { client } = newTenant();
    const storage = new EngramStorage({ client, agentId: "a" });
    await assert.rejects(
      storage.createConversation({ id: "has spaces", resourceId: "a", userId: "u", title: "", metadata: {} }),
      (error: unknown) => error instanceof EngramError && error.code === "invalid_request",
    );
  });
});
