/**
 * A local stand-in for Lambda's data plane, on 127.0.0.1, for the functions moto created: moto
 * keeps the functions (create, configuration, code, mappings) but cannot run them without Docker.
 *
 * The functions get this server as their Lambda endpoint (`AWS_ENDPOINT_URL_LAMBDA`):
 *
 * - `Invoke` (`POST /2015-03-31/functions/{name}/invocations`) runs the function here, each call
 *   in a fresh process of the Node binary given (Node 22, the stacks' runtime), or with `warm` in
 *   a process kept between calls as Lambda keeps an environment (`../support/lambda-warm.ts`), with the
 *   environment moto holds for the function and what Lambda adds (region, function name, the
 *   endpoints of moto and of this server as `AWS_ENDPOINT_URL*`). `Event` invocations answer 202
 *   and run afterwards, once, without Lambda's retries.
 * - `CreateFunction` and `UpdateFunctionCode` (source functions, which the API deploys) are
 *   forwarded to moto, and the zip they carry is kept and unpacked to be run, its entry pointed at
 *   the runtime layer built by the stack instead of `/opt`.
 * - every other call is forwarded to moto as it came.
 *
 * A function of the stack runs from its bundle (`cdk synth`'s asset directory, by function name);
 * a function with neither a bundle nor a kept zip fails the invocation, naming it.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { GetFunctionConfigurationCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { RUNTIME_LAYER_MODULE } from "#adapters/aws/source-bundle";
import { RUNTIME_LAYER_FILE } from "../../lib/constructs/source-compute.ts";
import { unpackFunction } from "../support/lambda-process.ts";
import { invoke } from "../support/lambda-stand-in.ts";
import { warmFunctions } from "../support/lambda-warm.ts";
import { MOTO_CREDENTIALS, MOTO_REGION } from "./moto.ts";

export interface LocalLambdaOptions {
  /** moto's endpoint. */
  moto: string;
  /** The Node binary functions run on. */
  node: string;
  /** Where kept zips are unpacked. */
  workDir: string;
  /** The bundle directory of each function of the stack, by function name. */
  bundles: ReadonlyMap<string, string>;
  /** The runtime layer's content (holding `nodejs/sluice-runtime.mjs`). */
  layerDir: string;
  /** Receives the functions' output, each line prefixed with the function's name. */
  log?: (line: string) => void;
  /** Variables every function also gets, over the stack's (settings the harness needs). */
  env?: Record<string, string>;
  /**
   * Keep each function's process between invocations, as Lambda keeps an execution environment
   * (`test/support/lambda-warm.ts`), instead of a fresh process per call. @default false
   */
  warm?: boolean;
  /** With `warm`: Node options of every environment (`--cpu-prof`, say). */
  warmNodeArgs?: readonly string[];
}

export interface InvocationRecord {
  functionName: string;
  /** When it started and ended (`performance.now()`), for timing what a request spent in it. */
  startedMs: number;
  endedMs?: number;
  type: "RequestResponse" | "Event";
  /** The handler's result as JSON, or its error's. */
  answer?: string;
  error?: boolean;
}

export interface ForwardedCall {
  method: string;
  path: string;
  startedMs: number;
  endedMs?: number;
}

export interface LocalLambda {
  /** Lambda's endpoint for the functions: `AWS_ENDPOINT_URL_LAMBDA`. */
  readonly endpoint: string;
  /** Every invocation so far, in the order they started. */
  readonly invocations: readonly InvocationRecord[];
  /** Every call forwarded to moto (create, update, read functions...), with when it started and ended (`performance.now()`). */
  readonly forwarded: readonly ForwardedCall[];
  /** With `warm`: execution environments started so far, by function name. */
  readonly environmentStarts: ReadonlyMap<string, number>;
  /** With `warm`: the process ids of a function's live environments. */
  environmentPids(functionName: string): number[];
  /** With `warm`: ends the idle environments, letting each exit on its own (a profile is written). */
  endEnvironments(): Promise<void>;
  /** Invokes a function as `Invoke` with `RequestResponse` does. */
  invoke(functionName: string, payload: unknown): Promise<{ result: unknown; functionError: boolean }>;
  /** Invokes a function as `Invoke` with `Event` does: runs it later, once, and answers nothing. */
  invokeAsync(functionName: string, payload: unknown): void;
  /** Resolves once no invocation runs (those queued by `Event` included). */
  idle(): Promise<void>;
  close(): Promise<void>;
}

const INVOKE_PATH = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/;
const CODE_PATH = /^\/2015-03-31\/functions\/([^/]+)\/code$/;

export async function startLocalLambda(options: LocalLambdaOptions): Promise<LocalLambda> {
  const lambda = new LambdaClient({ endpoint: options.moto, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
  const layerUrl = pathToFileURL(join(options.layerDir, RUNTIME_LAYER_FILE)).href;
  /** Handler files of the functions whose zips went through here, by name. */
  const deployed = new Map<string, string>();
  const invocations: InvocationRecord[] = [];
  const forwarded: ForwardedCall[] = [];
  const running = new Set<Promise<unknown>>();
  const warm = options.warm ? warmFunctions(options.workDir) : undefined;
  let endpoint = "";

  const keepZip = (name: string, zipBase64: string | undefined) => {
    if (zipBase64 === undefined) return;
    const task = join(options.workDir, "functions", name);
    mkdirSync(task, { recursive: true });
    const handlerFile = unpackFunction(Buffer.from(zipBase64, "base64"), task);
    writeFileSync(handlerFile, readFileSync(handlerFile, "utf8").replace(RUNTIME_LAYER_MODULE, layerUrl));
    deployed.set(name, handlerFile);
  };

  const run = async (nameOrArn: string, payload: Uint8Array, type: InvocationRecord["type"]) => {
    const record: InvocationRecord = { functionName: nameOrArn, type, startedMs: performance.now() };
    invocations.push(record);
    const configuration = await lambda.send(new GetFunctionConfigurationCommand({ FunctionName: nameOrArn }));
    const name = configuration.FunctionName ?? nameOrArn;
    record.functionName = name;
    const bundle = options.bundles.get(name);
    const handlerFile =
      deployed.get(name) ??
      (bundle ? join(bundle, `${(configuration.Handler ?? "index.handler").split(".")[0]}.mjs`) : undefined);
    if (!handlerFile) {
      record.error = true;
      record.answer = JSON.stringify({ errorType: "OfflineHarness", errorMessage: `no code to run for ${name}` });
      return { kind: "error", answer: record.answer };
    }
    const settings = {
      node: options.node,
      cwd: bundle ?? join(handlerFile, ".."),
      timeoutMs: (configuration.Timeout ?? 3) * 1000,
      env: {
        ...configuration.Environment?.Variables,
        AWS_REGION: MOTO_REGION,
        AWS_DEFAULT_REGION: MOTO_REGION,
        AWS_ACCESS_KEY_ID: MOTO_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: MOTO_CREDENTIALS.secretAccessKey,
        AWS_ENDPOINT_URL: options.moto,
        AWS_ENDPOINT_URL_LAMBDA: endpoint,
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(configuration.MemorySize ?? 128),
        AWS_LAMBDA_FUNCTION_VERSION: "$LATEST",
        AWS_EXECUTION_ENV: "AWS_Lambda_nodejs22.x",
        LAMBDA_TASK_ROOT: join(handlerFile, ".."),
        // Lambda's /tmp is the environment's own: here, the test run's temporary root, removed at its end.
        ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}),
        ...options.env,
      },
      onOutput: (text: string) => {
        for (const line of text.split("\n")) if (line.trim()) options.log?.(`${name}: ${line}`);
      },
    };
    const output = warm
      ? await warm.invoke(
          {
            ...settings,
            functionName: name,
            handlerFile,
            ...(options.warmNodeArgs ? { nodeArgs: options.warmNodeArgs } : {}),
            // New code or settings: Lambda starts new environments.
            version: `${configuration.CodeSha256}/${configuration.LastModified}`,
          },
          payload,
        )
      : await invoke(options.workDir, handlerFile, payload, name, settings);
    record.endedMs = performance.now();
    const newline = output.indexOf("\n");
    record.answer = output.slice(newline + 1);
    record.error = output.slice(0, newline) !== "result";
    return { kind: output.slice(0, newline), answer: record.answer };
  };

  const track = <T>(promise: Promise<T>): Promise<T> => {
    running.add(promise);
    const done = () => running.delete(promise);
    promise.then(done, done);
    return promise;
  };

  const forward = async (request: IncomingMessage, body: Buffer, response: ServerResponse) => {
    const call: ForwardedCall = { method: request.method ?? "", path: request.url ?? "", startedMs: performance.now() };
    forwarded.push(call);
    const headers = Object.fromEntries(
      Object.entries(request.headers).filter(([name]) => !["host", "content-length", "connection"].includes(name)),
    ) as Record<string, string>;
    const answer = await fetch(`${options.moto}${request.url}`, {
      method: request.method,
      headers,
      ...(body.length > 0 ? { body } : {}),
    });
    const answerHeaders: Record<string, string> = {};
    answer.headers.forEach((value, name) => {
      if (!["content-length", "transfer-encoding", "connection", "content-encoding"].includes(name))
        answerHeaders[name] = value;
    });
    const answerBody = Buffer.from(await answer.arrayBuffer());
    call.endedMs = performance.now();
    response.writeHead(answer.status, answerHeaders);
    response.end(answerBody);
  };

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const path = new URL(request.url ?? "/", "http://x").pathname;
    const invoked = request.method === "POST" ? INVOKE_PATH.exec(path) : null;
    if (invoked) {
      const name = decodeURIComponent(invoked[1] ?? "");
      if (request.headers["x-amz-invocation-type"] === "Event") {
        track(run(name, body, "Event"));
        response.writeHead(202).end();
        return;
      }
      const { kind, answer } = await track(run(name, body, "RequestResponse"));
      response.writeHead(200, {
        "content-type": "application/json",
        "x-amz-executed-version": "$LATEST",
        ...(kind === "result" ? {} : { "x-amz-function-error": "Unhandled" }),
      });
      response.end(answer);
      return;
    }
    if (request.method === "POST" && path === "/2015-03-31/functions") {
      const input = JSON.parse(body.toString("utf8")) as { FunctionName: string; Code?: { ZipFile?: string } };
      keepZip(input.FunctionName, input.Code?.ZipFile);
    }
    const code = request.method === "PUT" ? CODE_PATH.exec(path) : null;
    if (code)
      keepZip(decodeURIComponent(code[1] ?? ""), (JSON.parse(body.toString("utf8")) as { ZipFile?: string }).ZipFile);
    await forward(request, body, response);
  };

  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      options.log?.(`local lambda: ${String((error as Error)?.stack ?? error)}`);
      if (!response.headersSent) response.writeHead(500, { "content-type": "application/json" });
      response.end(JSON.stringify({ message: String(error) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  endpoint = `http://127.0.0.1:${address.port}`;

  return {
    endpoint,
    invocations,
    forwarded,
    environmentStarts: warm?.starts ?? new Map(),
    environmentPids: (functionName) => warm?.pids(functionName) ?? [],
    endEnvironments: async () => warm?.endIdle(),
    async invoke(functionName, payload) {
      const { kind, answer } = await track(run(functionName, Buffer.from(JSON.stringify(payload)), "RequestResponse"));
      return { result: JSON.parse(answer), functionError: kind !== "result" };
    },
    invokeAsync(functionName, payload) {
      track(run(functionName, Buffer.from(JSON.stringify(payload)), "Event"));
    },
    async idle() {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
    async close() {
      warm?.close();
      await new Promise((resolve) => server.close(resolve));
      lambda.destroy();
    },
  };
}
