import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, test } from "node:test";
import { EngramClient, EngramError, retryDelay } from "../src/index.js";
import { closedAddress, ENGRAM_LIMITED_URL, ENGRAM_URL, failure, memoryAgent, mintToken, newTenant } from "./helpers.js";

const spec = JSON.parse(readFileSync(new URL("../../../../openapi/openapi.json", import.meta.url), "utf8"));
const camel = (id: string) => id.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

test("every operation of the spec has a client method", () => {
  const missing: string[] = [];
  let count = 0;
  for (const [path, item] of Object.entries<Record<string, { operationId?: string }>>(spec.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      if (!["get", "put", "post", "patch", "delete"].includes(method)) continue;
      count++;
      const name = camel(operation.operationId ?? `${method} ${path}`);
      if (typeof (EngramClient.prototype as unknown as Record<string, unknown>)[name] !== "function") {
        missing.push(`${method.toUpperCase()} ${path} (${name})`);
      }
    }
  }
  assert.ok(count > 30, `only ${count} operations read from the spec`);
  assert.deepEqual(missing, [], "operations without a client method");
});

describe("typed client against a live Engram", () => {
  test("conversation, idempotent appends and pagination", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const created = [];
    for (let i = 0; i < 5; i++) {
      created.push(await client.createConversation({ agent_id: agentId, external_ref: "alice", title: `t${i}` }));
    }
    const seen = [];
    for await (const conversation of client.conversations({ agent_id: agentId, limit: 2 })) seen.push(conversation.id);
    assert.deepEqual(seen.sort(), created.map((c) => c.id).sort(), "the iterator follows every cursor");

    const id = created[0]!.id;
    const body = { messages: [{ role: "user" as const, content: "I like green tea." }] };
    const first = await client.appendMessages(id, body, { idempotencyKey: "k-1" });
    const again = await client.appendMessages(id, body, { idempotencyKey: "k-1" });
    assert.equal(again.messages[0]!.id, first.messages[0]!.id, "a replayed key returns the first result");
    const conflict = await failure(
      client.appendMessages(id, { messages: [{ role: "user", content: "other" }] }, { idempotencyKey: "k-1" }),
    );
    assert.equal(conflict.status, 409);
    assert.equal(conflict.code, "conflict");
    assert.ok(conflict.requestId, "the error carries the request id");
    await client.appendMessages(id, { messages: [{ role: "assistant", content: "Noted." }] });
    const all = [];
    for await (const message of client.messages(id, { limit: 1 })) all.push(message.content);
    assert.deepEqual(all, ["I like green tea.", "Noted."]);
  });

  test("facts, search and memory context", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    await client.rememberFact(agentId, "bob", { fact: "Prefers tea over coffee", tags: ["drinks"] });
    await client.rememberFact(agentId, "bob", { fact: "Lives in Lyon" });
    const found = await client.searchFacts(agentId, "bob", { q: "tea" });
    assert.equal(found.items[0]?.fact, "Prefers tea over coffee");
    const context = await client.memoryContext(agentId, "bob", { query: "coffee" });
    assert.equal(context.enabled, true);
    assert.match(context.prompt, /<user-memory>[\s\S]*Prefers tea over coffee/);
    const facts = [];
    for await (const fact of client.facts(agentId, "bob", { limit: 1 })) facts.push(fact.fact);
    assert.equal(facts.length, 2);
    assert.match(await client.metrics(), /# TYPE/);
  });
});

describe("errors reach the caller as the API's code", () => {
  test("400 invalid_request", async () => {
    const { client } = newTenant();
    const error = await failure(client.putConfig("not a valid id!", { memory_enabled: true }));
    assert.equal(error.status, 400);
    assert.equal(error.code, "invalid_request");
  });

  test("401 unauthorized, not retried", async () => {
    let requests = 0;
    const client = new EngramClient({
      baseUrl: ENGRAM_URL,
      token: () => {
        requests++;
        return "not-a-token";
      },
    });
    const error = await failure(client.listConversations());
    assert.equal(error.status, 401);
    assert.equal(error.code, "unauthorized");
    assert.equal(requests, 1);
  });

  test("404 not_found", async () => {
    const { client } = newTenant();
    const error = await failure(client.getConversation("0193a1b2-0000-7000-8000-000000000000"));
    assert.equal(error.status, 404);
    assert.equal(error.code, "not_found");
  });

  test("413 payload_too_large", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    const conversation = await client.createConversation({ agent_id: agentId, external_ref: "carol" });
    const error = await failure(
      client.appendMessages(conversation.id, { messages: [{ role: "user", content: "x".repeat(70 * 1024) }] }),
    );
    assert.equal(error.status, 413);
    assert.equal(error.code, "payload_too_large");
  });

  test("403 forbidden for a user-bound token outside its binding", async () => {
    const { tenant } = newTenant();
    const token = mintToken({ tenant, scope: "memory:read", agent_id: "a1", external_ref: "u1" });
    const client = new EngramClient({ baseUrl: ENGRAM_URL, token });
    const error = await failure(client.listFacts("a1", "someone-else"));
    assert.equal(error.code, "forbidden");
  });

  test("429 rate_limited with Retry-After; the retrying client waits and succeeds", async () => {
    const { token } = newTenant();
    const impatient = new EngramClient({ baseUrl: ENGRAM_LIMITED_URL, token, maxRetries: 0 });
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => impatient.listConversations({ limit: 1 })));
    const limited = results
      .filter((r): r is PromiseRejectedResult => r.status === "rejected")
      .map((r) => r.reason as EngramError);
    assert.ok(limited.length >= 5, "10 requests at once go over a burst of 4");
    for (const error of limited) {
      assert.equal(error.code, "rate_limited");
      assert.equal(error.status, 429);
      assert.ok(error.retryAfter !== undefined && error.retryAfter > 0, "Retry-After is carried");
    }
    const patient = new EngramClient({ baseUrl: ENGRAM_LIMITED_URL, token, maxRetries: 5 });
    const pages = await Promise.all(Array.from({ length: 3 }, () => patient.listConversations({ limit: 1 })));
    assert.deepEqual(
      pages.map((page) => page.items),
      [[], [], []],
      "the retrying client waits Retry-After until every call goes through",
    );
  });
});

/**
 * Runs `use` with a local server that answers 503 with `Retry-After` `failures` times, then
 * 200, and a client pointed at it; closes the server after.
 */
async function withFlakyServer(
  failures: number,
  retryAfter: string,
  options: { maxRetries?: number; deadlineMs?: number },
  use: (client: EngramClient, hits: { at: number; key: string | undefined }[]) => Promise<void>,
) {
  const hits: { at: number; key: string | undefined }[] = [];
  const server = createServer((request, response) => {
    hits.push({ at: Date.now(), key: request.headers["idempotency-key"] as string | undefined });
    if (hits.length <= failures) {
      response.writeHead(503, { "content-type": "application/json", "retry-after": retryAfter, "x-request-id": "r-1" });
      response.end(JSON.stringify({ error: { code: "unavailable", message: "database down", request_id: "r-1" } }));
    } else {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ items: [], next_cursor: null }));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    await use(new EngramClient({ baseUrl, token: "t", ...options }), hits);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

describe("503 unavailable", () => {
  test("a read waits Retry-After and retries", () =>
    withFlakyServer(1, "1", {}, async (client, hits) => {
      await client.listConversations();
      assert.equal(hits.length, 2);
      assert.ok(hits[1]!.at - hits[0]!.at >= 950, "the retry waited the second Retry-After asked");
    }));

  test("an append retries with the same Idempotency-Key", () =>
    withFlakyServer(1, "1", {}, async (client, hits) => {
      await client.appendMessages("0193a1b2-0000-7000-8000-000000000000", {
        messages: [{ role: "user", content: "hi" }],
      });
      assert.equal(hits.length, 2);
      assert.ok(hits[0]!.key, "an append carries an Idempotency-Key by default");
      assert.equal(hits[1]!.key, hits[0]!.key);
    }));

  test("a create without a key is not repeated, and the error says unavailable", () =>
    withFlakyServer(5, "1", {}, async (client, hits) => {
      const error = await failure(client.createConversation({ agent_id: "a", external_ref: "u" }));
      assert.deepEqual([error.status, error.code, error.retryAfter, error.requestId], [503, "unavailable", 1, "r-1"]);
      assert.equal(hits.length, 1);
    }));

  test("no retry storm: retries stop at maxRetries", () =>
    withFlakyServer(100, "0", { maxRetries: 3 }, async (client, hits) => {
      assert.equal((await failure(client.listJobs())).code, "unavailable");
      assert.equal(hits.length, 4);
    }));

  test("a Retry-After longer than maxRetryDelayMs is not waited", () =>
    withFlakyServer(100, "3600", {}, async (client, hits) => {
      const started = Date.now();
      assert.equal((await failure(client.listJobs())).retryAfter, 3600);
      assert.ok(Date.now() - started < 1000);
      assert.equal(hits.length, 1);
    }));
});

describe("retries spread out and failures say why", () => {
  test("a retry never comes before Retry-After, and full jitter spreads clients refused together", () => {
    assert.equal(retryDelay(1, 0, 30_000, () => 0), 1000, "not before the server's second");
    assert.equal(retryDelay(1, 0, 30_000, () => 0.5), 1500, "jitter over one more such period");
    assert.equal(retryDelay(undefined, 3, 30_000, () => 0.5), 1000, "full jitter over 250 ms · 2^3");
    assert.equal(retryDelay(3600, 0, 30_000), undefined, "a Retry-After over the cap is not waited");
    const waits = Array.from({ length: 200 }, () => retryDelay(1, 0, 30_000)!);
    assert.ok(new Set(waits).size > 190, "two hundred clients refused together come back at different times");
    assert.ok(waits.every((wait) => wait >= 1000 && wait <= 2000));
  });

  test("a network failure names its cause, not fetch's 'fetch failed'", async () => {
    const baseUrl = await closedAddress();
    const error = await failure(new EngramClient({ baseUrl, token: "t", maxRetries: 0 }).healthz());
    assert.equal(error.code, "network");
    assert.match(error.message, /ECONNREFUSED/);
    assert.ok(error.message.includes(baseUrl), error.message);
  });

  test("deadlineMs bounds a call and its retries", () =>
    withFlakyServer(100, "0", { maxRetries: 1000, deadlineMs: 300 }, async (client, hits) => {
      // The last 503, or the attempt the deadline cut short when it fell during one.
      assert.ok(["unavailable", "timeout"].includes((await failure(client.listJobs())).code));
      assert.ok(hits.length < 1000, "the deadline stopped the retries before maxRetries did");
    }));
});

describe("jobs and the event feed", () => {
  test("waitForJob follows an extraction; followEvents yields what happens next", async () => {
    const { client } = newTenant();
    const agentId = await memoryAgent(client);
    await client.putConfig(agentId, { memory_enabled: true, min_user_turns: 1, extract_every_user_turns: null });
    const conversation = await client.createConversation({ agent_id: agentId, external_ref: "alice" });
    await client.appendMessages(conversation.id, { messages: [{ role: "user", content: "I live in Lyon." }] });
    const ended = await client.handle(conversation.id).end();
    const job = await client.waitForJob(ended.extraction.job_id!, { timeoutMs: 30_000 });
    assert.equal(job.status, "succeeded");

    const feed = client.followEvents({ types: "fact.added" });
    const facts: string[] = [];
    for await (const event of feed) {
      facts.push((event.data as { fact: { fact: string } }).fact.fact);
      if (facts.length === 1) await client.rememberFact(agentId, "alice", { fact: "Plays the cello" });
      if (facts.length === 2) break;
    }
    assert.match(facts[0]!, /Lyon/, "the extracted fact");
    assert.equal(facts[1], "Plays the cello", "then the one added while following");
  });
});
