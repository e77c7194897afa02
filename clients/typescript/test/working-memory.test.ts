// Working memory through the typed client, against the live Engram: versions (ETag,
// If-Match, If-None-Match), the size cap, memory context, export and erasure.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EngramClient, EngramError } from "../src/index.js";
import { ENGRAM_URL, failure, memoryAgent, newTenant } from "./helpers.js";

/** A client of `token` that counts the requests it sends. */
function countingClient(token: string) {
  const sent: string[] = [];
  const client = new EngramClient({
    baseUrl: ENGRAM_URL,
    token,
    fetch: (input, init) => {
      sent.push(`${init?.method ?? "GET"} ${String(input)}`);
      return fetch(input, init);
    },
  });
  return { client, sent };
}

describe("working memory", () => {
  test("two writers with the same ETag: one wins, the other gets precondition_failed, not retried", async () => {
    const { client, token } = newTenant();
    const agentId = await memoryAgent(client);
    const first = await client.putUserDocument(agentId, "erin", { content: "## Erin\n- plans a trip" });
    assert.match(first.etag, /^[0-9a-f-]{36}$/);
    const [one, two] = [countingClient(token), countingClient(token)];

    const read = await one.client.getUserDocument(agentId, "erin"); // null before the first write
    const results = await Promise.allSettled([
      one.client.putUserDocument(agentId, "erin", { content: "## Erin\n- plans a trip\n- by train" }, { ifMatch: read!.etag }),
      two.client.putUserDocument(agentId, "erin", { content: "## Erin\n- plans a trip\n- budget: small" }, { ifMatch: read!.etag }),
    ]); // one is written; the other rejects with EngramError { status: 412, code: "precondition_failed" }

    assert.deepEqual(read, first, "the read answers what the write stored");
    const writers = [one, two];
    const texts = ["## Erin\n- plans a trip\n- by train", "## Erin\n- plans a trip\n- budget: small"];
    const won = results.findIndex((r) => r.status === "fulfilled");
    const lost = results.findIndex((r) => r.status === "rejected");
    assert.ok(won >= 0 && lost >= 0, `one wins, one loses: ${JSON.stringify(results.map((r) => r.status))}`);
    const error = (results[lost] as PromiseRejectedResult).reason;
    assert.ok(error instanceof EngramError);
    assert.deepEqual([error.status, error.code], [412, "precondition_failed"]);
    assert.equal(writers[lost]!.sent.length, lost === 0 ? 2 : 1, "a 412 is not retried (writer one also read)");

    const stored = await client.getUserDocument(agentId, "erin");
    assert.equal(stored!.content, texts[won], "the winner's text is stored, the loser's changed nothing");
    assert.equal(stored!.etag, (results[won] as PromiseFulfilledResult<{ etag: string }>).value.etag);

    // The loser rereads and writes on top of the winner's text.
    const merged = `${stored!.content}\n- budget: small`;
    const again = await writers[lost]!.client.putUserDocument(agentId, "erin", { content: merged }, { ifMatch: stored!.etag });
    assert.equal((await client.getUserDocument(agentId, "erin"))!.content, merged);
    assert.notEqual(again.etag, stored!.etag);
  });

  test("a conversation's document: the same versions, and a stale If-Match on delete changes nothing", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const conversation = await client.createConversation({ agent_id: agentId, external_ref: "farid" });
    assert.equal(await client.getConversationDocument(conversation.id), null, "no document before the first write");
    const v1 = await client.putConversationDocument(conversation.id, { content: "step 1: pick a date" });
    const v2 = await client.putConversationDocument(conversation.id, { content: "step 2: pick a venue" }, { ifMatch: v1.etag });
    const stale = await failure(client.putConversationDocument(conversation.id, { content: "lost" }, { ifMatch: v1.etag }));
    assert.equal(stale.code, "precondition_failed");
    const staleDelete = await failure(client.deleteConversationDocument(conversation.id, { ifMatch: v1.etag }));
    assert.equal(staleDelete.code, "precondition_failed");
    assert.equal((await client.getConversationDocument(conversation.id))!.content, "step 2: pick a venue");
    await client.deleteConversationDocument(conversation.id, { ifMatch: v2.etag });
    assert.equal(await client.getConversationDocument(conversation.id), null);
    assert.equal((await failure(client.deleteConversationDocument(conversation.id))).code, "not_found");

    const unknown = "0193a1b2-0000-7000-8000-000000000000";
    assert.equal(await client.getConversationDocument(unknown), null, "no such conversation reads as null too");
    assert.equal((await failure(client.putConversationDocument(unknown, { content: "x" }))).code, "not_found");
  });

  test("If-None-Match: * creates only; If-Match: * replaces only", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const missing = await failure(client.putUserDocument(agentId, "gus", { content: "no" }, { ifMatch: "*" }));
    assert.equal(missing.code, "precondition_failed", "If-Match: * needs a stored version");
    await client.putUserDocument(agentId, "gus", { content: "first" }, { ifNoneMatch: "*" });
    const again = await failure(client.putUserDocument(agentId, "gus", { content: "second" }, { ifNoneMatch: "*" }));
    assert.deepEqual([again.status, again.code], [412, "precondition_failed"]);
    assert.equal((await client.getUserDocument(agentId, "gus"))!.content, "first");
    await client.putUserDocument(agentId, "gus", { content: "third" }, { ifMatch: "*" });
    assert.equal((await client.getUserDocument(agentId, "gus"))!.content, "third");
  });

  test("a read with If-None-Match answers notModified while the version is the same", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const written = await client.putUserDocument(agentId, "hana", { content: "likes quiet cafés" });
    assert.deepEqual(await client.getUserDocument(agentId, "hana", { ifNoneMatch: written.etag }), {
      notModified: true,
      etag: written.etag,
    });
    assert.deepEqual(await client.getUserDocument(agentId, "hana", { ifNoneMatch: `"${written.etag}"` }), {
      notModified: true,
      etag: written.etag,
    });
    const changed = await client.putUserDocument(agentId, "hana", { content: "likes quiet cafés and jazz" });
    const fresh = await client.getUserDocument(agentId, "hana", { ifNoneMatch: written.etag });
    assert.deepEqual(fresh, changed, "a changed document is answered whole");
  });

  test("over 32 768 characters is payload_too_large and changes nothing", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    // The cap counts characters, as the spec's maxLength does: two-byte ones too.
    const full = "é".repeat(32 * 1024);
    await client.putUserDocument(agentId, "ines", { content: full });
    const error = await failure(client.putUserDocument(agentId, "ines", { content: "a".repeat(32 * 1024 + 1) }));
    assert.deepEqual([error.status, error.code], [413, "payload_too_large"]);
    assert.equal((await client.getUserDocument(agentId, "ines"))!.content, full);
  });

  test("memory context shows it with working_memory=true; export holds it; erasure removes it", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    await client.rememberFact(agentId, "jonas", { fact: "Collects old maps" });
    const user = await client.putUserDocument(agentId, "jonas", { content: "## Jonas\n- wants a map of Lisbon" });
    const conversation = await client.createConversation({ agent_id: agentId, external_ref: "jonas" });
    const thread = await client.putConversationDocument(conversation.id, { content: "compare two sellers" });

    const without = await client.memoryContext(agentId, "jonas");
    assert.doesNotMatch(without.prompt, /working-memory/);
    const context = await client.memoryContext(agentId, "jonas", { working_memory: true });
    assert.equal(context.working_memory?.content, user.content);
    assert.match(context.prompt, /<user-memory>[\s\S]*Collects old maps[\s\S]*<working-memory>[\s\S]*wants a map of Lisbon/);

    const exported = await client.exportUser("jonas");
    assert.deepEqual(
      exported.working_memories.map((w) => [w.agent_id, w.content, w.etag]),
      [[agentId, user.content, user.etag]],
    );
    assert.equal(exported.conversations[0]!.working_memory?.content, thread.content);

    const erasure = await client.eraseUser("jonas");
    assert.equal(erasure.deleted.working_memories, 2, "the person's document and their conversation's");
    assert.equal(await client.getUserDocument(agentId, "jonas"), null);
    assert.equal(await client.getConversationDocument(conversation.id), null);
    assert.deepEqual((await client.exportUser("jonas")).working_memories, []);
  });
});
