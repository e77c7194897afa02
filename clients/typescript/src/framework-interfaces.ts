/**
 * Engram behind the memory interfaces of the frameworks Engram was designed from: gemstack
 * (`ConversationStore`, `UserMemory`), gumbee (`Memory`, one instance per conversation) and
 * Tutti (`UserMemoryStore`, `SemanticMemoryStore`).
 *
 * Their packages are not in the npm registry, so the interfaces below are written from
 * their documentation as we know it, not imported: each class is checked against its
 * interface by the compiler (`implements`), and exercised against a live Engram by the tests.
 */
import type { EngramClient, Schemas } from "./client.js";

type EngramMessage = Schemas["Message"];
type Fact = Schemas["Fact"];

/** A chat message as these frameworks pass them. */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
}

/** A remembered fact as these frameworks return them. */
export interface MemoryRecord {
  id: string;
  text: string;
  tags: string[];
  /** Recall relevance in [0, 1], on search results only. */
  score?: number;
  createdAt: string;
}

// gemstack

export interface GemstackConversationStore {
  create(input: { userId: string; title?: string; metadata?: Record<string, unknown> }): Promise<{ id: string }>;
  append(conversationId: string, messages: ChatMessage[]): Promise<void>;
  history(conversationId: string, options?: { limit?: number }): Promise<ChatMessage[]>;
  delete(conversationId: string): Promise<void>;
}

export interface GemstackUserMemory {
  remember(userId: string, fact: string, options?: { tags?: string[] }): Promise<MemoryRecord>;
  recall(userId: string, query: string, options?: { limit?: number }): Promise<MemoryRecord[]>;
  list(userId: string): Promise<MemoryRecord[]>;
  forget(userId: string, id: string): Promise<void>;
  /** Forgets everything about the user (Engram's erasure: facts, conversations, messages). */
  forgetAll(userId: string): Promise<void>;
}

// gumbee

export interface GumbeeMemory {
  /** The conversation so far, oldest first. */
  read(): Promise<ChatMessage[]>;
  /** Stores messages of this conversation. */
  store(messages: ChatMessage[]): Promise<void>;
  /** Called once a message was appended to the conversation: stores it. */
  appended(message: ChatMessage): Promise<void>;
}

// Tutti

export interface TuttiUserMemoryStore {
  get(userId: string): Promise<MemoryRecord[]>;
  add(userId: string, memory: string): Promise<MemoryRecord>;
  remove(userId: string, id: string): Promise<void>;
  clear(userId: string): Promise<void>;
}

export interface TuttiSemanticMemoryStore {
  add(userId: string, text: string, metadata?: { tags?: string[] }): Promise<MemoryRecord>;
  search(userId: string, query: string, limit?: number): Promise<MemoryRecord[]>;
  delete(userId: string, id: string): Promise<void>;
}

function toRecord(fact: Fact & { relevance?: number }): MemoryRecord {
  return { id: fact.id, text: fact.fact, tags: fact.tags, score: fact.relevance, createdAt: fact.created_at };
}

function toChat(message: EngramMessage): ChatMessage {
  const content =
    typeof message.content === "string"
      ? message.content
      : message.content.map((part: { type: string; text?: unknown }) => (typeof part.text === "string" ? part.text : "")).join("");
  return { role: message.role, content };
}

/** Facts of one agent's users: what the user-memory interfaces share. */
class AgentFacts {
  constructor(
    protected readonly client: EngramClient,
    protected readonly agentId: string,
  ) {}

  async remember(userId: string, fact: string, options: { tags?: string[] } = {}): Promise<MemoryRecord> {
    return toRecord(await this.client.rememberFact(this.agentId, userId, { fact, tags: options.tags }));
  }
  async recall(userId: string, query: string, options: { limit?: number } = {}): Promise<MemoryRecord[]> {
    return (await this.client.searchFacts(this.agentId, userId, { q: query, limit: options.limit })).items.map(toRecord);
  }
  async list(userId: string): Promise<MemoryRecord[]> {
    const all: MemoryRecord[] = [];
    for await (const fact of this.client.facts(this.agentId, userId, { limit: 200 })) all.push(toRecord(fact));
    return all;
  }
  async forget(userId: string, id: string): Promise<void> {
    await this.client.deleteFact(this.agentId, userId, id);
  }
}

/** gemstack's `ConversationStore` over Engram conversations of one agent. */
export class EngramConversationStore implements GemstackConversationStore {
  constructor(
    private readonly client: EngramClient,
    private readonly agentId: string,
  ) {}

  async create(input: { userId: string; title?: string; metadata?: Record<string, unknown> }) {
    const conversation = await this.client.createConversation({
      agent_id: this.agentId,
      external_ref: input.userId,
      title: input.title,
      metadata: input.metadata,
    });
    return { id: conversation.id };
  }
  async append(conversationId: string, messages: ChatMessage[]): Promise<void> {
    await this.client.appendMessages(conversationId, { messages });
  }
  async history(conversationId: string, options: { limit?: number } = {}): Promise<ChatMessage[]> {
    return (await this.client.listMessages(conversationId, { last: options.limit })).items.map(toChat);
  }
  async delete(conversationId: string): Promise<void> {
    await this.client.deleteConversation(conversationId);
  }
}

/** gemstack's `UserMemory`: an agent's facts about a user; `forgetAll` is Engram's erasure. */
export class EngramUserMemory extends AgentFacts implements GemstackUserMemory {
  /** Needs a token with the `rgpd` (or `admin`) scope: it erases the person across agents. */
  async forgetAll(userId: string): Promise<void> {
    await this.client.eraseUser(userId);
  }
}

/** gumbee's `Memory`: one instance per Engram conversation. */
export class EngramConversationMemory implements GumbeeMemory {
  constructor(
    private readonly client: EngramClient,
    readonly conversationId: string,
  ) {}

  async read(): Promise<ChatMessage[]> {
    const all: ChatMessage[] = [];
    for await (const message of this.client.messages(this.conversationId, { limit: 1000 })) all.push(toChat(message));
    return all;
  }
  async store(messages: ChatMessage[]): Promise<void> {
    if (messages.length > 0) await this.client.appendMessages(this.conversationId, { messages });
  }
  async appended(message: ChatMessage): Promise<void> {
    await this.store([message]);
  }
}

/** Tutti's `UserMemoryStore`: an agent's facts about each user. */
export class EngramUserMemoryStore extends AgentFacts implements TuttiUserMemoryStore {
  get(userId: string) {
    return this.list(userId);
  }
  add(userId: string, memory: string) {
    return this.remember(userId, memory);
  }
  remove(userId: string, id: string) {
    return this.forget(userId, id);
  }
  async clear(userId: string): Promise<void> {
    await this.client.deleteFacts(this.agentId, userId);
  }
}

/** Tutti's `SemanticMemoryStore`: Engram's recall (full text, and by meaning with embeddings on). */
export class EngramSemanticMemoryStore extends AgentFacts implements TuttiSemanticMemoryStore {
  add(userId: string, text: string, metadata: { tags?: string[] } = {}) {
    return this.remember(userId, text, metadata);
  }
  search(userId: string, query: string, limit?: number) {
    return this.recall(userId, query, { limit });
  }
  delete(userId: string, id: string) {
    return this.forget(userId, id);
  }
}
