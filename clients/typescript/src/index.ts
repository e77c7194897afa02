export { EngramError, parseRetryAfter } from "./errors.js";
export type { EngramOptions } from "./transport.js";
export {
  type AppendOptions,
  type Body,
  EngramClient,
  type OperationId,
  type OperationMethods,
  paginate,
  type Query,
  type Result,
  type Schemas,
} from "./client.js";
