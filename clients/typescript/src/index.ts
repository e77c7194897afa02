export { EngramError, parseRetryAfter } from "./errors.js";
export type { EngramOptions } from "./transport.js";
export {
  type AppendOptions,
  type Body,
  EngramClient,
  type NotModified,
  type OperationId,
  type OperationMethods,
  paginate,
  type Query,
  type ReadConditions,
  type Result,
  type Schemas,
  type WorkingMemory,
  type WriteConditions,
} from "./client.js";
