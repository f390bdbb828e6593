/**
 * Warm Lambda execution environments for the offline harness: one Node process per environment
 * that imports the handler once and then answers invocations one after the other, as Lambda's
 * runtime keeps a container between requests (module state, clients, `/tmp` and caches survive).
 * A function gets a second environment only while its first is busy, as Lambda scales; an
 * invocation past the function's timeout ends its environment (the next one starts cold).
 *
 * Answers have the shape of `invoke` of `lambda-stand-in.ts` (`result\n<JSON>` or
 * `error\n<JSON of errorType and errorMessage>`), so a caller can run either way. Requests go to the
 * process as JSON lines on stdin, answers come back as JSON lines on file descriptor 3, so that
 * what the handler writes to stdout and stderr stays its log.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

/**
 * The runtime loop of one environment: imports the handler (an error there fails every invocation,
 * as a failed init does on Lambda), then answers each request line with the handler's result
 * through the `JSON.stringify` of the moment, or its error.
 */
const runtimeLoop = (handlerUrl: string) => `
import { createWriteStream } from "node:fs";
import { createInterface } from "node:readline";
const stringify = JSON.stringify;
const answers = createWriteStream(null, { fd: 3 });
let handler;
let initError;
try {
  ({ handler } = await import(${JSON.stringify(handlerUrl)}));
} catch (error) {
  initError = error;
}
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  const request = JSON.parse(line);
  let answer;
  try {
    if (initError) throw initError;
    const result = await handler(request.event, {
      awsRequestId: request.id,
      functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
      getRemainingTimeInMillis: () => Math.max(0, request.deadline - Date.now()),
    });
    answer = "result\\n" + (JSON.stringify(result) ?? "null");
  } catch (error) {
    answer = "error\\n" + stringify({ errorType: error?.name ?? "Error", errorMessage: String(error?.message ?? error) });
  }
  answers.write(stringify({ id: request.id, answer }) + "\\n");
}
// Input closed: the harness ends the environment (a --cpu-prof profile is written at exit).
answers.end(() => process.exit(0));`;

export interface WarmFunctionSpec {
  /** The function's name (`AWS_LAMBDA_FUNCTION_NAME`). */
  functionName: string;
  /** The handler's module: `<file>` exporting `handler`. */
  handlerFile: string;
  /**
   * What the environments' code is: when it changes (new code or configuration), the function's
   * environments are ended and the next invocation starts a new one, as Lambda does.
   */
  version: string;
  /** The Node binary. */
  node: string;
  /** Options for it before the runtime loop (`--cpu-prof`, say). @default none */
  nodeArgs?: readonly string[];
  /** The environment beside `PATH`, `AWS_LAMBDA_FUNCTION_NAME` and `TMPDIR`. */
  env: Record<string, string>;
  cwd: string;
  timeoutMs: number;
  /** Receives what the process writes (stdout and stderr). */
  onOutput?: (text: string) => void;
}

export interface WarmFunctions {
  /** Runs one invocation in an idle environment of the function, or in a new one. */
  invoke(spec: WarmFunctionSpec, payload: Uint8Array): Promise<string>;
  /** Environments started so far, by function name (each start is a cold start). */
  readonly starts: ReadonlyMap<string, number>;
  /** The process ids of the function's live environments. */
  pids(functionName: string): number[];
  /** Ends every idle environment as Lambda's runtime would see its input close, waiting up to 10 s for each to exit. */
  endIdle(): Promise<void>;
  /** Ends every environment. */
  close(): void;
}

interface Environment {
  readonly child: ChildProcess;
  readonly version: string;
  busy: boolean;
  ended: boolean;
  /** The invocation in progress. */
  pending?: { id: string; resolve: (answer: string) => void };
  stderr: string;
}

/**
 * Warm environments kept under `workDir`: each gets its own `TMPDIR` there, as each Lambda
 * environment has its own `/tmp`.
 */
export function warmFunctions(workDir: string): WarmFunctions {
  const environments = new Map<string, Environment[]>();
  const starts = new Map<string, number>();
  let requests = 0;

  const end = (environment: Environment, answer: string) => {
    environment.ended = true;
    environment.child.kill("SIGKILL");
    const pending = environment.pending;
    environment.pending = undefined;
    pending?.resolve(answer);
  };

  const start = (spec: WarmFunctionSpec): Environment => {
    const count = (starts.get(spec.functionName) ?? 0) + 1;
    starts.set(spec.functionName, count);
    mkdirSync(join(workDir, "tmp"), { recursive: true });
    const tmp = mkdtempSync(join(workDir, "tmp", `${spec.functionName.slice(0, 60)}-${count}-`));
    const loop = runtimeLoop(pathToFileURL(spec.handlerFile).href);
    const child = spawn(spec.node, [...(spec.nodeArgs ?? []), "--input-type=module", "-e", loop], {
      env: {
        PATH: process.env.PATH ?? "",
        AWS_LAMBDA_FUNCTION_NAME: spec.functionName,
        ...spec.env,
        TMPDIR: tmp,
      },
      cwd: spec.cwd,
      stdio: ["pipe", spec.onOutput ? "pipe" : "ignore", "pipe", "pipe"],
    });
    const environment: Environment = { child, version: spec.version, busy: false, ended: false, stderr: "" };
    child.stdout?.on("data", (chunk: Buffer) => spec.onOutput?.(chunk.toString("utf8")));
    child.stderr?.on("data", (chunk: Buffer) => {
      environment.stderr = (environment.stderr + chunk.toString("utf8")).slice(-4096);
      spec.onOutput?.(chunk.toString("utf8"));
    });
    const answers = child.stdio[3];
    if (!answers || !("on" in answers)) throw new Error("no answer pipe");
    createInterface({ input: answers as NodeJS.ReadableStream }).on("line", (line) => {
      const { id, answer } = JSON.parse(line) as { id: string; answer: string };
      const pending = environment.pending;
      if (pending?.id !== id) return;
      environment.pending = undefined;
      pending.resolve(answer);
    });
    child.stdin?.on("error", () => {});
    child.on("error", () => {});
    child.on("close", (code) => {
      const errorMessage = `Runtime exited with error: exit status ${code}: ${environment.stderr.trim().split("\n").at(-1) ?? ""}`;
      end(environment, `error\n${JSON.stringify({ errorType: "Runtime.ExitError", errorMessage })}`);
    });
    return environment;
  };

  return {
    starts,
    pids: (functionName) =>
      (environments.get(functionName) ?? []).flatMap((environment) =>
        !environment.ended && environment.child.pid !== undefined ? [environment.child.pid] : [],
      ),
    invoke(spec, payload) {
      const kept = (environments.get(spec.functionName) ?? []).filter((environment) => {
        const current = !environment.ended && environment.version === spec.version;
        if (!current && !environment.busy) end(environment, "");
        return current || environment.busy;
      });
      environments.set(spec.functionName, kept);
      let environment = kept.find((candidate) => !candidate.busy && candidate.version === spec.version);
      if (!environment) {
        environment = start(spec);
        kept.push(environment);
      }
      const chosen = environment;
      chosen.busy = true;
      const id = `warm-${process.pid}-${++requests}`;
      return new Promise<string>((resolve) => {
        const timer = setTimeout(() => {
          const errorMessage = `Task timed out after ${(spec.timeoutMs / 1000).toFixed(2)} seconds`;
          end(chosen, `error\n${JSON.stringify({ errorType: "Sandbox.Timedout", errorMessage })}`);
        }, spec.timeoutMs);
        chosen.pending = {
          id,
          resolve: (answer) => {
            clearTimeout(timer);
            chosen.busy = false;
            resolve(answer);
          },
        };
        const event = JSON.parse(Buffer.from(payload).toString("utf8") || "null") as unknown;
        chosen.child.stdin?.write(`${JSON.stringify({ id, deadline: Date.now() + spec.timeoutMs, event })}\n`);
      });
    },
    async endIdle() {
      const exits: Promise<unknown>[] = [];
      for (const list of environments.values()) {
        for (const environment of list) {
          if (environment.ended || environment.busy) continue;
          const { child } = environment;
          environment.ended = true;
          if (child.exitCode !== null || child.signalCode !== null) continue;
          exits.push(
            new Promise<void>((resolve) => {
              const timer = setTimeout(() => {
                child.kill("SIGKILL");
                resolve();
              }, 10_000);
              child.once("close", () => {
                clearTimeout(timer);
                resolve();
              });
              child.stdin?.end();
            }),
          );
        }
      }
      await Promise.all(exits);
    },
    close() {
      const closed = `error\n${JSON.stringify({ errorType: "Runtime.ExitError", errorMessage: "the harness ended the environment" })}`;
      for (const list of environments.values()) for (const environment of list) end(environment, closed);
      environments.clear();
    },
  };
}
