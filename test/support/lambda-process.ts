/**
 * Runs Lambda code Sluice deploys in plain Node processes, as Lambda would: a function's zip
 * unpacked into a folder (its entry importing the runtime layer built into `<work>/opt`, not
 * `/opt`), and its handler called with Lambda-shaped events in a fresh process whose environment
 * holds only what Lambda puts there. For the bundle tests of sources and workflows.
 */
import { execFile } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { unzipSync } from "fflate";
import { bundleLambdaFiles } from "../../lib/constructs/esbuild-code.ts";
import { RUNTIME_LAYER_ENTRY, RUNTIME_LAYER_FILE } from "../../lib/constructs/source-compute.ts";

const run = promisify(execFile);

/** Builds the runtime layer as the stack does, under `<work>/opt`; answers the URL entries import it by. */
export function buildRuntimeLayer(work: string): string {
  bundleLambdaFiles({ [RUNTIME_LAYER_FILE]: RUNTIME_LAYER_ENTRY }, join(work, "opt"));
  return pathToFileURL(join(work, "opt", RUNTIME_LAYER_FILE)).href;
}

/** Unpacks a function's zip into `task`, as Lambda does into /var/task; answers its handler's file. */
export function unpackFunction(zip: Uint8Array, task: string): string {
  for (const [file, bytes] of Object.entries(unzipSync(zip))) {
    mkdirSync(dirname(join(task, file)), { recursive: true });
    writeFileSync(join(task, file), bytes);
  }
  return join(task, "index.mjs");
}

/**
 * What Lambda puts in a function's environment, as the test stand-ins give it: `PATH`, the
 * function's name, `env`, and as its `/tmp` the test run's temporary root (`TMPDIR`, from
 * test/support/temp-root.ts), so what the function writes there goes with the run.
 */
export const lambdaEnvironment = (functionName: string, env: Record<string, string> = {}) => ({
  PATH: process.env.PATH ?? "",
  AWS_LAMBDA_FUNCTION_NAME: functionName,
  ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}),
  ...env,
});

/**
 * Imports the handler in a fresh Node process, with only what Lambda puts in a function's
 * environment (its name, and `env`), calls it with each event in turn and answers the results. A
 * rejected call gives `{ thrown: message }`, as Lambda's runtime client catches it and answers a
 * function error.
 */
export async function invokeInProcess(
  handlerFile: string,
  events: unknown[],
  options: { functionName: string; env?: Record<string, string> },
): Promise<unknown[]> {
  const script = `
    const { handler } = await import(${JSON.stringify(pathToFileURL(handlerFile).href)});
    const results = [];
    for (const event of ${JSON.stringify(events)}) {
      try {
        results.push(await handler(event, { awsRequestId: "e2e" }));
      } catch (error) {
        results.push({ thrown: String(error?.message ?? error) });
      }
    }
    process.stdout.write("\\n" + JSON.stringify(results));
    process.exit(0);`;
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], {
    env: lambdaEnvironment(options.functionName, options.env),
    timeout: 20_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(stdout.trimEnd().split("\n").at(-1) ?? "[]") as unknown[];
}
