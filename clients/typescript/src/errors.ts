/**
 * Every failure of a call to Engram, as one error: the API's `code`, `message` and
 * `request_id` when the server answered, `status` 0 and code `network` / `timeout` when it
 * did not. `retryAfter` is the server's `Retry-After` in seconds (429 and 503).
 */
export class EngramError extends Error {
  override readonly name = "EngramError";

  constructor(
    /** HTTP status; 0 when no answer came back. */
    readonly status: number,
    /**
     * The API's error code (`invalid_request`, `not_found`, `precondition_failed`, `rate_limited`…), or
     * `network`, `timeout`, `unsupported`.
     */
    readonly code: string,
    message: string,
    /** The request id the server logged this request under (`x-request-id`). */
    readonly requestId: string | undefined,
    /** Seconds the server asked to wait (`Retry-After`), when it said. */
    readonly retryAfter: number | undefined,
    /** The whole error body, for fields some codes add (a 409's `last_seq`…). */
    readonly body?: unknown,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** An error for what an adapter's framework asks of Engram and Engram has no home for. */
  static unsupported(what: string): EngramError {
    return new EngramError(0, "unsupported", `Engram does not support ${what}`, undefined, undefined);
  }
}

/** Parses `Retry-After` (seconds or an HTTP date) into seconds. */
export function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, (date - Date.now()) / 1000);
}

/** Builds the error for a non-2xx answer from its body (the API's `{"error": {...}}`). */
export async function errorFromResponse(response: Response): Promise<EngramError> {
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const detail = (body as { error?: { code?: unknown; message?: unknown; request_id?: unknown } } | undefined)?.error;
  const code = typeof detail?.code === "string" ? detail.code : `http_${response.status}`;
  const message = typeof detail?.message === "string" ? detail.message : text.slice(0, 500) || response.statusText;
  const requestId =
    typeof detail?.request_id === "string" ? detail.request_id : (response.headers.get("x-request-id") ?? undefined);
  return new EngramError(
    response.status,
    code,
    message,
    requestId,
    parseRetryAfter(response.headers.get("retry-after")),
    body,
  );
}

/**
 * How an adapter meets an Engram that is down, slow or overloaded; the same options in the
 * AI SDK middleware and the VoltAgent storage.
 */
export interface FailOpenOptions {
  /**
   * Longest each memory read before the model call may take, in milliseconds, retries
   * included (default 2 000). Storing the turn keeps the client's own timeouts.
   */
  memoryTimeoutMs?: number;
  /**
   * When Engram cannot be reached, is slow, or answers 429 or 5xx: `"throw"` (default)
   * fails the call; `"continue"` lets the model answer without memory (the turn is not
   * stored) and passes the error to `onError`. Engram's other 4xx answers (a bad key, a key
   * naming another person's conversation) always throw, before the model is called.
   */
  onEngramError?: "throw" | "continue";
  /** Hears each failure that `"continue"` passed over (default: `console.warn` with its code). */
  onError?: (error: EngramError) => void;
}

/**
 * Failures a retry later may cure (no answer, a timeout, 429, 5xx): what `"continue"`
 * passes over. An adapter's own refusals (`invalid_request`, `unsupported`) have status 0
 * too, and are not outages.
 */
export function isOutage(error: unknown): error is EngramError {
  if (!(error instanceof EngramError)) return false;
  if (error.status === 0) return error.code === "network" || error.code === "timeout";
  return error.status === 429 || error.status >= 500;
}

/**
 * A runner of memory work under `options`: `await tolerate(work, fallback)` answers what
 * `work` answers; under `"continue"` an outage is reported and answered by `fallback`.
 */
export function tolerant(options: FailOpenOptions) {
  const report =
    options.onError ?? ((error: EngramError) => console.warn(`engram: answering without memory (${error.code})`));
  const passesOver = (error: unknown): boolean => {
    if (options.onEngramError !== "continue" || !isOutage(error)) return false;
    report(error);
    return true;
  };
  const tolerate = async <T>(work: () => Promise<T>, fallback: T): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      if (!passesOver(error)) throw error;
      return fallback;
    }
  };
  return Object.assign(tolerate, { passesOver });
}
