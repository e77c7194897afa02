/**
 * Engram as VoltAgent's storage: `new Memory({ storage: new EngramStorage({ client }) })`.
 *
 * Mapping: a VoltAgent conversation is an Engram conversation whose `key` is VoltAgent's
 * conversation id (the same charset as an agent id: `[A-Za-z0-9._:-]`, up to 128), its
 * `resourceId` (the agent's id) is Engram's `agent_id`, its `userId` Engram's
 * `external_ref`. A UIMessage is stored with its `parts` as the message's content and its
 * id and metadata under the message's `metadata.voltagent`, so it reads back unchanged.
 */
import {
  type Conversation,
  ConversationAlreadyExistsError,
  type ConversationQueryOptions,
  type CreateConversationInput,
  type GetMessagesOptions,
  type StorageAdapter,
  type WorkflowStateEntry,
} from "@voltagent/core";
import type { UIMessage } from "ai";
import type { EngramClient, Schemas } from "./client.js";
import { EngramError } from "./errors.js";

type EngramConversation = Schemas["Conversation"];
type EngramMessage = Schemas["Message"];
type Role = "system" | "user" | "assistant";

export interface EngramStorageOptions {
  client: EngramClient;
  /** The agent id used when VoltAgent gives no `resourceId`, and the one conversations are looked up under. */
  agentId?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const WORKING_MEMORY =
  "working memory (VoltAgent's Memory `workingMemory` option): this Engram server has no working-memory routes yet";
const WORKFLOW_STATE =
  "workflow state (VoltAgent workflows' suspend/resume records): Engram holds agent memory, not workflow runs; " +
  "give workflows a storage of their own";

/** VoltAgent's `StorageAdapter`, backed by Engram's API. Errors are Engram's `EngramError`s. */
export class EngramStorage implements StorageAdapter {
  private readonly client: EngramClient;
  private readonly agentId: string | undefined;
  /** VoltAgent's conversation id → Engram's conversation. */
  private readonly known = new Map<string, EngramConversation>();
  /** The append in flight per conversation, so that the next one waits for it. */
  private readonly appending = new Map<string, Promise<void>>();

  constructor(options: EngramStorageOptions) {
    this.client = options.client;
    this.agentId = options.agentId;
  }

  // Conversations

  /**
   * Creates the conversation under its key. Engram answers 409 when the key already names
   * a conversation with other fields: VoltAgent's own "already exists" error, which it
   * handles (two writers of the same thread race to create it).
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
      if (error instanceof EngramError && error.status === 409) throw new ConversationAlreadyExistsError(input.id);
      throw error;
    }
    this.known.set(input.id, created);
    return toConversation(created);
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
    const next = previous.catch(() => undefined).then(() => this.append(messages, userId, conversationId));
    this.appending.set(conversationId, next);
    const settled = () => {
      if (this.appending.get(conversationId) === next) this.appending.delete(conversationId);
    };
    next.then(settled, settled);
    return next;
  }

  private async append(messages: UIMessage[], userId: string, conversationId: string): Promise<void> {
    if (messages.length === 0) return;
    const conversation =
      (await this.find(conversationId)) ??
      (await this.client.createConversation({ agent_id: this.agentOf(), external_ref: userId, key: conversationId }));
    this.known.set(conversationId, conversation);
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
    const conversation = await this.find(conversationId);
    if (!conversation || conversation.external_ref !== userId) return [];
    const roles = options.roles?.length ? options.roles.join(",") : undefined;
    const filtered = options.before !== undefined || options.after !== undefined;
    const stored: EngramMessage[] = [];
    try {
      if (options.limit !== undefined && !filtered) {
        stored.push(...(await this.client.listMessages(conversation.id, { last: options.limit, roles })).items);
      } else {
        for await (const message of this.client.messages(conversation.id, { roles, limit: 1000 })) stored.push(message);
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

  // Working memory: one small addition once the server has its routes.

  async getWorkingMemory(): Promise<string | null> {
    throw EngramError.unsupported(WORKING_MEMORY);
  }
  async setWorkingMemory(): Promise<void> {
    throw EngramError.unsupported(WORKING_MEMORY);
  }
  async deleteWorkingMemory(): Promise<void> {
    throw EngramError.unsupported(WORKING_MEMORY);
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

  private async engramConversations(query: { agent_id?: string; external_ref?: string; key?: string }) {
    const all: EngramConversation[] = [];
    for await (const conversation of this.client.conversations({ ...query, limit: 200 })) all.push(conversation);
    return all;
  }

  /** The Engram conversation VoltAgent calls `id`: by key, else (for a UUID) by Engram's own id. */
  private async find(id: string): Promise<EngramConversation | undefined> {
    const cached = this.known.get(id);
    if (cached) return cached;
    const [byKey] = await this.engramConversations({ agent_id: this.agentId, key: id });
    let found = byKey;
    if (!found && UUID.test(id)) {
      try {
        found = await this.client.getConversation(id);
      } catch (error) {
        if (!(error instanceof EngramError && error.status === 404)) throw error;
      }
    }
    if (found) this.known.set(id, found);
    return found;
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
