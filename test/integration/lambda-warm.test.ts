/**
 * The warm Lambda environments of the offline harness (test/support/lambda-warm.ts): a function's
 * process imports its handler once and answers invocations in turn, as Lambda keeps a container.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type WarmFunctionSpec, type WarmFunctions, warmFunctions } from "../support/lambda-warm.ts";

/** Counts its invocations in module state; waits `event.waitMs`; throws when `event.fail`. */
const HANDLER = `
let invocations = 0;
console.log("init");
export const handler = async (event, context) => {
  invocations += 1;
  if (event.waitMs) await new Promise((resolve) => setTimeout(resolve, event.waitMs));
  if (event.fail) throw new TypeError("asked to fail");
  return {
    invocations,
    pid: process.pid,
    remaining: context.getRemainingTimeInMillis(),
    requestId: context.awsRequestId,
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    setting: process.env.SETTING,
    tmp: process.env.TMPDIR,
  };
};
`;

interface Answer {
  invocations: number;
  pid: number;
  remaining: number;
  requestId: string;
  functionName: string;
  setting: string;
  tmp: string;
}

describe("warm Lambda environments", () => {
  let work: string;
  let warm: WarmFunctions;
  let spec: WarmFunctionSpec;
  const output: string[] = [];

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), "sluice-warm-"));
    writeFileSync(join(work, "index.mjs"), HANDLER);
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  const start = () => {
    warm = warmFunctions(work);
    output.length = 0;
    spec = {
      functionName: "fn",
      handlerFile: join(work, "index.mjs"),
      version: "v1",
      node: process.execPath,
      env: { SETTING: "on" },
      cwd: work,
      timeoutMs: 5_000,
      onOutput: (text) => output.push(text),
    };
  };
  afterEach(() => warm.close());

  const call = async (event: unknown, options: Partial<WarmFunctionSpec> = {}) => {
    const answer = await warm.invoke({ ...spec, ...options }, Buffer.from(JSON.stringify(event)));
    const newline = answer.indexOf("\n");
    return { kind: answer.slice(0, newline), body: JSON.parse(answer.slice(newline + 1)) };
  };

  it("imports the handler once and answers invocations in turn from the same process, with Lambda's context", async () => {
    start();
    const answers: Answer[] = [];
    for (let index = 0; index < 3; index++) answers.push((await call({})).body as Answer);
    expect(answers.map((answer) => answer.invocations)).toEqual([1, 2, 3]);
    expect(new Set(answers.map((answer) => answer.pid)).size).toBe(1);
    expect(new Set(answers.map((answer) => answer.requestId)).size).toBe(3);
    for (const answer of answers) {
      expect(answer.remaining).toBeGreaterThan(3_000);
      expect(answer.remaining).toBeLessThanOrEqual(5_000);
      expect(answer).toMatchObject({ functionName: "fn", setting: "on", tmp: expect.stringContaining(work) });
    }
    expect(warm.starts.get("fn")).toBe(1);
    expect(warm.pids("fn")).toEqual([answers[0]?.pid]);
    expect(output.join("").match(/init/g)).toHaveLength(1);
  });

  it("answers a handler's error as Lambda's runtime does, and keeps the environment", async () => {
    start();
    expect(await call({ fail: true })).toEqual({
      kind: "error",
      body: { errorType: "TypeError", errorMessage: "asked to fail" },
    });
    expect((await call({})).body).toMatchObject({ invocations: 2 });
    expect(warm.starts.get("fn")).toBe(1);
  });

  it("starts a second environment only while the first is busy", async () => {
    start();
    const [slow, fast] = await Promise.all([call({ waitMs: 500 }), call({})]);
    expect((slow.body as Answer).pid).not.toBe((fast.body as Answer).pid);
    expect(warm.starts.get("fn")).toBe(2);
    expect((await call({})).body).toMatchObject({ invocations: 2 });
    expect(warm.starts.get("fn")).toBe(2);
  });

  it("ends an environment past the function's timeout; the next invocation starts a new one", async () => {
    start();
    const first = (await call({})).body as Answer;
    expect(await call({ waitMs: 60_000 }, { timeoutMs: 300 })).toEqual({
      kind: "error",
      body: { errorType: "Sandbox.Timedout", errorMessage: "Task timed out after 0.30 seconds" },
    });
    const next = (await call({})).body as Answer;
    expect(next.invocations).toBe(1);
    expect(next.pid).not.toBe(first.pid);
    expect(warm.starts.get("fn")).toBe(2);
  });

  it("starts a new environment for new code or settings and ends the old one", async () => {
    start();
    const first = (await call({})).body as Answer;
    const updated = (await call({}, { version: "v2", env: { SETTING: "changed" } })).body as Answer;
    expect(updated).toMatchObject({ invocations: 1, setting: "changed" });
    expect(updated.pid).not.toBe(first.pid);
    expect(warm.pids("fn")).toEqual([updated.pid]);
  });

  it("ends idle environments by closing their input, so that each exits on its own (a profile is written)", async () => {
    start();
    const profiles = mkdtempSync(join(work, "profiles-"));
    const { pid } = (await call({}, { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${profiles}`] })).body as Answer;
    await warm.endIdle();
    expect(warm.pids("fn")).toEqual([]);
    expect(
      readdirSync(profiles).filter((name) => name.includes(`.${pid}.`) && name.endsWith(".cpuprofile")),
    ).toHaveLength(1);
  });
});
