import { EngramError, errorFromResponse } from "./errors.js";

/** How to reach Engram, and how patient to be with it. */
export interface EngramOptions {
  /** The server's address, e.g. `http://127.0.0.1:8080` (no `/api`). */
  baseUrl: string;
  /** A bearer token, or a function that returns a fresh one per request. */
  token: string | (() => string | Promise<string>);
  /** A `fetch` to use instead of the global one. */
  fetch?: typeof fetch;
  /** Longest one attempt may take, in milliseconds (default 30 000). */
  timeoutMs?: number;
  /** Retries after a 429, a 503, a timeout or a network failure (default 2). */
  maxRetries?: number;
  /**
   * Longest wait before a retry, in milliseconds (default 30 000). A `Retry-After` longer
   * than this is not waited for: the error is thrown at once, so no caller hangs.
   */
  maxRetryDelayMs?: number;
  /** Longest a call may take in all, retries and their waits included, in milliseconds (default 60 000). */
  deadlineMs?: number;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

export type QueryValue = string | number | boolean | undefined | null;

export interface Call {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, QueryValue> | undefined;
  body?: unknown;
  /** A body sent as it is, not as JSON (NDJSON for `POST /api/import`), with its content type. */
  raw?: { text: string; contentType: string };
  headers?: Record<string, string>;
  /**
   * Statuses besides 2xx that are answers, not errors (a read's 304, a 404 that means
   * "none yet"): `exchange` returns them, `send` still throws them.
   */
  answers?: readonly number[];
  /** This call's own `deadlineMs` (a read that must not hold a model call back). */
  deadlineMs?: number;
}

/** An answer: its status, headers and parsed body (JSON, text, or undefined for 204 and 304). */
export interface Exchange<T> {
  status: number;
  headers: Headers;
  body: T;
}

const IDEMPOTENT = new Set(["GET", "PUT", "DELETE"]);

/**
 * Sends calls and applies the retry rules: a 429 is always retried (the server refused it
 * before doing anything); a 503, a timeout or a network failure only when repeating the
 * request cannot do the work twice (GET, PUT, DELETE, or a request with an
 * `Idempotency-Key`). Each retry waits as `retryDelay` says, within the call's deadline.
 */
export class Transport {
  readonly baseUrl: string;
  private readonly options: EngramOptions;
  private readonly fetchImpl: typeof fetch;

  constructor(options: EngramOptions) {
    this.options = options;
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  url(path: string, query?: Record<string, QueryValue>): string {
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null) search.set(key, String(value));
    }
    const qs = search.toString();
    return `${this.baseUrl}${path}${qs ? `?${qs}` : ""}`;
  }

  async bearer(): Promise<string> {
    const { token } = this.options;
    return typeof token === "function" ? await token() : token;
  }

  /** Sends `call`, retrying as described above; the parsed answer (JSON, text, or undefined for 204). */
  async send<T>(call: Call): Promise<T> {
    return (await this.exchange<T>({ ...call, answers: undefined })).body;
  }

  /**
   * Sends `call` with the same retries, and returns the answer with its status and
   * headers: a 2xx, or one of `call.answers`. Any other status is thrown as `EngramError`.
   */
  async exchange<T>(call: Call): Promise<Exchange<T>> {
    const maxRetries = this.options.maxRetries ?? 2;
    const replayable = IDEMPOTENT.has(call.method) || call.headers?.["Idempotency-Key"] !== undefined;
    const deadline = Date.now() + (call.deadlineMs ?? this.options.deadlineMs ?? 60_000);
    for (let attempt = 0; ; attempt++) {
      let error: EngramError;
      try {
        const response = await this.attempt(call, deadline);
        if (response.ok || call.answers?.includes(response.status)) {
          return { status: response.status, headers: response.headers, body: (await parseBody(response)) as T };
        }
        error = await errorFromResponse(response);
      } catch (cause) {
        error = cause instanceof EngramError ? cause : networkError(cause);
      }
      const retryable = error.status === 429 || ((error.status === 503 || error.status === 0) && replayable);
      if (!retryable || attempt >= maxRetries) throw error;
      const delay = retryDelay(error.retryAfter, attempt, this.options.maxRetryDelayMs ?? 30_000);
      if (delay === undefined || Date.now() + delay >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }

  private async attempt(call: Call, deadline: number): Promise<Response> {
    const headers: Record<string, string> = {
      accept: "application/json",
      ...this.options.headers,
      ...call.headers,
      authorization: `Bearer ${await this.bearer()}`,
    };
    if (call.body !== undefined) headers["content-type"] = "application/json";
    if (call.raw !== undefined) headers["content-type"] = call.raw.contentType;
    const timeoutMs = Math.max(1, Math.min(this.options.timeoutMs ?? 30_000, deadline - Date.now()));
    try {
      return await this.fetchImpl(this.url(call.path, call.query), {
        method: call.method,
        headers,
        body: call.raw?.text ?? (call.body === undefined ? undefined : JSON.stringify(call.body)),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (cause) {
      if (cause instanceof DOMException && cause.name === "TimeoutError") {
        throw new EngramError(0, "timeout", `no answer within ${timeoutMs} ms`, undefined, undefined, undefined, {
          cause,
        });
      }
      throw networkError(cause, this.baseUrl);
    }
  }
}

/** A network failure named by its root cause (`connect ECONNREFUSED 127.0.0.1:8080`), not fetch's "fetch failed". */
function networkError(cause: unknown, baseUrl?: string): EngramError {
  let root = cause;
  while (root instanceof Error && root.cause !== undefined) root = root.cause;
  const code = (root as { code?: unknown } | undefined)?.code;
  const reason = root instanceof Error ? root.message || String(code ?? root.name) : String(root);
  const where = baseUrl === undefined ? "" : ` at ${baseUrl}`;
  return new EngramError(0, "network", `could not reach Engram${where}: ${reason}`, undefined, undefined, undefined, {
    cause,
  });
}

async function parseBody(response: Response): Promise<unknown> {
  if (response.status === 204 || response.status === 304) return undefined;
  const type = response.headers.get("content-type") ?? "";
  return type.includes("json") ? response.json() : response.text();
}

/**
 * Milliseconds to wait before retry `attempt` (0 first): never before the server's
 * `Retry-After`, plus full jitter over the larger of it and 250 ms · 2^attempt, so clients
 * refused together do not return together. Undefined when it would exceed `maxDelayMs`.
 */
export function retryDelay(
  retryAfterSeconds: number | undefined,
  attempt: number,
  maxDelayMs: number,
  random: () => number = Math.random,
): number | undefined {
  const floor = (retryAfterSeconds ?? 0) * 1000;
  if (floor > maxDelayMs) return undefined;
  return Math.min(maxDelayMs, floor + random() * Math.max(floor, 250 * 2 ** attempt));
}
