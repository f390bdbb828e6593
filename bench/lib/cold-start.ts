/**
 * The start-up cost of a Lambda bundle: a fresh Node process imports it and answers one request
 * (its composition loaded, the SDK clients of its parts among it; no AWS call made), then reports
 * its own CPU time (`process.cpuUsage()`, Node's own start included). Bare Node's start is measured
 * the same way, for reference.
 */
import { execFile } from "node:child_process";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";

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

/** The environment of a deployed function, with stand-in values: no call leaves the process. */
export const BENCH_LAMBDA_ENV = {
  AWS_REGION: "us-east-1",
  AWS_ACCESS_KEY_ID: "bench",
  AWS_SECRET_ACCESS_KEY: "bench",
  SLUICE_RESOURCES_TABLE: "sluice-bench-resources",
  SLUICE_LOG_LEVEL: "error",
};

async function cpuMsOf(script: string, env: Record<string, string>): Promise<{ cpuMs: number; status?: number }> {
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], {
    env: { PATH: process.env.PATH ?? "", ...env },
  });
  return JSON.parse(stdout.trimEnd().split("\n").at(-1) ?? "");
}

const REPORT = `const u = process.cpuUsage(); process.stdout.write("\\n" + JSON.stringify({ cpuMs: (u.user + u.system) / 1000, status }));`;

/** CPU ms of a fresh process that imports `bundle` and answers `event` with its `handler`. */
export function bundleStartupCpuMs(bundle: string, event: unknown = UNAUTHENTICATED_REQUEST) {
  const script = `
    const { handler } = await import(${JSON.stringify(pathToFileURL(bundle).href)});
    const result = await handler(${JSON.stringify(event)}, { awsRequestId: "bench", functionName: "bench" });
    const status = result?.statusCode;
    ${REPORT}`;
  return cpuMsOf(script, BENCH_LAMBDA_ENV);
}

/** CPU ms of a fresh process that does nothing. */
export async function bareNodeCpuMs(): Promise<number> {
  return (await cpuMsOf(`const status = undefined; ${REPORT}`, {})).cpuMs;
}
