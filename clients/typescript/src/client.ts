import type { components, operations } from "./generated/openapi.js";
import { EngramError } from "./errors.js";
import { type Call, type EngramOptions, type QueryValue, Transport } from "./transport.js";

export type Schemas = components["schemas"];
export type OperationId = keyof operations;

type Camel<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<Camel<Tail>>}` : S;

/** One method per operation of the spec, named after its `operationId` in camelCase. */
export type OperationMethods = { [K in OperationId as Camel<K>]: (...args: never[]) => Promise<unknown> };

type Json<R> = R extends { content: { "application/json": infer T } }
  ? T
  : R extends { content: { "text/plain": infer T } }
    ? T
    : undefined;
type Responses<K extends OperationId> = operations[K]["responses"];
/** What operation `K` answers on success. */
export type Result<K extends OperationId> = Json<Responses<K>[Extract<keyof Responses<K>, 200 | 201 | 204>]>;
/** The JSON body operation `K` takes. */
export type Body<K extends OperationId> = operations[K] extends {
  requestBody: { content: { "application/json": infer B } };
}
  ? B
  : never;
/** The query parameters of operation `K`. */
export type Query<K extends OperationId> = operations[K]["parameters"] extends { query?: infer Q } ? NonNullable<Q> : never;

/** A page of a list: `items` and the cursor of the next page (null on the last). */
interface Page<T> {
  items: T[];
  next_cursor?: string | null;
}

/** Options of an append. */
export interface AppendOptions {
  /**
   * The `Idempotency-Key`. By default every append gets a fresh one, reused by its
   * retries, so a retried append is stored once. `false` sends none.
   */
  idempotencyKey?: string | false;
}

/** Options of a single call. */
export interface CallOptions {
  /** Longest this call may take in all, retries included, in milliseconds (the client's `deadlineMs` otherwise). */
  deadlineMs?: number;
}

/** Options of `waitForJob`. */
export interface WaitOptions {
  /** Longest wait, in milliseconds (default 60 000): then an `EngramError` with code `timeout`. */
  timeoutMs?: number;
  /** Pause between two reads of the job, in milliseconds (default 200). */
  intervalMs?: number;
}

/** An Engram conversation an adapter stores turns in, and a way to end it. */
export interface ConversationHandle {
  id: string;
  /** Ends the conversation: Engram queues the extraction of its facts (`waitForJob` follows it). */
  end(): Promise<Schemas["Ended"]>;
}

/** Job statuses after which nothing more happens to a job (`failed` is retried later). */
const SETTLED = new Set(["succeeded", "dead", "cancelled"]);

/** A working memory document: `content`, its version `etag` (unquoted) and `updated_at`. */
export type WorkingMemory = Schemas["WorkingMemory"];

/** What a read with `ifNoneMatch` answers when the stored version is the one named (a 304). */
export interface NotModified {
  notModified: true;
  /** The stored version (unquoted), as the 304's `ETag` says. */
  etag: string;
}

/** Conditions of a working memory read. */
export interface ReadConditions {
  /**
   * An etag you hold (or `*`): when the stored version is that one, the read answers
   * `{ notModified: true, etag }` instead of the document (the server's 304, no body).
   */
  ifNoneMatch?: string;
}

/** Conditions of a working memory write or delete. */
export interface WriteConditions {
  /**
   * The etag you read (as the document's `etag` gives it, quoted or not; several in an
   * array; or `*` for "whatever is stored"): the write happens only if the stored version
   * is still that one, else the call throws `EngramError` with code `precondition_failed`
   * (412, never retried) and nothing changes. (A write retried after a timeout or a lost
   * connection may find its own first attempt stored, and answer `precondition_failed`:
   * reread before writing again.)
   */
  ifMatch?: string | readonly string[];
  /** `*` on a write: create only, `precondition_failed` when a document exists. */
  ifNoneMatch?: "*";
}

const seg = encodeURIComponent;

/** An entity tag as a header wants it: quoted, unless it is `*` or already quoted. */
function quoteTag(tag: string): string {
  const trimmed = tag.trim();
  return trimmed === "*" || trimmed.startsWith('"') || trimmed.startsWith('W/"') ? trimmed : `"${trimmed}"`;
}

function conditionHeaders(conditions: { ifMatch?: string | readonly string[]; ifNoneMatch?: string }): Record<string, string> {
  const headers: Record<string, string> = {};
  const { ifMatch, ifNoneMatch } = conditions;
  if (ifMatch !== undefined) headers["If-Match"] = (typeof ifMatch === "string" ? [ifMatch] : ifMatch).map(quoteTag).join(", ");
  if (ifNoneMatch !== undefined) headers["If-None-Match"] = quoteTag(ifNoneMatch);
  return headers;
}

function unquoteTag(tag: string | null): string {
  return (tag ?? "").replace(/^W\//, "").replace(/^"(.*)"$/, "$1");
}

/**
 * A typed client for every route of Engram's API. Errors are thrown as `EngramError`;
 * 429 and 503 are retried as `EngramOptions` says. Lists have an async iterator too
 * (`conversations()`, `messages()`, `facts()`, `jobs()`, `configs()`) that follows the
 * cursors.
 */
export class EngramClient implements OperationMethods {
  readonly transport: Transport;
  private readonly options: EngramOptions;

  constructor(options: EngramOptions) {
    this.options = options;
    this.transport = new Transport(options);
  }

  /** A client like this one with some options changed (an adapter's reader with a short deadline). */
  withOptions(changes: Partial<EngramOptions>): EngramClient {
    return new EngramClient({ ...this.options, ...changes });
  }

  private call<K extends OperationId>(call: Call): Promise<Result<K>> {
    return this.transport.send<Result<K>>(call);
  }

  private get<K extends OperationId>(path: string, query?: object): Promise<Result<K>> {
    return this.call<K>({ method: "GET", path, query: query as Record<string, QueryValue> | undefined });
  }

  // Operations and health
  healthz() {
    return this.get<"healthz">("/healthz");
  }
  readyz() {
    return this.get<"readyz">("/readyz");
  }
  metrics() {
    return this.get<"metrics">("/metrics") as Promise<string>;
  }

  // Agent configuration
  listConfigs(query?: Query<"list_configs">) {
    return this.get<"list_configs">("/api/agents-config", query);
  }
  getConfig(agentId: string) {
    return this.get<"get_config">(`/api/agents-config/${seg(agentId)}`);
  }
  putConfig(agentId: string, body: Body<"put_config">) {
    return this.call<"put_config">({ method: "PUT", path: `/api/agents-config/${seg(agentId)}`, body });
  }
  deleteConfig(agentId: string) {
    return this.call<"delete_config">({ method: "DELETE", path: `/api/agents-config/${seg(agentId)}` });
  }

  // Consent
  getConsent(externalRef: string) {
    return this.get<"get_consent">(`/api/users/${seg(externalRef)}/consent`);
  }
  putConsent(externalRef: string, body: Body<"put_consent">) {
    return this.call<"put_consent">({ method: "PUT", path: `/api/users/${seg(externalRef)}/consent`, body });
  }

  // Conversations
  listConversations(query?: Query<"list_conversations">, options: CallOptions = {}) {
    const q = query as Record<string, QueryValue> | undefined;
    return this.call<"list_conversations">({ method: "GET", path: "/api/conversations", query: q, ...options });
  }
  createConversation(body: Body<"create_conversation">, options: CallOptions = {}) {
    return this.call<"create_conversation">({ method: "POST", path: "/api/conversations", body, ...options });
  }
  getConversation(id: string) {
    return this.get<"get_conversation">(`/api/conversations/${seg(id)}`);
  }
  updateConversation(id: string, body: Body<"update_conversation">) {
    return this.call<"update_conversation">({ method: "PATCH", path: `/api/conversations/${seg(id)}`, body });
  }
  deleteConversation(id: string) {
    return this.call<"delete_conversation">({ method: "DELETE", path: `/api/conversations/${seg(id)}` });
  }
  endConversation(id: string) {
    return this.call<"end_conversation">({ method: "POST", path: `/api/conversations/${seg(id)}/end` });
  }
  /** Conversation `id` as a handle: its id and `end()`. */
  handle(id: string): ConversationHandle {
    return { id, end: () => this.endConversation(id) };
  }
  getContext(id: string, query?: Query<"get_context">) {
    return this.get<"get_context">(`/api/conversations/${seg(id)}/context`, query);
  }
  validateHistory(id: string, body: Body<"validate_history">) {
    return this.call<"validate_history">({ method: "POST", path: `/api/conversations/${seg(id)}/validate`, body });
  }

  // Messages
  listMessages(id: string, query?: Query<"list_messages">) {
    return this.get<"list_messages">(`/api/conversations/${seg(id)}/messages`, query);
  }
  appendMessages(id: string, body: Body<"append_messages">, options: AppendOptions = {}) {
    const key = options.idempotencyKey ?? crypto.randomUUID();
    return this.call<"append_messages">({
      method: "POST",
      path: `/api/conversations/${seg(id)}/messages`,
      body,
      headers: key === false ? {} : { "Idempotency-Key": key },
    });
  }
  clearMessages(id: string) {
    return this.call<"clear_messages">({ method: "DELETE", path: `/api/conversations/${seg(id)}/messages` });
  }

  // Facts and memory context
  private userPath(agentId: string, externalRef: string, rest: string): string {
    return `/api/agents/${seg(agentId)}/users/${seg(externalRef)}${rest}`;
  }
  listFacts(agentId: string, externalRef: string, query?: Query<"list_facts">) {
    return this.get<"list_facts">(this.userPath(agentId, externalRef, "/facts"), query);
  }
  rememberFact(agentId: string, externalRef: string, body: Body<"remember_fact">) {
    return this.call<"remember_fact">({ method: "POST", path: this.userPath(agentId, externalRef, "/facts"), body });
  }
  searchFacts(agentId: string, externalRef: string, query: Query<"search_facts">) {
    return this.get<"search_facts">(this.userPath(agentId, externalRef, "/facts/search"), query);
  }
  updateFact(agentId: string, externalRef: string, factId: string, body: Body<"update_fact">) {
    const path = this.userPath(agentId, externalRef, `/facts/${seg(factId)}`);
    return this.call<"update_fact">({ method: "PATCH", path, body });
  }
  deleteFact(agentId: string, externalRef: string, factId: string) {
    const path = this.userPath(agentId, externalRef, `/facts/${seg(factId)}`);
    return this.call<"delete_fact">({ method: "DELETE", path });
  }
  deleteFacts(agentId: string, externalRef: string) {
    return this.call<"delete_facts">({ method: "DELETE", path: this.userPath(agentId, externalRef, "/facts") });
  }
  /**
   * Memory context; `{ working_memory: true }` adds the user's working memory document.
   * `options.deadlineMs` bounds this read alone, so a slow Engram cannot hold a model call back.
   */
  memoryContext(agentId: string, externalRef: string, query?: Query<"memory_context">, options: CallOptions = {}) {
    const path = this.userPath(agentId, externalRef, "/memory-context");
    const q = query as Record<string, QueryValue> | undefined;
    return this.call<"memory_context">({ method: "GET", path, query: q, ...options });
  }

  // Working memory: the agent's own document about a user, and one per conversation

  /** The agent's working memory about the user, or null before the first write. */
  getUserDocument(agentId: string, externalRef: string): Promise<WorkingMemory | null>;
  getUserDocument(
    agentId: string,
    externalRef: string,
    conditions: ReadConditions,
  ): Promise<WorkingMemory | NotModified | null>;
  getUserDocument(agentId: string, externalRef: string, conditions: ReadConditions = {}) {
    return this.readDocument(this.userPath(agentId, externalRef, "/working-memory"), conditions);
  }
  /** Replaces (or creates) the user document; `conditions` guard against a concurrent writer. */
  putUserDocument(
    agentId: string,
    externalRef: string,
    body: Body<"put_user_document">,
    conditions: WriteConditions = {},
  ): Promise<WorkingMemory> {
    return this.writeDocument(this.userPath(agentId, externalRef, "/working-memory"), body, conditions);
  }
  /** Deletes the user document (`not_found` when there is none). */
  deleteUserDocument(agentId: string, externalRef: string, conditions: Pick<WriteConditions, "ifMatch"> = {}) {
    const path = this.userPath(agentId, externalRef, "/working-memory");
    return this.call<"delete_user_document">({ method: "DELETE", path, headers: conditionHeaders(conditions) });
  }
  /**
   * The conversation's working memory, or null when it has none — or when there is no
   * such conversation (the server answers both with `not_found`).
   */
  getConversationDocument(id: string): Promise<WorkingMemory | null>;
  getConversationDocument(id: string, conditions: ReadConditions): Promise<WorkingMemory | NotModified | null>;
  getConversationDocument(id: string, conditions: ReadConditions = {}) {
    return this.readDocument(`/api/conversations/${seg(id)}/working-memory`, conditions);
  }
  /** Replaces (or creates) the conversation's document; as `putUserDocument`. */
  putConversationDocument(
    id: string,
    body: Body<"put_conversation_document">,
    conditions: WriteConditions = {},
  ): Promise<WorkingMemory> {
    return this.writeDocument(`/api/conversations/${seg(id)}/working-memory`, body, conditions);
  }
  /** Deletes the conversation's document (`not_found` when there is none). */
  deleteConversationDocument(id: string, conditions: Pick<WriteConditions, "ifMatch"> = {}) {
    const path = `/api/conversations/${seg(id)}/working-memory`;
    return this.call<"delete_conversation_document">({ method: "DELETE", path, headers: conditionHeaders(conditions) });
  }

  private async readDocument(path: string, conditions: ReadConditions): Promise<WorkingMemory | NotModified | null> {
    const answer = await this.transport.exchange<WorkingMemory | undefined>({
      method: "GET",
      path,
      headers: conditionHeaders(conditions),
      answers: [304, 404],
    });
    if (answer.status === 404) return null;
    if (answer.status === 304) return { notModified: true, etag: unquoteTag(answer.headers.get("etag")) };
    return answer.body!;
  }

  private writeDocument(path: string, body: { content: string }, conditions: WriteConditions): Promise<WorkingMemory> {
    return this.transport.send<WorkingMemory>({ method: "PUT", path, body, headers: conditionHeaders(conditions) });
  }

  // Jobs
  listJobs(query?: Query<"list_jobs">) {
    return this.get<"list_jobs">("/api/jobs", query);
  }
  getJob(id: string) {
    return this.get<"get_job">(`/api/jobs/${seg(id)}`);
  }
  retryJob(id: string) {
    return this.call<"retry_job">({ method: "POST", path: `/api/jobs/${seg(id)}/retry` });
  }
  /** Tokens per agent over the last `days` UTC days (default 7), and the tenant's daily budget. */
  getUsage(query?: Query<"get_usage">) {
    return this.get<"get_usage">("/api/usage", query);
  }
  /** Reads job `id` until it has settled (`succeeded`, `dead` or `cancelled`), and answers it. */
  async waitForJob(id: string, options: WaitOptions = {}): Promise<Schemas["Job"]> {
    const timeoutMs = options.timeoutMs ?? 60_000;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const job = await this.getJob(id);
      if (SETTLED.has(job.status)) return job;
      const left = deadline - Date.now();
      if (left <= 0) {
        const message = `job ${id} is still ${job.status} after ${timeoutMs} ms`;
        throw new EngramError(0, "timeout", message, undefined, undefined);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(options.intervalMs ?? 200, left)));
    }
  }

  // Import (NDJSON, one record a line: the format of `engram export`)
  /** Imports the records and answers the finished import with its counts and bad-line reports. */
  importRecords(ndjson: string) {
    const raw = { text: ndjson, contentType: "application/x-ndjson" };
    return this.call<"import_records">({ method: "POST", path: "/api/import", raw });
  }
  listImports() {
    return this.get<"list_imports">("/api/import");
  }
  getImport(id: string) {
    return this.get<"get_import">(`/api/import/${seg(id)}`);
  }
  /** An import's bad-line reports, every one of them, a page at a time. */
  listImportErrors(id: string, query?: Query<"list_import_errors">) {
    return this.get<"list_import_errors">(`/api/import/${seg(id)}/errors`, query);
  }

  // Events, fact history and webhooks
  /** The tenant's change feed after `after`; `wait` long-polls for the next event. */
  listEvents(query?: Query<"list_events">) {
    return this.get<"list_events">("/api/events", query);
  }
  /**
   * The change feed from `after` on, as an endless iterator: each page long-polls (`wait`)
   * for what comes next. Leave it with `break`.
   */
  async *followEvents(query: Omit<Query<"list_events">, "wait"> = {}): AsyncGenerator<Schemas["Event"]> {
    let after = query.after;
    for (;;) {
      const page = await this.listEvents({ ...query, after, wait: 20 });
      yield* page.items;
      after = page.next_cursor;
    }
  }
  /** One person's events as this agent's memory of them changed (user-bound tokens). */
  listPersonEvents(agentId: string, externalRef: string, query?: Query<"list_person_events">) {
    return this.get<"list_person_events">(this.userPath(agentId, externalRef, "/events"), query);
  }
  /** Every version of a fact, oldest first, with who changed it. */
  factHistory(agentId: string, externalRef: string, factId: string) {
    return this.get<"fact_history">(this.userPath(agentId, externalRef, `/facts/${seg(factId)}/history`));
  }
  listSubscriptions() {
    return this.get<"list_subscriptions">("/api/webhooks");
  }
  /** Subscribes a receiver; the answer's `secret` is shown only here. */
  createSubscription(body: Body<"create_subscription">) {
    return this.call<"create_subscription">({ method: "POST", path: "/api/webhooks", body });
  }
  getSubscription(id: string) {
    return this.get<"get_subscription">(`/api/webhooks/${seg(id)}`);
  }
  updateSubscription(id: string, body: Body<"update_subscription">) {
    return this.call<"update_subscription">({ method: "PATCH", path: `/api/webhooks/${seg(id)}`, body });
  }
  deleteSubscription(id: string) {
    return this.call<"delete_subscription">({ method: "DELETE", path: `/api/webhooks/${seg(id)}` });
  }
  rotateSecret(id: string) {
    return this.call<"rotate_secret">({ method: "POST", path: `/api/webhooks/${seg(id)}/rotate-secret` });
  }
  listDeliveries(id: string, query?: Query<"list_deliveries">) {
    return this.get<"list_deliveries">(`/api/webhooks/${seg(id)}/deliveries`, query);
  }
  getDelivery(id: string, eventId: number) {
    return this.get<"get_delivery">(`/api/webhooks/${seg(id)}/deliveries/${eventId}`);
  }
  redeliver(id: string, eventId: number) {
    return this.call<"redeliver">({ method: "POST", path: `/api/webhooks/${seg(id)}/deliveries/${eventId}/retry` });
  }

  // GDPR
  exportUser(externalRef: string) {
    return this.get<"export_user">(`/api/rgpd/users/${seg(externalRef)}/ai-data`);
  }
  eraseUser(externalRef: string) {
    return this.call<"erase_user">({ method: "DELETE", path: `/api/rgpd/users/${seg(externalRef)}/ai-data` });
  }
  getReceipt(receiptId: string) {
    return this.get<"get_receipt">(`/api/rgpd/receipts/${seg(receiptId)}`);
  }

  // Tools
  listTools(query: Query<"list_tools">) {
    return this.get<"list_tools">("/api/tools", query);
  }
  callTool(body: Body<"call_tool">) {
    return this.call<"call_tool">({ method: "POST", path: "/api/tools/call", body });
  }

  // Lists as async iterators, following `next_cursor`
  conversations(query: Omit<Query<"list_conversations">, "cursor"> = {}) {
    return paginate((cursor) => this.listConversations({ ...query, cursor }));
  }
  messages(id: string, query: Omit<Query<"list_messages">, "cursor" | "last"> = {}) {
    return paginate((cursor) => this.listMessages(id, { ...query, cursor }));
  }
  facts(agentId: string, externalRef: string, query: Omit<Query<"list_facts">, "cursor"> = {}) {
    return paginate((cursor) => this.listFacts(agentId, externalRef, { ...query, cursor }));
  }
  jobs(query: Omit<Query<"list_jobs">, "cursor"> = {}) {
    return paginate((cursor) => this.listJobs({ ...query, cursor }));
  }
  configs(query: Omit<Query<"list_configs">, "cursor"> = {}) {
    return paginate((cursor) => this.listConfigs({ ...query, cursor }));
  }
}

/** Every item of a keyset-paginated list, fetching the next page only when needed. */
export async function* paginate<T>(page: (cursor: string | undefined) => Promise<Page<T>>): AsyncGenerator<T> {
  let cursor: string | undefined;
  do {
    const current = await page(cursor);
    yield* current.items;
    cursor = current.next_cursor ?? undefined;
  } while (cursor !== undefined);
}
