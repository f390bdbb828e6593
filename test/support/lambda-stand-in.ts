/**
 * A stand-in for the Lambda service, for `LambdaComponentHost`: it answers the host's Lambda calls
 * (through `aws-sdk-client-mock`) by keeping the zips `prepare` uploads, unpacked as Lambda does,
 * and by running each Invoke in a fresh Node process on the real code, built as it is deployed:
 * the runtime layer (`runtime-layer/lambda-entry.ts`, bundled by the service stack's build) under
 * a source's or a workflow's entry and bundles, and the describer function.
 *
 * Each Invoke answers as Lambda's runtime interface client does: the handler's return value goes
 * through the process's `JSON.stringify` of the moment (which the component's code can replace, as
 * it can on Lambda), and a handler that throws gives a `FunctionError` with `errorType` and
 * `errorMessage`.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import {
  CreateFunctionCommand,
  DeleteFunctionCommand,
  GetFunctionCommand,
  InvokeCommand,
  LambdaClient,
  ResourceNotFoundException,
  UpdateFunctionCodeCommand,
  UpdateFunctionConfigurationCommand,
} from "@aws-sdk/client-lambda";
import { mockClient } from "aws-sdk-client-mock";
import { unzipSync } from "fflate";
import { RUNTIME_LAYER_MODULE } from "#adapters/aws/source-bundle";
import { bundleLambdaFiles } from "../../lib/constructs/esbuild-code.ts";
import { DESCRIBER_FILES, RUNTIME_LAYER_ENTRY, RUNTIME_LAYER_FILE } from "../../lib/constructs/source-compute.ts";
import { lambdaEnvironment } from "./lambda-process.ts";

export const DESCRIBER_FUNCTION = "sluice-standin-describer";

/**
 * The program of one Invoke: runs the handler exported by `handlerUrl` with the event read from
 * stdin, and writes the answer to `answerFile`: `result\n<JSON>` or `error\n<JSON of errorType
 * and errorMessage>`.
 */
const invoker = (handlerUrl: string, answerFile: string) => `
import { readFileSync, writeFileSync } from "node:fs";
const stringify = JSON.stringify;
const event = JSON.parse(readFileSync(0, "utf8"));
let answer;
try {
  const { handler } = await import(${JSON.stringify(handlerUrl)});
  const result = await handler(event, { awsRequestId: "stand-in", getRemainingTimeInMillis: () => 30000 });
  answer = "result\\n" + JSON.stringify(result);
} catch (error) {
  answer = "error\\n" + stringify({ errorType: error?.name ?? "Error", errorMessage: String(error?.message ?? error) });
}
writeFileSync(${JSON.stringify(answerFile)}, answer);
process.exit(0);`;

interface Deployed {
  readonly handlerFile: string;
  readonly sha256: string;
}

export interface LambdaStandIn {
  /** A Lambda client whose calls the stand-in answers. */
  readonly lambda: LambdaClient;
  close(): void;
}

/** Starts the stand-in: builds the runtime layer and the describer (about a second), mocks the client. */
export function startLambdaStandIn(): LambdaStandIn {
  const work = mkdtempSync(join(tmpdir(), "sluice-lambda-standin-"));
  bundleLambdaFiles({ [RUNTIME_LAYER_FILE]: RUNTIME_LAYER_ENTRY }, join(work, "opt"));
  const layerUrl = pathToFileURL(join(work, "opt", RUNTIME_LAYER_FILE)).href;
  bundleLambdaFiles(DESCRIBER_FILES, join(work, "describer"));
  const functions = new Map<string, Deployed>([
    [DESCRIBER_FUNCTION, { handlerFile: join(work, "describer", "index.mjs"), sha256: "" }],
  ]);

  /** Unpacks a source's or a workflow's zip as Lambda does, its entry pointed at the layer built here instead of /opt. */
  const unpack = (name: string, zip: Uint8Array): Deployed => {
    const task = join(work, "functions", name);
    rmSync(task, { recursive: true, force: true });
    for (const [file, bytes] of Object.entries(unzipSync(zip))) {
      mkdirSync(dirname(join(task, file)), { recursive: true });
      writeFileSync(join(task, file), bytes);
    }
    const handlerFile = join(task, "index.mjs");
    writeFileSync(handlerFile, readFileSync(handlerFile, "utf8").replace(RUNTIME_LAYER_MODULE, layerUrl));
    const deployed = { handlerFile, sha256: Buffer.from(sha256Of(zip), "hex").toString("base64") };
    functions.set(name, deployed);
    return deployed;
  };

  const mock = mockClient(LambdaClient);
  const notFound = () => new ResourceNotFoundException({ message: "Function not found", $metadata: {} });
  mock.on(GetFunctionCommand).callsFake(async (input: { FunctionName: string }) => {
    const deployed = functions.get(input.FunctionName);
    if (!deployed) throw notFound();
    return { Configuration: { State: "Active", LastUpdateStatus: "Successful", CodeSha256: deployed.sha256 } };
  });
  mock.on(CreateFunctionCommand).callsFake(async (input: { FunctionName: string; Code: { ZipFile: Uint8Array } }) => {
    unpack(input.FunctionName, input.Code.ZipFile);
    return {};
  });
  mock.on(UpdateFunctionCodeCommand).callsFake(async (input: { FunctionName: string; ZipFile: Uint8Array }) => {
    unpack(input.FunctionName, input.ZipFile);
    return {};
  });
  mock.on(UpdateFunctionConfigurationCommand).resolves({});
  mock.on(DeleteFunctionCommand).callsFake(async (input: { FunctionName: string }) => {
    if (!functions.delete(input.FunctionName)) throw notFound();
    return {};
  });
  mock.on(InvokeCommand).callsFake(async (input: { FunctionName: string; Payload: Uint8Array }) => {
    const deployed = functions.get(input.FunctionName);
    if (!deployed) throw notFound();
    const answer = await invoke(work, deployed.handlerFile, input.Payload, input.FunctionName);
    const newline = answer.indexOf("\n");
    const kind = answer.slice(0, newline);
    const Payload = new TextEncoder().encode(answer.slice(newline + 1));
    return kind === "result" ? { StatusCode: 200, Payload } : { StatusCode: 200, FunctionError: "Unhandled", Payload };
  });

  return {
    lambda: new LambdaClient({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } }),
    close() {
      mock.restore();
      rmSync(work, { recursive: true, force: true });
    },
  };
}

let invocations = 0;

export interface InvocationOptions {
  /** The Node binary. @default the test's own (`process.execPath`) */
  node?: string;
  /** The function's environment beside `PATH` and `AWS_LAMBDA_FUNCTION_NAME`. @default none */
  env?: Record<string, string>;
  /** @default the test's working directory */
  cwd?: string;
  /** @default 30 s */
  timeoutMs?: number;
  /** Receives what the process writes (stdout and stderr). @default - stdout is dropped */
  onOutput?: (text: string) => void;
}

/**
 * Runs one invocation of `handlerFile` in a fresh process with Lambda's environment of a function;
 * answers `result\n<JSON>` or `error\n<JSON of errorType and errorMessage>`.
 */
export function invoke(
  work: string,
  handlerFile: string,
  payload: Uint8Array,
  functionName: string,
  options: InvocationOptions = {},
): Promise<string> {
  const answerFile = join(work, `answer-${process.pid}-${++invocations}`);
  return new Promise((resolve, reject) => {
    const child = spawn(
      options.node ?? process.execPath,
      ["--input-type=module", "-e", invoker(pathToFileURL(handlerFile).href, answerFile)],
      {
        env: lambdaEnvironment(functionName, options.env),
        stdio: ["pipe", options.onOutput ? "pipe" : "ignore", "pipe"],
        timeout: options.timeoutMs ?? 30_000,
        ...(options.cwd ? { cwd: options.cwd } : {}),
      },
    );
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString("utf8")).slice(-4096);
      options.onOutput?.(chunk.toString("utf8"));
    });
    child.stdout?.on("data", (chunk: Buffer) => options.onOutput?.(chunk.toString("utf8")));
    child.on("error", reject);
    child.on("close", (code) => {
      try {
        resolve(readFileSync(answerFile, "utf8"));
        rmSync(answerFile, { force: true });
      } catch {
        const errorMessage = `Runtime exited with error: exit status ${code}: ${stderr.trim().split("\n").at(-1) ?? ""}`;
        resolve(`error\n${JSON.stringify({ errorType: "Runtime.ExitError", errorMessage })}`);
      }
    });
    child.stdin?.end(Buffer.from(payload));
  });
}

const sha256Of = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
