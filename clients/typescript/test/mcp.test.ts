// The MCP example: the official SDK's Streamable HTTP client on Engram's /mcp, with a
// token bound to one agent and one user (the token to hand to a model).
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ENGRAM_URL, memoryAgent, mintToken, newTenant } from "./helpers.js";

test("an MCP client remembers and recalls through /mcp with a user-bound token", async () => {
  const { tenant, client: admin } = newTenant();
  const agentId = await memoryAgent(admin);
  const token = mintToken({ tenant, scope: "memory:read memory:write", agent_id: agentId, external_ref: "alice" });

  const transport = new StreamableHTTPClientTransport(new URL(`${ENGRAM_URL}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const mcp = new Client({ name: "engram-example", version: "1.0.0" });
  await mcp.connect(transport);
  const { tools } = await mcp.listTools();
  await mcp.callTool({ name: "remember", arguments: { fact: "Prefers tea over coffee" } });
  const recalled = await mcp.callTool({ name: "recall", arguments: { query: "tea" } });
  await mcp.close();

  assert.ok(tools.some((tool) => tool.name === "recall"));
  assert.notEqual(recalled.isError, true);
  assert.match(JSON.stringify(recalled.content), /Prefers tea over coffee/);
  const facts = await admin.listFacts(agentId, "alice");
  assert.deepEqual(
    facts.items.map((f) => f.fact),
    ["Prefers tea over coffee"],
  );
});

test("a bound token cannot reach another user's memory over MCP", async () => {
  const { tenant, client: admin } = newTenant();
  const agentId = await memoryAgent(admin);
  const token = mintToken({ tenant, scope: "memory:read memory:write", agent_id: agentId, external_ref: "alice" });
  const mcp = new Client({ name: "engram-example", version: "1.0.0" });
  await mcp.connect(
    new StreamableHTTPClientTransport(new URL(`${ENGRAM_URL}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  const refused = await mcp.callTool({
    name: "remember",
    arguments: { fact: "x", agent_id: agentId, external_ref: "bob" },
  });
  await mcp.close();
  assert.equal(refused.isError, true);
  assert.match(JSON.stringify(refused), /forbidden|invalid_request/);
  assert.deepEqual((await admin.listFacts(agentId, "bob")).items, []);
});
