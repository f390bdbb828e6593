/**
 * Messages between the local host (`functions/adapters/local/process-pool-host.ts`) and its sandbox
 * children (`sandbox-entry.ts`), as JSON over the IPC channel. No side effects: the host imports it.
 *
 * Each IPC message costs a write on one side and a read, a parse and an event on the other, whatever
 * its size: both sides send what one tick produced as one message (`InvokeBatch`, `BatchMessage`).
 */
import type { ComponentDescription } from "./describe-component.ts";
import type { Invocation, InvocationResult, RespondMessage } from "./protocol.ts";

/** Asks the child to evaluate the bundle at `bundlePath` and describe its export. */
export interface DescribeRequest {
  type: "describe";
  requestId: string;
  bundlePath: string;
}

/** Asks the child to run one invocation of the component bundled at `bundlePath`. */
export interface InvokeRequest {
  type: "invoke";
  bundlePath: string;
  invocation: Invocation;
}

/**
 * Tells the child not to start an invocation it was sent: the host runs it elsewhere (the child
 * seemed blocked). An invocation already started goes on; its result is ignored.
 */
export interface CancelRequest {
  type: "cancel";
  invocationId: string;
}

/** Invocations the host sent in one tick, to start in this order. */
export interface InvokeBatch {
  type: "invokes";
  requests: InvokeRequest[];
}

export type SandboxRequest = DescribeRequest | InvokeRequest | InvokeBatch | CancelRequest;

/** Why a component could not be evaluated; `line`/`column` are positions in the user's source. */
export interface LoadFailure {
  message: string;
  line?: number;
  column?: number;
}

export type DescribeReply = { ok: true; description: ComponentDescription } | { ok: false; error: LoadFailure };

export type DescribedMessage = { type: "described"; requestId: string } & DescribeReply;

export interface ResultMessage {
  type: "result";
  result: InvocationResult;
}

export interface ReadyMessage {
  type: "ready";
}

/**
 * Sent every {@link SANDBOX_HEARTBEAT_MS} while the child's event loop turns: a child the host
 * does not hear from for a few hundred milliseconds is blocked (a synchronous loop).
 */
export interface BeatMessage {
  type: "beat";
}

/**
 * Sent synchronously right before the child runs code of an invocation (its run, or the first
 * load of its bundle), together with whatever else the child had queued. The invocation the child
 * started last is the one whose code is likeliest to be running when the child blocks or dies.
 */
export interface StartedMessage {
  type: "started";
  invocationId: string;
}

/** Sent when code of an invocation ends or kills its own process (`process.exit`, `abort`, `kill`). */
export interface ExitingMessage {
  type: "exiting";
  invocationId: string;
}

/**
 * Messages of one tick of the child, in the order they happened. `ready` and `described` always
 * travel alone (a describing host looks for them by type).
 */
export interface BatchMessage {
  type: "batch";
  messages: SandboxMessage[];
}

/** Everything the child sends; `respond` comes before the `result` of the same invocation. */
export type SandboxMessage =
  | BatchMessage
  | ReadyMessage
  | BeatMessage
  | StartedMessage
  | ExitingMessage
  | DescribedMessage
  | RespondMessage
  | ResultMessage;

/**
 * The global (a `Symbol.for` key) a local bundle calls with its own URL as its top-level code
 * starts (`functions/adapters/local/sandbox-bundle.ts`): the child then says which invocation
 * loads it (`started`).
 */
export const EVALUATING_HOOK = "sluice.sandbox.evaluating";

/** How often a sandbox child says it is alive. */
export const SANDBOX_HEARTBEAT_MS = 50;

/**
 * The host bundles the user's code with an inline sourcemap and starts the child with
 * `--enable-source-maps`, so stack frames name the user's file (`component.ts`) with its own lines.
 */
const USER_FRAME = /component\.ts:(\d+):(\d+)/;

/** Describes what the user's code threw. It can throw anything, not only an Error. */
export function toLoadFailure(thrown: unknown): LoadFailure {
  if (!(thrown instanceof Error)) return { message: `non-error thrown: ${String(thrown)}` };
  const code = (thrown as { code?: unknown }).code;
  // Node's permission errors say only "Access to this API has been restricted"; the code says which.
  const prefix = typeof code === "string" && !thrown.message.includes(code) ? `${code}: ` : "";
  const failure: LoadFailure = { message: `${prefix}${thrown.message}` };
  const position = USER_FRAME.exec(String(thrown.stack ?? ""));
  if (position) {
    failure.line = Number(position[1]);
    failure.column = Number(position[2]);
  }
  return failure;
}

/** A load failure as one line: `message (line L, column C)`. */
export function withPosition(failure: LoadFailure): string {
  if (failure.line === undefined) return failure.message;
  return `${failure.message} (line ${failure.line}${failure.column === undefined ? "" : `, column ${failure.column}`})`;
}
