/**
 * The start-up cost of a Lambda bundle: a fresh Node process imports it and answers one request
 * (its composition loaded, the SDK clients of its parts among it; no AWS call made), then reports
 * its own CPU time (`process.cpuUsage()`, Node's own start included), run with the Node options the
 * stack gives the functions (`SLUICE_NODE_OPTIONS`, none today). Bare Node's start is measured the
 * same way, for reference, without them.
 */
import { execFile } from "node:child_process";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { SLUICE_NODE_OPTIONS } from "../../lib/constructs/sluice-function.ts";

const run = promisify(execFile);

/** An API Gateway (payload 2.0) request without credentials: answered 401 once the composition is built. */
export const UNAUTHENTICATED_REQUEST = {
  version: "2.0",
  routeKey: "$default",
  rawPath: "/v1/users/me",
  rawQueryString: "",
  headers: {},
  requestContext: { http: { method: "GET", path: "/v1/users/me" }, requestId: "bench" },
  isBase64Encoded: false,
};

/**
 * The environment of a deployed function, with stand-in values: no call leaves the process. Its
 * `NODE_OPTIONS` are the functions' own, so that the figure is what a function runs.
 */
export const BENCH_LAMBDA_ENV: Record<string, string> = {
  ...(SLUICE_NODE_OPTIONS.length > 0 ? { NODE_OPTIONS: SLUICE_NODE_OPTIONS.join(" ") } : {}),
  AWS_REGION: "us-east-1",
  AWS_ACCESS_KEY_ID: "bench",
  AWS_SECRET_ACCESS_KEY: "bench",
  SLUICE_RESOURCES_TABLE: "sluice-bench-resources",
  SLUICE_LOG_LEVEL: "error",
};

async function cpuMsOf(
  script: string,
  env: Record<string, string>,
  node: string,
): Promise<{ cpuMs: number; status?: number }> {
  const { stdout } = await run(node, ["--input-type=module", "-e", script], {
    env: { PATH: process.env.PATH ?? "", ...env },
  });
  return JSON.parse(stdout.trimEnd().split("\n").at(-1) ?? "");
}

const REPORT = `const u = process.cpuUsage(); process.stdout.write("\\n" + JSON.stringify({ cpuMs: (u.user + u.system) / 1000, status }));`;

/**
 * CPU ms of a fresh process of `node` (this process's Node by default) that imports `bundle` and
 * answers `event` with its `handler`.
 */
export function bundleStartupCpuMs(bundle: string, event: unknown = UNAUTHENTICATED_REQUEST, node = process.execPath) {
  const script = `
    const { handler } = await import(${JSON.stringify(pathToFileURL(bundle).href)});
    const result = await handler(${JSON.stringify(event)}, { awsRequestId: "bench", functionName: "bench" });
    const status = result?.statusCode;
    ${REPORT}`;
  return cpuMsOf(script, BENCH_LAMBDA_ENV, node);
}

/** CPU ms of a fresh process of `node` that does nothing. */
export async function bareNodeCpuMs(node = process.execPath): Promise<number> {
  return (await cpuMsOf(`const status = undefined; ${REPORT}`, {}, node)).cpuMs;
}
