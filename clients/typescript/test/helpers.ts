// What every test needs: the live Engram that scripts/test-clients started, and tokens for
// a tenant of the test's own, so that tests never see each other's data.
import assert from "node:assert/strict";
import { createHmac, randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { EngramClient, EngramError, type EngramOptions } from "../src/index.js";

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the tests through scripts/test-clients`);
  return value;
}

export const ENGRAM_URL = env("ENGRAM_URL");
/** A second server whose tenants may send 2 requests a second (burst 4), for the 429 tests. */
export const ENGRAM_LIMITED_URL = env("ENGRAM_LIMITED_URL");

const b64 = (value: string | Buffer) => Buffer.from(value).toString("base64url");

/** A token signed with the server's HS256 secret. */
export function mintToken(claims: Record<string, unknown>): string {
  const header = b64(JSON.stringify({ alg: "HS256", typ: "JWT" }));
  const body = b64(JSON.stringify({ exp: Math.floor(Date.now() / 1000) + 3600, ...claims }));
  const signature = createHmac("sha256", env("ENGRAM_JWT_SECRET")).update(`${header}.${body}`).digest();
  return `${header}.${body}.${b64(signature)}`;
}

/** A fresh tenant: its name, an admin client, and a way to mint more tokens for it. */
export function newTenant(options: Partial<EngramOptions> = {}) {
  const tenant = `ts-${randomUUID()}`;
  const token = mintToken({ tenant, scope: "admin rgpd" });
  const client = new EngramClient({ baseUrl: ENGRAM_URL, token, ...options });
  return { tenant, token, client };
}

/** An agent id that no other test uses, with memory switched on. */
export async function memoryAgent(client: EngramClient): Promise<string> {
  const agentId = `agent-${randomUUID()}`;
  await client.putConfig(agentId, { memory_enabled: true });
  return agentId;
}

/** The EngramError a call rejects with (and fails the test when it resolves). */
export async function failure(call: Promise<unknown>): Promise<EngramError> {
  try {
    await call;
  } catch (error) {
    assert.ok(error instanceof EngramError, `expected an EngramError, got ${error}`);
    return error;
  }
  assert.fail("the call succeeded");
}

/** The address of a port nothing listens on. */
export async function closedAddress(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

/** A server that accepts connections and reads requests but never answers, until `close()`. */
export async function hangingAddress(): Promise<{ baseUrl: string; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const hanging = createServer(() => {});
  hanging.on("connection", (socket) => sockets.add(socket));
  await new Promise<void>((resolve) => hanging.listen(0, "127.0.0.1", resolve));
  const close = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => hanging.close(resolve));
  };
  return { baseUrl: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`, close };
}
