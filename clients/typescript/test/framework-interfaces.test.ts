// The interfaces of the frameworks Engram was designed from (gemstack, gumbee, Tutti) over
// a live Engram. Their shapes are checked by the compiler: each class `implements` its
// interface, and the assignments below fail to compile if a class drifts from it.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  EngramConversationMemory,
  EngramConversationStore,
  EngramSemanticMemoryStore,
  EngramUserMemory,
  EngramUserMemoryStore,
  type GemstackConversationStore,
  type GemstackUserMemory,
  type GumbeeMemory,
  type TuttiSemanticMemoryStore,
  type TuttiUserMemoryStore,
} from "../src/framework-interfaces.js";
import { memoryAgent, newTenant } from "./helpers.js";

test("gemstack: ConversationStore and UserMemory, forgetAll erases the person", async () => {
  const { client } = newTenant();
  const agentId = await memoryAgent(client);
  const conversations: GemstackConversationStore = new EngramConversationStore(client, agentId);
  const memory: GemstackUserMemory = new EngramUserMemory(client, agentId);

  const { id } = await conversations.create({ userId: "alice", title: "Support" });
  await conversations.append(id, [
    { role: "user", content: "I moved to Lyon." },
    { role: "assistant", content: "Noted." },
  ]);
  assert.deepEqual(await conversations.history(id, { limit: 1 }), [{ role: "assistant", content: "Noted." }]);
  const fact = await memory.remember("alice", "Lives in Lyon", { tags: ["home"] });
  assert.deepEqual((await memory.recall("alice", "Lyon")).map((r) => r.id), [fact.id]);
  assert.equal((await memory.list("alice")).length, 1);

  await memory.forgetAll("alice");
  assert.deepEqual(await memory.list("alice"), []);
  await assert.rejects(conversations.history(id), { code: "not_found" });
});

test("gumbee: one Memory per conversation", async () => {
  const { client } = newTenant();
  const agentId = await memoryAgent(client);
  const conversation = await client.createConversation({ agent_id: agentId, external_ref: "bob" });
  const memory: GumbeeMemory = new EngramConversationMemory(client, conversation.id);
  await memory.store([{ role: "user", content: "Hi" }]);
  await memory.appended({ role: "assistant", content: "Hello Bob" });
  assert.deepEqual(await memory.read(), [
    { role: "user", content: "Hi" },
    { role: "assistant", content: "Hello Bob" },
  ]);
  const elsewhere: GumbeeMemory = new EngramConversationMemory(client, "0193a1b2-0000-7000-8000-000000000000");
  await assert.rejects(elsewhere.read(), { code: "not_found", status: 404 });
});

test("Tutti: UserMemoryStore and SemanticMemoryStore", async () => {
  const { client } = newTenant();
  const agentId = await memoryAgent(client);
  const users: TuttiUserMemoryStore = new EngramUserMemoryStore(client, agentId);
  const semantic: TuttiSemanticMemoryStore = new EngramSemanticMemoryStore(client, agentId);
  const tea = await users.add("carol", "Prefers tea over coffee");
  await semantic.add("carol", "Allergic to peanuts", { tags: ["health"] });
  assert.equal((await users.get("carol")).length, 2);
  const [hit] = await semantic.search("carol", "peanuts", 5);
  assert.equal(hit?.text, "Allergic to peanuts");
  assert.ok(typeof hit?.score === "number");
  await users.remove("carol", tea.id);
  assert.deepEqual((await users.get("carol")).map((r) => r.text), ["Allergic to peanuts"]);
  await users.clear("carol");
  assert.deepEqual(await users.get("carol"), []);
  await assert.rejects(semantic.add("carol", ""), { code: "invalid_request" });
});
