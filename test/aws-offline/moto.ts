/**
 * moto's server (`python3 -m moto.server`) on 127.0.0.1, and the stacks deployed into its
 * CloudFormation by `deploy.py` (boto3; the JavaScript CloudFormation client is not a dependency).
 * moto and boto3 must be installed: `pip install 'moto[server]==5.2.1' boto3`.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { eventually } from "../support/eventually.ts";
import type { CfnTemplate } from "./templates.ts";

const run = promisify(execFile);

/** The region and account moto answers for (its default account). */
export const MOTO_REGION = "us-east-1";
export const MOTO_ACCOUNT = "123456789012";

/** What the SDK clients of the tests and of the functions use against moto. */
export const MOTO_CREDENTIALS = { accessKeyId: "offline", secretAccessKey: "offline" };

export interface Moto {
  readonly endpoint: string;
  close(): void;
}

/** A free TCP port on 127.0.0.1 (free when asked; moto binds it right after). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

export async function startMoto(): Promise<Moto> {
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn("python3", ["-m", "moto.server", "-H", "127.0.0.1", "-p", String(port)], {
    // Lambda code stays in the CDK assets bucket, which is not in moto: the harness serves the
    // functions' bundles itself (invoker.ts), so moto need not find the zips.
    env: { ...process.env, VALIDATE_LAMBDA_S3: "false" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString("utf8")).slice(-8192);
  });
  let exited = false;
  child.on("exit", () => {
    exited = true;
  });
  await eventually(
    async () => {
      if (exited) throw new Error(`moto exited: ${stderr.trim() || "is it installed? pip install 'moto[server]'"}`);
      return fetch(`${endpoint}/moto-api/`).then(
        (response) => (response.ok ? true : undefined),
        () => undefined,
      );
    },
    "moto's server",
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  return { endpoint, close: () => child.kill() };
}

export interface DeployedResource {
  logicalId: string;
  physicalId: string;
  type: string;
  status: string;
  reason: string | null;
}

export interface DeployedStack {
  status: string;
  reason: string | null;
  outputs: Record<string, string>;
  resources: DeployedResource[];
}

/** Creates the stacks one after the other (as `cdk deploy --all`), each waited for. */
export async function deployStacks(
  moto: Moto,
  workDir: string,
  stacks: Record<string, CfnTemplate>,
): Promise<Record<string, DeployedStack>> {
  const args = Object.entries(stacks).map(([name, template]) => {
    const file = join(workDir, `${name}.template.json`);
    writeFileSync(file, JSON.stringify(template));
    return `${name}=${file}`;
  });
  const { stdout } = await run("python3", [join(import.meta.dirname, "deploy.py"), moto.endpoint, ...args], {
    maxBuffer: 64 * 1024 * 1024,
    timeout: 300_000,
  });
  return JSON.parse(stdout);
}
