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
 * `Idempotency-Key`). Each retry waits what `Retry-After` says, else a jittered
 * exponential backoff.
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
    for (let attempt = 0; ; attempt++) {
      let error: EngramError;
      try {
        const response = await this.attempt(call);
        if (response.ok || call.answers?.includes(response.status)) {
          return { status: response.status, headers: response.headers, body: (await parseBody(response)) as T };
        }
        error = await errorFromResponse(response);
      } catch (cause) {
        error = cause instanceof EngramError ? cause : networkError(cause);
      }
      const retryable = error.status === 429 || ((error.status === 503 || error.status === 0) && replayable);
      if (!retryable || attempt >= maxRetries) throw error;
      const delay = error.retryAfter !== undefined ? error.retryAfter * 1000 : backoff(attempt);
      if (delay > (this.options.maxRetryDelayMs ?? 30_000)) throw error;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }

  private async attempt(call: Call): Promise<Response> {
    const headers: Record<string, string> = {
      accept: "application/json",
      ...this.options.headers,
      ...call.headers,
      authorization: `Bearer ${await this.bearer()}`,
    };
    if (call.body !== undefined) headers["content-type"] = "application/json";
    if (call.raw !== undefined) headers["content-type"] = call.raw.contentType;
    const timeoutMs = this.options.timeoutMs ?? 30_000;
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
      throw networkError(cause);
    }
  }
}

function networkError(cause: unknown): EngramError {
  const message = cause instanceof Error ? cause.message : String(cause);
  return new EngramError(0, "network", `could not reach Engram: ${message}`, undefined, undefined, undefined, { cause });
}

async function parseBody(response: Response): Promise<unknown> {
  if (response.status === 204 || response.status === 304) return undefined;
  const type = response.headers.get("content-type") ?? "";
  return type.includes("json") ? response.json() : response.text();
}

function backoff(attempt: number): number {
  return 250 * 2 ** attempt * (0.5 + Math.random() / 2);
}
