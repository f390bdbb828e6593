/**
 * The program a sandbox child process runs. The host (`functions/adapters/local/component-sandbox.ts`)
 * bundles this file to plain JS and forks it under Node's permission model, with read access to
 * this file's folder and the component's bundle folder only, and an empty environment.
 *
 * Protocol: one JSON request over IPC, one JSON reply. The child keeps no state worth keeping; the
 * host kills it after the reply, and it exits by itself when the host goes away.
 */
import { pathToFileURL } from "node:url";
import { type ComponentDescription, describeComponent } from "./describe-component.ts";

/** Asks the child to evaluate the bundle at `bundlePath` and describe its export. */
export interface DescribeRequest {
  kind: "describe";
  bundlePath: string;
}

/** Why a component could not be evaluated; `line`/`column` are positions in the user's source. */
export interface LoadFailure {
  message: string;
  line?: number;
  column?: number;
}

export type DescribeReply = { ok: true; description: ComponentDescription } | { ok: false; error: LoadFailure };

/**
 * The host bundles the user's code with an inline sourcemap and starts the child with
 * `--enable-source-maps`, so stack frames name the user's file (`component.ts`) with its own lines.
 */
const USER_FRAME = /component\.ts:(\d+):(\d+)/;

let replied = false;

function reply(message: DescribeReply): void {
  if (replied) return;
  replied = true;
  process.send?.(message);
}

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

async function describe(request: DescribeRequest): Promise<DescribeReply> {
  try {
    const module = (await import(pathToFileURL(request.bundlePath).href)) as { default?: unknown };
    // Let promise chains the module started at top level settle, so a failure there (an
    // un-awaited `import("node:fs").then(...)`) counts as a load failure rather than a race.
    await new Promise((resolve) => setImmediate(resolve));
    if (replied) return { ok: false, error: { message: "already failed" } };
    // CommonJS bundles show `module.exports` as the default export too (esbuild's ESM output).
    return { ok: true, description: describeComponent(module.default) };
  } catch (error) {
    return { ok: false, error: toLoadFailure(error) };
  }
}

function isDescribeRequest(message: unknown): message is DescribeRequest {
  const request = message as Partial<DescribeRequest> | null;
  return request?.kind === "describe" && typeof request.bundlePath === "string";
}

process.on("uncaughtException", (error) => reply({ ok: false, error: toLoadFailure(error) }));
process.on("unhandledRejection", (reason) => reply({ ok: false, error: toLoadFailure(reason) }));
process.on("disconnect", () => process.exit(0));
process.on("message", (message: unknown) => {
  if (!isDescribeRequest(message)) {
    reply({ ok: false, error: { message: "sandbox: unknown request" } });
    return;
  }
  void describe(message).then(reply);
});
