export { EngramError, type FailOpenOptions, isOutage, parseRetryAfter } from "./errors.js";
export { type EngramOptions, retryDelay } from "./transport.js";
export {
  type AppendOptions,
  type Body,
  type CallOptions,
  type ConversationHandle,
  EngramClient,
  type NotModified,
  type OperationId,
  type OperationMethods,
  paginate,
  type Query,
  type ReadConditions,
  type Result,
  type Schemas,
  type WaitOptions,
  type WorkingMemory,
  type WriteConditions,
} from "./client.js";
