/**
 * Messages between the local host (`functions/adapters/local/process-pool-host.ts`) and its sandbox
 * children (`sandbox-entry.ts`), as JSON over the IPC channel. No side effects: the host imports it.
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

export type SandboxRequest = DescribeRequest | InvokeRequest;

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

/** Everything the child sends; `respond` comes before the `result` of the same invocation. */
export type SandboxMessage = ReadyMessage | DescribedMessage | RespondMessage | ResultMessage;

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
