// VoltAgent with Engram as its storage: a real Agent, a real Memory, the AI SDK's mock model.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Agent, ConversationAlreadyExistsError, Memory } from "@voltagent/core";
import { MockLanguageModelV3 } from "ai/test";
import { EngramClient, EngramError } from "../src/index.js";
import { EngramStorage } from "../src/voltagent.js";
import { closedAddress, ENGRAM_URL, failure, hangingAddress, memoryAgent, newTenant } from "./helpers.js";

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
/** The model calls VoltAgent's `update_working_memory` tool with `input`. */
let calls = 0;
const updateWorkingMemory = (input: { content: string; mode: "replace" | "append" }) => ({
  content: [
    { type: "tool-call" as const, toolCallId: `call-${++calls}`, toolName: "update_working_memory", input: JSON.stringify(input) },
  ],
  finishReason: { unified: "tool-calls" as const, raw: "tool_calls" },
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

  test("a conversation created by the other write of a turn is the one; another user's is already taken", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const storage = new EngramStorage({ client, agentId });
    // The input's write found no conversation and made it, without a title (`ensure`); the
    // answer's write, which found none either, then creates it with VoltAgent's title.
    await storage.addMessages([{ id: "m1", role: "user", parts: [{ type: "text", text: "hi" }] }], "carol", "c-race");
    const input = { id: "c-race", resourceId: agentId, userId: "carol", title: "Conversation", metadata: {} };
    const created = await new EngramStorage({ client, agentId }).createConversation(input);
    assert.deepEqual([created.id, created.userId], ["c-race", "carol"]);
    assert.equal(await storage.countConversations({ userId: "carol" }), 1);
    await assert.rejects(
      new EngramStorage({ client, agentId }).createConversation({ ...input, userId: "dave" }),
      (error: unknown) => error instanceof ConversationAlreadyExistsError,
    );
  });

  test("what Engram has no home for fails loudly, naming it", async () => {
    const { client } = newTenant();
    const storage = new EngramStorage({ client, agentId: "a" });
    for (const call of [() => storage.setWorkflowState(), () => storage.getWorkflowState(), () => storage.deleteMessages()]) {
      await assert.rejects(call(), (error: unknown) => error instanceof EngramError && error.code === "unsupported");
    }
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

describe("VoltAgent working memory in Engram", () => {
  const template = "## Guest\n- Name:\n- Drink:";
  /** A VoltAgent Agent on Engram whose working memory has `scope`. */
  const host = (client: EngramClient, agentId: string, model: MockLanguageModelV3, scope: "user" | "conversation") =>
    new Agent({
      id: agentId,
      name: "host",
      instructions: "Answer briefly.",
      model,
      memory: new Memory({
        storage: new EngramStorage({ client, agentId }),
        workingMemory: { enabled: true, scope, template },
      }),
    });

  test('scope "user": what the Agent writes is the user document Engram serves, in every conversation', async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const profile = "## Guest\n- Name: Dana\n- Drink: mint tea";
    const model = new MockLanguageModelV3({
      doGenerate: [updateWorkingMemory({ content: profile, mode: "replace" }), reply("Noted, Dana."), reply("Mint tea.")],
    });
    const agent = host(client, agentId, model, "user");
    await agent.generateText("I am Dana and I drink mint tea.", { userId: "dana", conversationId: "wm-thread-1" });
    const stored = await client.getUserDocument(agentId, "dana");
    assert.equal(stored?.content, profile, "Engram's REST route serves what the Agent wrote");

    // Another conversation of the same user: VoltAgent reads the document back into the prompt.
    assert.equal((await agent.generateText("What do I drink?", { userId: "dana", conversationId: "wm-thread-2" })).text, "Mint tea.");
    const system = model.doGenerateCalls[2]!.prompt.filter((m) => m.role === "system").map((m) => textOf(m.content));
    assert.ok(system.some((text) => text.includes("- Drink: mint tea")), `the prompt holds the document: ${system}`);

    // Engram's memory context shows the same document.
    const context = await client.memoryContext(agentId, "dana", { working_memory: true });
    assert.match(context.prompt, /<working-memory>[\s\S]*- Name: Dana/);
  });

  test('scope "conversation": the document of the Engram conversation, appended to by VoltAgent', async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const model = new MockLanguageModelV3({
      doGenerate: [
        updateWorkingMemory({ content: "- Name: Eli", mode: "replace" }),
        reply("Hi Eli."),
        updateWorkingMemory({ content: "- Drink: cocoa", mode: "append" }),
        reply("Cocoa it is."),
      ],
    });
    const agent = host(client, agentId, model, "conversation");
    const who = { userId: "eli", conversationId: "wm-thread-3" };
    await agent.generateText("I am Eli.", who);
    await agent.generateText("I would like cocoa.", who);
    const [conversation] = (await client.listConversations({ agent_id: agentId, key: who.conversationId })).items;
    assert.equal(conversation?.external_ref, "eli");
    assert.equal((await client.getConversationDocument(conversation!.id))?.content, "- Name: Eli\n\n- Drink: cocoa");
    assert.equal(await client.getUserDocument(agentId, "eli"), null, "the user document is another one");
  });

  test("a write over a concurrent writer's change fails with precondition_failed and loses nothing", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const storage = new EngramStorage({ client, agentId });
    const user = { userId: "fay", scope: "user" as const };
    assert.equal(await storage.getWorkingMemory(user), null);

    // Read as absent: the adapter's first write creates only, so a document made meanwhile stays.
    await client.putUserDocument(agentId, "fay", { content: "written elsewhere" });
    await assert.rejects(storage.setWorkingMemory({ ...user, content: "mine" }), (error: unknown) =>
      error instanceof EngramError && error.code === "precondition_failed",
    );
    assert.equal((await client.getUserDocument(agentId, "fay"))?.content, "written elsewhere");

    // Read, changed by another writer, written: refused; after a read it goes through.
    assert.equal(await storage.getWorkingMemory(user), "written elsewhere");
    await client.putUserDocument(agentId, "fay", { content: "changed elsewhere" });
    await assert.rejects(storage.setWorkingMemory({ ...user, content: "mine, on a stale read" }), (error: unknown) =>
      error instanceof EngramError && error.status === 412 && error.code === "precondition_failed",
    );
    assert.equal((await client.getUserDocument(agentId, "fay"))?.content, "changed elsewhere");
    assert.equal(await storage.getWorkingMemory(user), "changed elsewhere");
    await storage.setWorkingMemory({ ...user, content: "changed elsewhere, then mine" });
    await storage.setWorkingMemory({ ...user, content: "mine again: my own version is the one I hold" });
    assert.equal((await client.getUserDocument(agentId, "fay"))?.content, "mine again: my own version is the one I hold");

    // A delete is guarded the same way; deleting what is gone is not an error.
    await client.putUserDocument(agentId, "fay", { content: "changed once more" });
    await assert.rejects(storage.deleteWorkingMemory(user), /changed since/);
    assert.equal(await storage.getWorkingMemory(user), "changed once more");
    await storage.deleteWorkingMemory(user);
    assert.equal(await client.getUserDocument(agentId, "fay"), null);
    await storage.deleteWorkingMemory(user);

    // An adapter that never read the document writes whatever is there (VoltAgent's "replace").
    await client.putUserDocument(agentId, "fay", { content: "old" });
    await new EngramStorage({ client, agentId }).setWorkingMemory({ ...user, content: "replaced" });
    assert.equal((await client.getUserDocument(agentId, "fay"))?.content, "replaced");
  });

  test("conversation scope creates the conversation on a first write; user scope needs agentId", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const storage = new EngramStorage({ client, agentId });
    const where = { userId: "gil", conversationId: "wm-thread-4", scope: "conversation" as const };
    assert.equal(await storage.getWorkingMemory(where), null, "no conversation yet reads as none");
    await storage.setWorkingMemory({ ...where, content: "agenda: one item" });
    const [conversation] = (await client.listConversations({ agent_id: agentId, key: "wm-thread-4" })).items;
    assert.equal(conversation?.external_ref, "gil");
    assert.equal((await client.getConversationDocument(conversation!.id))?.content, "agenda: one item");
    assert.equal(await storage.getWorkingMemory(where), "agenda: one item");
    await storage.deleteWorkingMemory(where);
    assert.equal(await client.getConversationDocument(conversation!.id), null);

    const anonymous = new EngramStorage({ client });
    await assert.rejects(
      anonymous.setWorkingMemory({ userId: "gil", scope: "user", content: "x" }),
      (error: unknown) => error instanceof EngramError && /`agentId` option/.test(error.message),
    );
  });
});

describe("VoltAgent: the conversation before the model, and failing open", () => {
  /** An Agent on `storage` whose model answers "ok" and notes when it was called. */
  const agentOn = (storage: EngramStorage, agentId: string) => {
    const started = Date.now();
    const calledAfterMs: number[] = [];
    const model = new MockLanguageModelV3({
      doGenerate: async () => {
        calledAfterMs.push(Date.now() - started);
        return reply("ok");
      },
    });
    const agent = new Agent({
      id: agentId,
      name: "assistant",
      instructions: "Answer briefly.",
      model,
      memory: new Memory({ storage }),
      hooks: storage.hooks,
    });
    return { agent, model, calledAfterMs };
  };

  test("a conversation id naming another person's conversation fails before the model, and nothing leaks", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const alices = await client.createConversation({ agent_id: agentId, external_ref: "alice", key: "shared-thread" });
    const { agent, model } = agentOn(new EngramStorage({ client, agentId }), agentId);
    const refused = await failure(agent.generateText("hi, I am Bob", { userId: "bob", conversationId: "shared-thread" }));
    assert.equal(refused.status, 409);
    assert.equal(refused.code, "conflict");
    assert.match(refused.message, /another person's conversation/);
    assert.equal(model.doGenerateCalls.length, 0, "no model call is paid for");
    // VoltAgent persists the input in the background: it never lands in Alice's conversation.
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal((await client.listMessages(alices.id)).items.length, 0);
  });

  test("a missing userId fails before the model; a new conversation is created before it", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const { agent, model } = agentOn(new EngramStorage({ client, agentId }), agentId);
    const refused = await failure(agent.generateText("hi", { conversationId: "no-user" }));
    assert.equal(refused.code, "invalid_request");
    assert.equal(model.doGenerateCalls.length, 0);

    const modelSaw: string[] = [];
    const storage = new EngramStorage({ client, agentId });
    const checking = new MockLanguageModelV3({
      doGenerate: async () => {
        const found = (await client.listConversations({ agent_id: agentId, key: "fresh-thread" })).items;
        modelSaw.push(...found.map((c) => c.external_ref));
        return reply("ok");
      },
    });
    const agent2 = new Agent({ id: agentId, name: "a", instructions: "x", model: checking, memory: new Memory({ storage }), hooks: storage.hooks });
    await agent2.generateText("hi", { userId: "carol", conversationId: "fresh-thread" });
    assert.deepEqual(modelSaw, ["carol"], "the conversation existed when the model was called");
  });

  test("a failed history read fails only the turn it belongs to", async () => {
    const { client: live, token } = newTenant();
    const agentId = await memoryAgent(live);
    let down = true;
    const client = new EngramClient({
      baseUrl: ENGRAM_URL,
      token,
      maxRetries: 0,
      fetch: (input, init) => (down ? Promise.reject(new TypeError("fetch failed")) : fetch(input, init)),
    });
    const storage = new EngramStorage({ client, agentId });
    await assert.rejects(storage.getMessages("dora", "stale-thread"), (error: unknown) => error instanceof EngramError);
    down = false;
    assert.deepEqual(await storage.getMessages("dora", "stale-thread"), []);
    await storage.prepare("dora", "stale-thread"); // the read that failed earlier is not this turn's
    const [conversation] = (await live.listConversations({ agent_id: agentId, key: "stale-thread" })).items;
    assert.equal(conversation?.external_ref, "dora", "prepare created the conversation");
  });

  for (const outage of ["down", "hanging"] as const) {
    test(`Engram ${outage}: 'continue' answers without memory, promptly; 'throw' fails before the model`, async () => {
      const hanging = outage === "hanging" ? await hangingAddress() : undefined;
      const baseUrl = hanging?.baseUrl ?? (await closedAddress());
      try {
        // The client's own timeouts, which writes keep: the model must be called well before.
        const unreachable = new EngramClient({ baseUrl, token: "t", timeoutMs: 4_000, deadlineMs: 4_000 });
        const heard: EngramError[] = [];
        const open = new EngramStorage({
          client: unreachable,
          agentId: "a",
          memoryTimeoutMs: 300,
          onEngramError: "continue",
          onError: (error) => heard.push(error),
        });
        const continuing = agentOn(open, "a");
        const result = await continuing.agent.generateText("hi", { userId: "alice", conversationId: "t-1" });
        assert.equal(result.text, "ok");
        assert.equal(continuing.calledAfterMs.length, 1);
        assert.ok(continuing.calledAfterMs[0]! < 1_500, `the model was called after ${continuing.calledAfterMs[0]} ms`);
        assert.ok(heard.length > 0, "the failure was reported");
        assert.ok(heard.every((error) => error.code === (outage === "down" ? "network" : "timeout")), `${heard.map((e) => e.code)}`);

        const closed = agentOn(new EngramStorage({ client: unreachable, agentId: "a", memoryTimeoutMs: 300 }), "a");
        const started = Date.now();
        const refused = await failure(closed.agent.generateText("hi", { userId: "alice", conversationId: "t-2" }));
        assert.equal(refused.code, outage === "down" ? "network" : "timeout");
        assert.ok(Date.now() - started < 1_500, `failed after ${Date.now() - started} ms`);
        assert.equal(closed.model.doGenerateCalls.length, 0);
      } finally {
        await hanging?.close();
      }
    });
  }
});
