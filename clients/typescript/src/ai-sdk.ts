/**
 * Engram as the memory of a Vercel AI SDK model (`ai` 6 and 7): a middleware for
 * `wrapLanguageModel` that puts the user's memory into every call's prompt and stores
 * each turn in an Engram conversation.
 *
 * Typed structurally (no import of `ai`), so one middleware serves the V3 models of `ai` 6
 * and the V3/V4 models of `ai` 7.
 */
import type { ConversationHandle, EngramClient } from "./client.js";
import { EngramError, type FailOpenOptions, tolerant } from "./errors.js";

/** Who a call is about. Each field may also come per call from `providerOptions.engram`. */
export interface EngramIdentity {
  agentId?: string;
  externalRef?: string;
  /** The Engram conversation (its UUID) the turns go to. */
  conversationId?: string;
  /** Or the client's own name for it: the conversation is created on first use. */
  conversationKey?: string;
}

export interface EngramMiddlewareOptions extends EngramIdentity, FailOpenOptions {
  client: EngramClient;
  /** Largest memory block, in tokens (≈ characters / 4): Engram's `token_budget`. */
  tokenBudget?: number;
}


interface PromptPart {
  type: string;
  text?: string;
}
interface PromptMessage {
  role: string;
  content: string | PromptPart[];
}
interface CallParams {
  prompt: PromptMessage[];
  providerOptions?: Record<string, Record<string, unknown> | undefined>;
}
interface FinishReason {
  unified?: string;
}
interface GenerateResult {
  content: PromptPart[];
  finishReason: FinishReason | string;
}
interface StreamPart {
  type: string;
  delta?: string;
  finishReason?: FinishReason | string;
}
interface StreamResult {
  stream: ReadableStream<StreamPart>;
}

/** The middleware's shape: assignable to `ai` 6's and `ai` 7's `LanguageModelMiddleware`. */
export interface EngramMiddleware {
  readonly specificationVersion: "v3";
  transformParams<P extends CallParams>(options: { type: "generate" | "stream"; params: P }): Promise<P>;
  wrapGenerate<R extends GenerateResult>(options: {
    doGenerate: () => PromiseLike<R>;
    params: CallParams;
  }): Promise<R>;
  wrapStream<S extends StreamResult>(options: { doStream: () => PromiseLike<S>; params: CallParams }): Promise<S>;
  /** The conversation the turns of `identity` (the options' by default) go to, found or created now. */
  conversation(identity?: EngramIdentity): Promise<ConversationHandle>;
}

/** The text of the newest user message of a prompt: the turn being answered. */
export function latestUserText(prompt: PromptMessage[]): string | undefined {
  for (let i = prompt.length - 1; i >= 0; i--) {
    const message = prompt[i];
    if (message?.role === "user") return textOf(message.content);
  }
  return undefined;
}

function textOf(content: string | PromptPart[]): string {
  if (typeof content === "string") return content;
  return content
    .filter((part) => part.type === "text" && typeof part.text === "string")
    .map((part) => part.text)
    .join("");
}

function reasonOf(reason: FinishReason | string | undefined): string | undefined {
  return typeof reason === "string" ? reason : reason?.unified;
}

/** Spec limit of memory-context's `query`: the newest part of a long message is what matters. */
const MAX_QUERY_CHARS = 1000;

/**
 * A middleware that, before every call, finds or creates the conversation and prepends
 * Engram's memory block for the latest user text as a system message; after the last step
 * of a turn (the one that does not end in tool calls) it appends the user's input and the
 * model's text to the conversation, once per logical turn. Engram's errors reach the
 * caller as `EngramError`s, unless `onEngramError: "continue"` passes over an outage.
 */
export function engramMiddleware(options: EngramMiddlewareOptions): EngramMiddleware {
  const { client } = options;
  const deadlineMs = options.memoryTimeoutMs ?? 2_000;
  const conversations = new Map<string, Promise<string>>();
  const tolerate = tolerant(options);

  const identity = (params: CallParams) => {
    const perCall = (params.providerOptions?.engram ?? {}) as EngramIdentity;
    const merged = { ...stripUndefined(options), ...stripUndefined(perCall) } as EngramIdentity;
    if (!merged.agentId || !merged.externalRef) {
      throw new EngramError(
        0,
        "invalid_request",
        "engramMiddleware needs agentId and externalRef (options or providerOptions.engram)",
        undefined,
        undefined,
      );
    }
    return merged as EngramIdentity & { agentId: string; externalRef: string };
  };

  const conversationOf = (who: ReturnType<typeof identity>): Promise<string> => {
    if (who.conversationId) return Promise.resolve(who.conversationId);
    const key = who.conversationKey;
    if (!key) {
      const message = "engramMiddleware needs conversationId or conversationKey to store the turn";
      return Promise.reject(new EngramError(0, "invalid_request", message, undefined, undefined));
    }
    const cacheKey = JSON.stringify([who.agentId, who.externalRef, key]);
    let id = conversations.get(cacheKey);
    if (!id) {
      id = resolveKey(who.agentId, who.externalRef, key);
      id.catch(() => conversations.delete(cacheKey));
      conversations.set(cacheKey, id);
    }
    return id;
  };

  /**
   * The id of the agent's conversation named `key`, created when there is none. Keys are
   * unique per agent: one naming another person's conversation is a `conflict`.
   */
  const resolveKey = async (agentId: string, externalRef: string, key: string): Promise<string> => {
    const find = async () =>
      (await client.listConversations({ agent_id: agentId, key, limit: 1 }, { deadlineMs })).items[0];
    let found = await find();
    if (!found) {
      try {
        found = await client.createConversation({ agent_id: agentId, external_ref: externalRef, key }, { deadlineMs });
      } catch (error) {
        if (!(error instanceof EngramError && error.status === 409)) throw error;
        found = await find(); // another caller created it first
      }
    }
    if (found?.external_ref !== externalRef) {
      const message =
        "conversationKey names another person's conversation of this agent (keys are unique per agent): " +
        "make the key unique per person, e.g. prefix it with the person's id";
      throw new EngramError(409, "conflict", message, undefined, undefined);
    }
    return found.id;
  };

  const recordTurn = async (params: CallParams, answer: string, reason: string | undefined) => {
    if (reason === "tool-calls") return; // a middle step of a tool loop: the turn is not over
    const user = latestUserText(params.prompt);
    const who = identity(params);
    const conversationId = await tolerate(() => conversationOf(who), undefined);
    if (conversationId === undefined) return;
    const messages: { role: "user" | "assistant"; content: string }[] = [];
    if (user !== undefined) messages.push({ role: "user", content: user });
    if (answer !== "") messages.push({ role: "assistant", content: answer });
    if (messages.length > 0) await tolerate(() => client.appendMessages(conversationId, { messages }), undefined);
  };

  return {
    specificationVersion: "v3",

    async transformParams({ params }) {
      const who = identity(params);
      const query = latestUserText(params.prompt)?.slice(-MAX_QUERY_CHARS).trim();
      const block = () =>
        client.memoryContext(
          who.agentId,
          who.externalRef,
          { query: query === "" ? undefined : query, token_budget: options.tokenBudget },
          { deadlineMs },
        );
      // Both before the model is called, so that no answer is paid for and then lost.
      const [context] = await Promise.all([
        tolerate(block, undefined),
        tolerate(() => conversationOf(who), undefined),
      ]);
      if (!context?.enabled || context.prompt === "") return params;
      return { ...params, prompt: [{ role: "system", content: context.prompt }, ...params.prompt] };
    },

    async wrapGenerate({ doGenerate, params }) {
      const result = await doGenerate();
      await recordTurn(params, textOf(result.content), reasonOf(result.finishReason));
      return result;
    },

    async wrapStream({ doStream, params }) {
      const result = await doStream();
      let answer = "";
      let reason: string | undefined;
      const recorder = new TransformStream<StreamPart, StreamPart>({
        transform(part, controller) {
          if (part.type === "text-delta" && typeof part.delta === "string") answer += part.delta;
          if (part.type === "finish") reason = reasonOf(part.finishReason);
          controller.enqueue(part);
        },
        // The stream ends only once the turn is stored: a failure reaches the reader.
        flush: () => recordTurn(params, answer, reason),
      });
      return { ...result, stream: result.stream.pipeThrough(recorder) };
    },

    async conversation(perCall = {}) {
      const id = await conversationOf(identity({ prompt: [], providerOptions: { engram: { ...perCall } } }));
      return client.handle(id);
    },
  };
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
