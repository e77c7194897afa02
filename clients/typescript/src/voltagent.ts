/**
 * Engram as VoltAgent's storage: `new Memory({ storage: new EngramStorage({ client }) })`.
 *
 * Mapping: a VoltAgent conversation is an Engram conversation whose `key` is VoltAgent's
 * conversation id (the same charset as an agent id: `[A-Za-z0-9._:-]`, up to 128), its
 * `resourceId` (the agent's id) is Engram's `agent_id`, its `userId` Engram's
 * `external_ref`. A UIMessage is stored with its `parts` as the message's content and its
 * id and metadata under the message's `metadata.voltagent`, so it reads back unchanged.
 *
 * Working memory (`new Memory({ storage, workingMemory: { enabled: true, scope } })`) is
 * Engram's working memory document: scope `"user"` is the document of the adapter's
 * `agentId` about VoltAgent's `userId` (`…/agents/{agentId}/users/{userId}/working-memory`),
 * the same one memory context and Engram's MCP tools show; scope `"conversation"` is the
 * document of the Engram conversation VoltAgent's conversation id maps to (created, like
 * for an append, when the first write comes before any message).
 *
 * Concurrent writers: the adapter remembers, per document, the version (`ETag`) it last
 * read or wrote, and sends it as `If-Match` on the next write or delete. A writer that
 * changed the document since (another process, Engram's MCP tools, the admin panel) is
 * never silently overwritten: the write fails with `EngramError` code
 * `precondition_failed`, and the next read (VoltAgent reads before every turn) lets the
 * one after go through on top of it. A document read as absent is written with
 * `If-None-Match: *` (created only if still absent). A document this adapter has never
 * read is written unconditionally: VoltAgent's "replace" means "whatever is there", and a
 * create-only write would make every first replace after a restart fail. The versions are
 * per adapter instance, so calls that share one instance count as one writer.
 */
import {
  type AgentHookOnStart,
  type Conversation,
  ConversationAlreadyExistsError,
  type ConversationQueryOptions,
  type CreateConversationInput,
  type GetMessagesOptions,
  type StorageAdapter,
  type WorkflowStateEntry,
  type WorkingMemoryScope,
} from "@voltagent/core";
import type { UIMessage } from "ai";
import type { ConversationHandle, EngramClient, Schemas, WriteConditions } from "./client.js";
import { EngramError, type FailOpenOptions, isOutage, tolerant } from "./errors.js";

type EngramConversation = Schemas["Conversation"];
type EngramMessage = Schemas["Message"];
type Role = "system" | "user" | "assistant";

export interface EngramStorageOptions extends FailOpenOptions {
  client: EngramClient;
  /**
   * The agent id used when VoltAgent gives no `resourceId`, and the one conversations are
   * looked up under. Needed for user-scoped working memory, which Engram keeps per agent
   * and user.
   */
  agentId?: string;
}

interface WorkingMemoryParams {
  conversationId?: string;
  userId?: string;
  scope: WorkingMemoryScope;
}

/** Documents whose version is remembered; past this, the least recently used is forgotten. */
const MAX_VERSIONS = 10_000;
/** Failed history reads kept for the `onStart` hook; past this, the oldest is forgotten. */
const MAX_FAILED_READS = 1_000;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const WORKFLOW_STATE =
  "workflow state (VoltAgent workflows' suspend/resume records): Engram holds agent memory, not workflow runs; " +
  "give workflows a storage of their own";

/**
 * VoltAgent's `StorageAdapter`, backed by Engram's API. Errors are Engram's `EngramError`s.
 *
 * Before the model: VoltAgent reads a turn's history and, when it fails, logs the error
 * and calls the model anyway; it creates the conversation in the background. So pass the
 * adapter's `hooks` to the Agent (`new Agent({ ..., hooks: storage.hooks })`): its
 * `onStart`, which VoltAgent awaits just before the model call, finds or creates the
 * Engram conversation for the turn's `userId` and `conversationId`, and fails the call
 * there (no model call paid for) on a conversation id naming another person's conversation
 * (`conflict`), on a missing `userId`, and on an outage under `onEngramError: "throw"`.
 * Reads (history, conversation, working memory) get `memoryTimeoutMs` each; under
 * `"continue"` an outage reads as no memory, is reported to `onError`, and the turn is not
 * stored.
 */
export class EngramStorage implements StorageAdapter {
  private readonly client: EngramClient;
  /** The client for reads made before the model: `memoryTimeoutMs` in all, retries included. */
  private readonly reader: EngramClient;
  private readonly tolerate: ReturnType<typeof tolerant>;
  private readonly continues: boolean;
  /** Per `userId`/`conversationId`, the failure of the turn's history read, for `onStart`. */
  private readonly failedReads = new Map<string, unknown>();
  /** Hooks for the Agent: see the class doc. */
  readonly hooks: { onStart: AgentHookOnStart };
  private readonly agentId: string | undefined;
  /** VoltAgent's conversation id → Engram's conversation. */
  private readonly known = new Map<string, EngramConversation>();
  /** The append in flight per conversation, so that the next one waits for it. */
  private readonly appending = new Map<string, Promise<void>>();
  /**
   * Per working memory document, the version this adapter last read or wrote (null: read
   * as absent). Not there: never read, so a write is unconditional.
   */
  private readonly versions = new Map<string, string | null>();

  constructor(options: EngramStorageOptions) {
    this.client = options.client;
    this.reader = options.client.withOptions({ deadlineMs: options.memoryTimeoutMs ?? 2_000 });
    this.tolerate = tolerant(options);
    this.continues = options.onEngramError === "continue";
    this.agentId = options.agentId;
    this.hooks = { onStart: ({ context }) => this.prepare(context.userId, context.conversationId) };
  }

  /**
   * What the `onStart` hook does before the model call: the turn's conversation, found or
   * created for `userId`, or the error that fails the call (see the class doc).
   */
  async prepare(userId: string | undefined, conversationId: string | undefined): Promise<void> {
    if (!userId || !conversationId) {
      const message = "EngramStorage stores each turn under VoltAgent's userId and conversationId: pass both to the Agent's call";
      throw new EngramError(0, "invalid_request", message, undefined, undefined);
    }
    const key = `${userId}\u0000${conversationId}`;
    if (this.failedReads.has(key)) {
      const failure = this.failedReads.get(key);
      this.failedReads.delete(key);
      if (this.continues && isOutage(failure)) return; // reported by the read
      throw failure;
    }
    await this.tolerate(() => this.ensure(conversationId, userId, this.reader), undefined);
  }

  // Conversations

  /**
   * Creates the conversation under its key. Engram answers 409 when the key already names
   * a conversation with other fields. Two writers of one thread race to create it (VoltAgent
   * persists a turn's input and its answer apart, each creating the conversation it did not
   * find, one with a title and one, through `ensure`, without), and VoltAgent does not retry
   * a write that failed on "already exists": the message would be lost. So a conversation
   * of the same user under the key is the one created; another user's is VoltAgent's own
   * "already exists" error.
   */
  async createConversation(input: CreateConversationInput): Promise<Conversation> {
    let created: EngramConversation;
    try {
      created = await this.client.createConversation({
        agent_id: this.agentOf(input.resourceId),
        external_ref: input.userId,
        key: input.id,
        title: input.title,
        metadata: input.metadata,
      });
    } catch (error) {
      if (!(error instanceof EngramError && error.status === 409)) throw error;
      const existing = await this.find(input.id);
      if (existing?.external_ref !== input.userId) throw new ConversationAlreadyExistsError(input.id);
      created = existing;
    }
    this.known.set(input.id, created);
    return toConversation(created);
  }

  /**
   * The Engram conversation VoltAgent calls `conversationId` (null before its first turn):
   * its Engram id, and `end()`, after which Engram extracts the facts it holds.
   */
  async engramConversation(conversationId: string): Promise<ConversationHandle | null> {
    const found = await this.find(conversationId);
    return found ? this.client.handle(found.id) : null;
  }

  async getConversation(id: string): Promise<Conversation | null> {
    const found = await this.find(id);
    return found ? toConversation(found) : null;
  }

  async getConversations(resourceId: string): Promise<Conversation[]> {
    return this.queryConversations({ resourceId });
  }

  async getConversationsByUserId(
    userId: string,
    options: Omit<ConversationQueryOptions, "userId"> = {},
  ): Promise<Conversation[]> {
    return this.queryConversations({ ...options, userId });
  }

  /** Engram lists most recently updated first, by cursor; VoltAgent's order and offset are applied here. */
  async queryConversations(options: ConversationQueryOptions): Promise<Conversation[]> {
    const all: Conversation[] = [];
    const query = { agent_id: options.resourceId ?? this.agentId, external_ref: options.userId, limit: 200 };
    for await (const conversation of this.client.conversations(query)) all.push(toConversation(conversation));
    const field = { created_at: "createdAt", updated_at: "updatedAt", title: "title" } as const;
    const key = field[options.orderBy ?? "updated_at"];
    const sign = options.orderDirection === "ASC" ? 1 : -1;
    all.sort((a, b) => sign * (a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : 0));
    const offset = options.offset ?? 0;
    return all.slice(offset, options.limit === undefined ? undefined : offset + options.limit);
  }

  async countConversations(options: ConversationQueryOptions): Promise<number> {
    return (await this.queryConversations({ ...options, limit: undefined, offset: 0 })).length;
  }

  async updateConversation(
    id: string,
    updates: Partial<Omit<Conversation, "id" | "createdAt" | "updatedAt">>,
  ): Promise<Conversation> {
    const current = await this.require(id);
    if (
      (updates.userId !== undefined && updates.userId !== current.external_ref) ||
      (updates.resourceId !== undefined && updates.resourceId !== current.agent_id)
    ) {
      throw EngramError.unsupported("moving a conversation to another user or agent (updateConversation)");
    }
    const updated = await this.client.updateConversation(current.id, { title: updates.title, metadata: updates.metadata });
    this.known.set(id, updated);
    return toConversation(updated);
  }

  async deleteConversation(id: string): Promise<void> {
    const found = await this.find(id);
    if (found) await this.client.deleteConversation(found.id);
    this.known.delete(id);
  }

  // Messages

  async addMessage(message: UIMessage, userId: string, conversationId: string): Promise<void> {
    await this.addMessages([message], userId, conversationId);
  }

  /**
   * Appends in call order: VoltAgent persists a turn's messages concurrently, and Engram's
   * `seq` must follow the order they were said in, so appends to one conversation queue.
   */
  addMessages(messages: UIMessage[], userId: string, conversationId: string): Promise<void> {
    const previous = this.appending.get(conversationId) ?? Promise.resolve();
    const next = previous
      .catch(() => undefined)
      .then(() => this.tolerate(() => this.append(messages, userId, conversationId), undefined));
    this.appending.set(conversationId, next);
    const settled = () => {
      if (this.appending.get(conversationId) === next) this.appending.delete(conversationId);
    };
    next.then(settled, settled);
    return next;
  }

  private async append(messages: UIMessage[], userId: string, conversationId: string): Promise<void> {
    if (messages.length === 0) return;
    const conversation = await this.ensure(conversationId, userId);
    const body = messages.map((message) => ({
      role: message.role as Role,
      content: message.parts as { type: string }[],
      metadata: { voltagent: { id: message.id, metadata: message.metadata ?? null } },
    }));
    for (let i = 0; i < body.length; i += 100) {
      await this.client.appendMessages(conversation.id, { messages: body.slice(i, i + 100) });
    }
  }

  async getMessages(
    userId: string,
    conversationId: string,
    options: GetMessagesOptions = {},
  ): Promise<UIMessage<{ createdAt: Date }>[]> {
    const key = `${userId}\u0000${conversationId}`;
    try {
      const messages = await this.readMessages(userId, conversationId, options);
      this.failedReads.delete(key); // only the latest read counts
      return messages;
    } catch (error) {
      // VoltAgent logs a failed read and calls the model anyway: `onStart` acts on it.
      if (this.failedReads.size >= MAX_FAILED_READS) this.failedReads.delete(this.failedReads.keys().next().value!);
      this.failedReads.set(key, error);
      if (this.tolerate.passesOver(error)) return [];
      throw error;
    }
  }

  private async readMessages(
    userId: string,
    conversationId: string,
    options: GetMessagesOptions,
  ): Promise<UIMessage<{ createdAt: Date }>[]> {
    const conversation = await this.find(conversationId);
    if (!conversation || conversation.external_ref !== userId) return [];
    const roles = options.roles?.length ? options.roles.join(",") : undefined;
    const filtered = options.before !== undefined || options.after !== undefined;
    const stored: EngramMessage[] = [];
    try {
      if (options.limit !== undefined && !filtered) {
        stored.push(...(await this.reader.listMessages(conversation.id, { last: options.limit, roles })).items);
      } else {
        for await (const message of this.reader.messages(conversation.id, { roles, limit: 1000 })) stored.push(message);
      }
    } catch (error) {
      if (error instanceof EngramError && error.status === 404) return this.forget(conversationId);
      throw error;
    }
    let messages = stored.map(toUIMessage);
    const { before, after } = options;
    if (before) messages = messages.filter((m) => m.metadata!.createdAt < before);
    if (after) messages = messages.filter((m) => m.metadata!.createdAt > after);
    return options.limit !== undefined && filtered ? messages.slice(-options.limit) : messages;
  }

  async clearMessages(userId: string, conversationId?: string): Promise<void> {
    const targets = conversationId
      ? [await this.find(conversationId)]
      : await this.engramConversations({ agent_id: this.agentId, external_ref: userId });
    for (const conversation of targets) {
      if (conversation && conversation.external_ref === userId) await this.client.clearMessages(conversation.id);
    }
  }

  async deleteMessages(): Promise<void> {
    throw EngramError.unsupported(
      "deleting single messages (deleteMessages): Engram keeps a conversation's messages in order without gaps; clear the conversation instead",
    );
  }

  // Working memory

  /** The document's content, or null when there is none (or no such conversation yet). */
  async getWorkingMemory(params: WorkingMemoryParams): Promise<string | null> {
    return this.tolerate(async () => {
      const target = await this.document(params, false);
      if (!target) return null;
      const document = await target.read();
      this.remember(target.key, document?.etag ?? null);
      return document?.content ?? null;
    }, null);
  }

  /**
   * Replaces the document, guarded by the version last read or written (see the module
   * doc): `EngramError` `precondition_failed` when another writer changed it since.
   */
  async setWorkingMemory(params: WorkingMemoryParams & { content: string }): Promise<void> {
    const target = (await this.document(params, true))!;
    const written = await target.write(params.content, this.conditions(target.key));
    this.remember(target.key, written.etag);
  }

  /** Deletes the document, guarded like a write; deleting none is not an error. */
  async deleteWorkingMemory(params: WorkingMemoryParams): Promise<void> {
    const target = await this.document(params, false);
    if (!target) return;
    const { ifMatch } = this.conditions(target.key);
    try {
      await target.remove(ifMatch === undefined ? {} : { ifMatch });
    } catch (error) {
      if (!(error instanceof EngramError && error.status === 404)) throw error;
    }
    this.remember(target.key, null);
  }

  /** The If-Match / If-None-Match a write of document `key` sends. */
  private conditions(key: string): WriteConditions {
    const version = this.versions.get(key);
    if (version === undefined) return {};
    return version === null ? { ifNoneMatch: "*" } : { ifMatch: version };
  }

  private remember(key: string, version: string | null): void {
    this.versions.delete(key);
    this.versions.set(key, version);
    if (this.versions.size > MAX_VERSIONS) this.versions.delete(this.versions.keys().next().value!);
  }

  /**
   * Where the document of `params` lives, with its read, write and delete calls. For a
   * read or a delete, undefined when there can be none (no such conversation, no user or
   * conversation id given); a write (`create`) creates the conversation, and fails without
   * the id it needs rather than drop the content.
   */
  private async document(params: WorkingMemoryParams, create: boolean) {
    const client = this.client;
    if (params.scope === "user") {
      if (!this.agentId) {
        throw new EngramError(
          0,
          "invalid_request",
          'EngramStorage needs the `agentId` option for working memory with scope "user": Engram keeps that document per agent and user',
          undefined,
          undefined,
        );
      }
      const agentId = this.agentId;
      const userId = create ? need(params.userId, "a userId") : params.userId;
      if (!userId) return undefined;
      return {
        key: `user\u0000${agentId}\u0000${userId}`,
        read: () => this.reader.getUserDocument(agentId, userId),
        write: (content: string, conditions: WriteConditions) =>
          client.putUserDocument(agentId, userId, { content }, conditions),
        remove: (conditions: Pick<WriteConditions, "ifMatch">) => client.deleteUserDocument(agentId, userId, conditions),
      };
    }
    const conversationId = create ? need(params.conversationId, "a conversationId") : params.conversationId;
    if (!conversationId) return undefined;
    const conversation = create
      ? await this.ensure(conversationId, need(params.userId, "a userId"))
      : await this.find(conversationId);
    if (!conversation) return undefined;
    if (params.userId !== undefined && conversation.external_ref !== params.userId) {
      throw new EngramError(
        403,
        "forbidden",
        `conversation ${conversationId} belongs to another user than ${params.userId}`,
        undefined,
        undefined,
      );
    }
    const id = conversation.id;
    return {
      key: `conversation\u0000${id}`,
      read: () => this.reader.getConversationDocument(id),
      write: (content: string, conditions: WriteConditions) =>
        client.putConversationDocument(id, { content }, conditions),
      remove: (conditions: Pick<WriteConditions, "ifMatch">) => client.deleteConversationDocument(id, conditions),
    };
  }

  // Workflow state: no home in Engram.

  async getWorkflowState(): Promise<WorkflowStateEntry | null> {
    throw EngramError.unsupported(WORKFLOW_STATE);
  }
  async queryWorkflowRuns(): Promise<WorkflowStateEntry[]> {
    throw EngramError.unsupported(WORKFLOW_STATE);
  }
  async setWorkflowState(): Promise<void> {
    throw EngramError.unsupported(WORKFLOW_STATE);
  }
  async updateWorkflowState(): Promise<void> {
    throw EngramError.unsupported(WORKFLOW_STATE);
  }
  async getSuspendedWorkflowStates(): Promise<WorkflowStateEntry[]> {
    throw EngramError.unsupported(WORKFLOW_STATE);
  }

  // Lookups

  private agentOf(resourceId?: string): string {
    const agent = resourceId || this.agentId;
    if (!agent) {
      throw new EngramError(0, "invalid_request", "EngramStorage needs an agentId or a resourceId", undefined, undefined);
    }
    return agent;
  }

  private async engramConversations(
    query: { agent_id?: string; external_ref?: string; key?: string },
    client = this.client,
  ) {
    const all: EngramConversation[] = [];
    for await (const conversation of client.conversations({ ...query, limit: 200 })) all.push(conversation);
    return all;
  }

  /** The Engram conversation VoltAgent calls `id`: by key, else (for a UUID) by Engram's own id. */
  private async find(id: string): Promise<EngramConversation | undefined> {
    const cached = this.known.get(id);
    if (cached) return cached;
    const [byKey] = await this.engramConversations({ agent_id: this.agentId, key: id }, this.reader);
    let found = byKey;
    if (!found && UUID.test(id)) {
      try {
        found = await this.reader.getConversation(id);
      } catch (error) {
        if (!(error instanceof EngramError && error.status === 404)) throw error;
      }
    }
    if (found) this.known.set(id, found);
    return found;
  }

  /**
   * The conversation `id` of `userId`, created under the adapter's agent when there is none
   * yet (with `client`: the reader's short deadline before the model, the client's own for
   * an append). VoltAgent creates a new conversation itself (with a title) while it persists
   * the turn and runs its tools; when that creation wins the race, Engram answers 409 (same
   * key, other fields) and the conversation it made is the one. An id naming another
   * person's conversation is a `conflict`: its messages are never appended there.
   */
  private async ensure(id: string, userId: string, client = this.client): Promise<EngramConversation> {
    let conversation = await this.find(id);
    if (!conversation) {
      try {
        conversation = await client.createConversation({ agent_id: this.agentOf(), external_ref: userId, key: id });
      } catch (error) {
        conversation = error instanceof EngramError && error.status === 409 ? await this.find(id) : undefined;
        if (!conversation) throw error;
      }
    }
    if (conversation.external_ref !== userId) {
      const message =
        `conversation id ${id} names another person's conversation of this agent (Engram's keys are unique per agent): ` +
        "make conversation ids unique per person, e.g. prefix them with the person's id";
      throw new EngramError(409, "conflict", message, undefined, undefined);
    }
    this.known.set(id, conversation);
    return conversation;
  }

  private async require(id: string): Promise<EngramConversation> {
    const found = await this.find(id);
    if (!found) throw new EngramError(404, "not_found", `no conversation ${id}`, undefined, undefined);
    return found;
  }

  private forget(id: string): [] {
    this.known.delete(id);
    return [];
  }
}

function need(value: string | undefined, what: string): string {
  if (!value) throw new EngramError(0, "invalid_request", `working memory needs ${what}`, undefined, undefined);
  return value;
}

function toConversation(c: EngramConversation): Conversation {
  return {
    id: c.key ?? c.id,
    resourceId: c.agent_id,
    userId: c.external_ref,
    title: c.title ?? "",
    metadata: c.metadata as Record<string, unknown>,
    createdAt: c.created_at,
    updatedAt: c.updated_at,
  };
}

function toUIMessage(m: EngramMessage): UIMessage<{ createdAt: Date }> {
  const saved = (m.metadata as { voltagent?: { id?: string; metadata?: Record<string, unknown> | null } } | null)
    ?.voltagent;
  const parts = typeof m.content === "string" ? [{ type: "text" as const, text: m.content }] : m.content;
  return {
    id: saved?.id ?? m.id,
    role: m.role === "tool" ? "assistant" : m.role,
    parts: parts as UIMessage["parts"],
    metadata: { ...(saved?.metadata ?? {}), createdAt: new Date(m.created_at) },
  };
}
