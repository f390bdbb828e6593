import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { getPriority, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessPoolHost } from "#adapters/local/process-pool-host";
import { packComponentFiles } from "#core/component-files";
import type { SourceCode } from "#core/ports/component-host";
import type { HttpResponseSpec, Invocation, InvocationResult, Json } from "#runtime/protocol";
import { isAlive, realPathForChild, runInvocation, sourceCode, withPoolHost } from "../support/pool-host.ts";

// Real child processes under Node's permission model: nothing here is mocked.
let workDir: string;
let host: ProcessPoolHost;

beforeAll(() => {
  workDir = mkdtempSync(join(tmpdir(), "sluice-pool-"));
  host = new ProcessPoolHost({ workDir, heapMb: 64 });
});

afterAll(async () => {
  await host.close();
  rmSync(workDir, { recursive: true, force: true });
});

const source = sourceCode;
const invocation = runInvocation;

async function run(code: SourceCode, overrides: Partial<Invocation> = {}): Promise<InvocationResult> {
  return host.invoke(code, invocation(code.sourceId, overrides));
}

const events = (result: InvocationResult): Json[] => result.emits.map((emit) => emit.event);

/** What trusted code sends for a `$.interface.http` prop with `customResponse: true`. */
const CUSTOM_RESPONSE_PROPS: Partial<Invocation> = {
  props: { http: { endpoint: "https://e.test", customResponse: true } },
  propTypes: { http: "$.interface.http" },
};

/** Emits `{pid, source}` from the child it runs in. */
const PID_COMPONENT = `export default {
  async run() { this.$emit({ pid: process.pid, source: process.env.PD_COMPONENT }); },
};`;

async function pidOf(code: SourceCode): Promise<number> {
  const result = await run(code);
  expect(result.error).toBeUndefined();
  return (events(result)[0] as { pid: number }).pid;
}

const SLOW_PID = `export default { async run() {
  await new Promise((resolve) => setTimeout(resolve, 100));
  this.$emit({ pid: process.pid });
} };`;
const pidIn = (result: InvocationResult) => (events(result)[0] as { pid: number } | undefined)?.pid;

/**
 * A server on 127.0.0.1 whose requests are held until `open()`, then answered at once: code that
 * fetches its URL stays in flight exactly as long as the test needs, and no longer.
 */
async function startGate(): Promise<{ url: string; open(): void; close(): void }> {
  let opened = false;
  const held: (() => void)[] = [];
  const gate = createServer((_request, response) => {
    if (opened) response.end("go");
    else held.push(() => response.end("go"));
  });
  await new Promise<void>((resolve) => gate.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(gate.address() as AddressInfo).port}/`,
    open() {
      opened = true;
      for (const answer of held.splice(0)) answer();
    },
    close() {
      gate.closeAllConnections();
      gate.close();
    },
  };
}

describe("ProcessPoolHost: running components", () => {
  it("describes code in a short-lived child", async () => {
    const description = await host.describe('export default { name: "Described", props: { db: "$.service.db" } };');
    expect(description).toMatchObject({ name: "Described", props: [{ name: "db", type: "$.service.db" }] });
  });

  it("runs an ES module component with its props, db and PD_COMPONENT", async () => {
    const code = source(
      "dc_esm",
      `export default {
        props: { name: "string", db: "$.service.db" },
        methods: { greet() { return "hello " + this.name; } },
        async run(event) {
          console.log("count was", this.db.get("count"));
          this.db.set("count", (this.db.get("count") ?? 0) + 1);
          this.$emit({ greeting: this.greet(), event, source: process.env.PD_COMPONENT }, { id: "e1", summary: "hi" });
        },
      };`,
    );
    const result = await run(code, {
      props: { name: "sluice" },
      propTypes: { name: "string", db: "$.service.db" },
      db: { count: 41 },
      event: { n: 1 },
    });
    expect(result.error).toBeUndefined();
    expect(result.emits).toEqual([
      { event: { greeting: "hello sluice", event: { n: 1 }, source: "dc_esm" }, meta: { id: "e1", summary: "hi" } },
    ]);
    expect(result.dbWrites).toEqual({ count: 42 });
    expect(result.logs).toMatchObject([{ level: "log", message: "count was 41" }]);
  });

  it("runs a CommonJS component that requires a built-in module", async () => {
    const code = source(
      "dc_cjs",
      `const { format } = require("node:util");
      module.exports = { async run() { this.$emit(format("%s-%d", "cjs", 7)); } };`,
    );
    expect(events(await run(code))).toEqual(["cjs-7"]);
  });

  it("runs a TypeScript component", async () => {
    const code = source(
      "dc_ts",
      `interface Payload { doubled: number }
      const double = (n: number): Payload => ({ doubled: n * 2 });
      export default { async run(this: { $emit(e: unknown): void }, event: { n: number }): Promise<void> {
        this.$emit(double(event.n));
      } };`,
    );
    expect(events(await run(code, { event: { n: 21 } }))).toEqual([{ doubled: 42 }]);
  });

  it("reports a module that throws while loading, with the user's line", async () => {
    const code = source("dc_load", 'const ok = 1;\nthrow new Error("top level");\nexport default {};\n');
    const result = await run(code);
    expect(result.error?.name).toBe("LoadError");
    expect(result.error?.message).toContain("top level");
    expect(result.error?.message).toContain("line 2");
  });

  it("reports a compile error as the run's error", async () => {
    const result = await run(source("dc_compile", "export default {"));
    expect(result.error?.name).toBe("CompileError");
    expect(result.error?.message).toContain("component_code");
  });

  it("gives the component an empty environment besides PD_COMPONENT", async () => {
    const code = source("dc_env", "export default { run() { this.$emit(Object.keys(process.env)); } };");
    expect(events(await run(code))).toEqual([["PD_COMPONENT"]]);
  });

  it("sends respond to onRespond while the run is still going", async () => {
    const gate = await startGate();
    const code = source(
      "dc_respond",
      `export default {
        props: { http: { type: "$.interface.http", customResponse: true } },
        async run() {
          this.http.respond({ status: "202", body: { accepted: true } });
          await (await fetch("${gate.url}")).text();
          this.$emit("done");
        },
      };`,
    );
    const responses: HttpResponseSpec[] = [];
    let settled = false;
    const running = host
      .invoke(code, invocation(code.sourceId, CUSTOM_RESPONSE_PROPS), {
        onRespond: (response) => responses.push(response),
      })
      .finally(() => {
        settled = true;
      });
    await expect.poll(() => responses.length, { timeout: 10_000 }).toBe(1);
    // The run holds on the gate until it is opened: the answer came while it was going.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(settled).toBe(false);
    gate.open();
    const result = await running.finally(() => gate.close());
    const expected = { status: 202, headers: { "content-type": "application/json" }, body: '{"accepted":true}' };
    expect(responses).toEqual([expected]);
    expect(result.response).toEqual(expected);
    expect(events(result)).toEqual(["done"]);
  });

  it("fails the run on a malformed respond message: nothing is handed over or applied", async () => {
    // Code in the child can write to the host's channel itself; the host must not trust what comes over it.
    const code = source(
      "dc_forged_respond",
      `import { writeSync } from "node:fs";
      const send = (message) => writeSync(4, JSON.stringify(message) + "\\n");
      export default {
        props: { http: { type: "$.interface.http", customResponse: true } },
        async run() {
          this.$emit("real");
          send({ type: "respond", invocationId: "inv_forged_respond", response: { status: 42, headers: {}, body: "" } });
          this.http.respond({ status: 201, body: "real" });
        },
      };`,
    );
    const responses: HttpResponseSpec[] = [];
    const result = await host.invoke(
      code,
      invocation(code.sourceId, { ...CUSTOM_RESPONSE_PROPS, invocationId: "inv_forged_respond" }),
      { onRespond: (response) => responses.push(response) },
    );
    expect(responses).toEqual([]);
    expect(result).toEqual({
      invocationId: "inv_forged_respond",
      emits: [],
      dbWrites: {},
      logs: [],
      error: {
        name: "SandboxError",
        message: expect.stringContaining("malformed response (response.status must be an integer from 200 to 599)"),
        ts: expect.any(Number),
      },
      durationMs: expect.any(Number),
    });
  });

  it("keeps the response given with respond as the run's response, whatever a result says later", async () => {
    const code = source(
      "dc_forged_later",
      `import { writeSync } from "node:fs";
      const send = (message) => writeSync(4, JSON.stringify(message) + "\\n");
      export default {
        props: { http: { type: "$.interface.http", customResponse: true } },
        async run() {
          this.http.respond({ status: 201, body: "real" });
          send({ type: "result", result: {
            invocationId: "inv_forged_later", emits: [], dbWrites: {}, logs: [], durationMs: 1,
            response: { status: 500, headers: {}, body: "forged" },
          } });
        },
      };`,
    );
    const responses: HttpResponseSpec[] = [];
    const result = await host.invoke(
      code,
      invocation(code.sourceId, { ...CUSTOM_RESPONSE_PROPS, invocationId: "inv_forged_later" }),
      { onRespond: (response) => responses.push(response) },
    );
    const real = { status: 201, headers: {}, body: "real" };
    expect(responses).toEqual([real]);
    expect(result.response).toEqual(real);
    expect(result.error).toBeUndefined();
  });

  it("blames an uncaught asynchronous error on its invocation and keeps serving the others", async () => {
    // Two versions of one source: both run in its process.
    const failing = source(
      "dc_stray",
      `export default { async run() {
        setTimeout(() => { throw new Error("late boom"); }, 10);
        await new Promise((resolve) => setTimeout(resolve, 5000));
      } };`,
    );
    const healthy = source("dc_stray", PID_COMPONENT);
    const pid = await pidOf(healthy);
    const [failed, fine] = await Promise.all([run(failing), run(healthy)]);
    expect(failed.error).toMatchObject({ name: "Error", message: "late boom" });
    expect(fine.error).toBeUndefined();
    expect(await pidOf(healthy)).toBe(pid);
  });

  it("answers every invocation of one tick with its own result, across sources, props and logs", async () => {
    // Invocations sent in one tick travel to a child as one write, and its answers come back batched.
    const echo = (sourceId: string) =>
      source(
        sourceId,
        `export default { props: { tag: "string" }, async run(event) {
          console.log("run", event.n);
          this.$emit({ tag: this.tag, n: event.n, source: process.env.PD_COMPONENT });
        } };`,
      );
    const sources = [echo("dc_batch_a"), echo("dc_batch_b"), echo("dc_batch_c")];
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, n) => {
        const code = sources[n % 3] as SourceCode;
        return run(code, { props: { tag: `t${n}` }, propTypes: { tag: "string" }, event: { n } });
      }),
    );
    results.forEach((result, n) => {
      expect(result.error).toBeUndefined();
      expect(events(result)).toEqual([{ tag: `t${n}`, n, source: `dc_batch_${"abc"[n % 3]}` }]);
      expect(result.logs).toMatchObject([{ level: "log", message: `run ${n}` }]);
    });
  });
});

describe("ProcessPoolHost: isolation", () => {
  it("runs every source in a process of its own, two sources of one owner too", async () => {
    const first = await pidOf(source("dc_iso_1", PID_COMPONENT, "o_iso_a"));
    const sameOwner = await pidOf(source("dc_iso_2", PID_COMPONENT, "o_iso_a"));
    const otherOwner = await pidOf(source("dc_iso_3", PID_COMPONENT, "o_iso_b"));
    expect(new Set([first, sameOwner, otherOwner]).size).toBe(3);
    // A source's next run (and a new version of its code) goes to its own process again.
    expect(await pidOf(source("dc_iso_1", `${PID_COMPONENT}\n// version 2`, "o_iso_a"))).toBe(first);
    expect(host.pidOf("dc_iso_1")).toBe(first);
  });

  it("denies writing files outside its /tmp", async () => {
    const target = join(workDir, "written-by-component.txt");
    const code = source(
      "dc_fs",
      `import { writeFileSync } from "node:fs";
      export default { run() {
        try { writeFileSync(${JSON.stringify(realPathForChild(target))}, "x"); this.$emit("written"); }
        catch (error) { this.$emit(error.code); }
      } };`,
    );
    expect(events(await run(code))).toEqual(["ERR_ACCESS_DENIED"]);
    expect(existsSync(target)).toBe(false);
  });

  it("refuses signals to any process but its own: not Sluice, not its process group", async () => {
    // Signal 0 only checks that the target exists, so a regression would not kill this test.
    const code = source(
      "dc_signal",
      `export default { run() {
        for (const pid of [process.ppid, 0, -process.ppid]) {
          try { process.kill(pid, 0); this.$emit("sent"); } catch (error) { this.$emit(error.code); }
        }
        this.$emit(process.kill(process.pid, 0));
      } };`,
    );
    expect(events(await run(code))).toEqual(["EPERM", "EPERM", "EPERM", true]);
  });

  it("denies reading another source's bundle, even one whose id extends this source's, and the shared builds", async () => {
    const other = source("dc_peek2", "export default { run() {} };");
    await host.prepare(other);
    const bundle = join(workDir, "sources", "dc_peek2", other.codeHash, "component.mjs");
    const build = join(workDir, "describe", other.codeHash, "component.mjs");
    expect([existsSync(bundle), existsSync(build)]).toEqual([true, true]);
    const code = source(
      "dc_peek",
      `import { readFileSync } from "node:fs";
      export default { run() {
        for (const path of ${JSON.stringify([bundle, build].map(realPathForChild))}) {
          try { readFileSync(path); this.$emit("read"); }
          catch (error) { this.$emit(error.code); }
        }
      } };`,
    );
    expect(events(await run(code))).toEqual(["ERR_ACCESS_DENIED", "ERR_ACCESS_DENIED"]);
  });
});

describe("ProcessPoolHost: failures", () => {
  it("kills an endless loop with a TimeoutError, runs its neighbours again elsewhere, other sources keep answering", async () => {
    // Versions of one source, so that they share its process.
    const looping = source("dc_loop", "export default { run() { while (true) {} } };");
    // It waits on the gate, opened once the loop is judged: still in flight when its process is killed.
    const gate = await startGate();
    const waiting = source(
      "dc_loop",
      `export default { async run() {
        await (await fetch("${gate.url}")).text();
        this.$emit({ pid: process.pid });
      } };`,
    );
    const neighbour = source("dc_loop_neighbour", PID_COMPONENT);
    const healthy = source("dc_loop", PID_COMPONENT);
    const before = await pidOf(healthy);

    const waited = run(waiting, { timeoutMs: 20_000 });
    const looped = run(looping, { timeoutMs: 500 });
    // The neighbour answers while the loop still blocks its own process.
    const neighbourResult = await run(neighbour);
    expect(neighbourResult.error).toBeUndefined();

    const loopResult = await looped;
    gate.open();
    const waitResult = await waited.finally(() => gate.close());
    expect(loopResult.error?.name).toBe("TimeoutError");
    expect(loopResult.error?.message).toContain("0.5s");
    // The waiting run shared the blocked process: it ran again in another one, and succeeded.
    expect(waitResult.error).toBeUndefined();
    expect((events(waitResult)[0] as { pid: number }).pid).not.toBe(before);
    await expect.poll(() => isAlive(before), { timeout: 10_000 }).toBe(false);

    const after = await pidOf(healthy);
    expect(after).not.toBe(before);
  });

  it("reports running out of memory, and the next invocation works", async () => {
    const hoarding = source(
      "dc_oom",
      "export default { run() { const hoard = []; while (true) hoard.push(new Array(1e6).fill(1)); } };",
    );
    const result = await run(hoarding, { timeoutMs: 25_000 });
    expect(result.error?.message).toMatch(/memory/);
    expect(events(await run(source("dc_oom", PID_COMPONENT)))).toHaveLength(1);
  });

  it("reports process.exit as an error, and the next invocation works", async () => {
    const exiting = source("dc_exit", "export default { run() { process.exit(1); } };");
    const result = await run(exiting);
    expect(result.error?.name).toBe("SandboxCrashError");
    expect(result.error?.message).toContain("exited with code 1");
    expect(events(await run(source("dc_exit", PID_COMPONENT)))).toHaveLength(1);
  });
});

describe("ProcessPoolHost: the pool of a source", () => {
  it("spreads one source's concurrent runs over at most `processes` children, never another source's", async () => {
    await withPoolHost({ processes: 2 }, async (own) => {
      const code = source("dc_spread", SLOW_PID);
      const results = await Promise.all(Array.from({ length: 30 }, () => own.invoke(code, invocation(code.sourceId))));
      expect(results.map((result) => result.error)).toEqual(Array(30).fill(undefined));
      const pids = new Set(results.map(pidIn));
      expect(pids.size).toBe(2);
      expect(own.pidsOf("dc_spread").sort()).toEqual([...pids].sort());

      const other = source("dc_spread_other", SLOW_PID);
      const otherPid = pidIn(await own.invoke(other, invocation(other.sourceId)));
      expect(pids.has(otherPid as number)).toBe(false);
    });
  });

  it("loads new code in a fresh child once the bundles a child was given fill its share of the heap", async () => {
    // 32 MiB heaps: a child is given 2 MiB of bundles at most; each version here is 1.2 MB.
    await withPoolHost({ heapMb: 32 }, async (own) => {
      const large = (n: number) =>
        source(
          "dc_versions",
          `const padding = "${String(n).repeat(1_200_000)}";\nexport default { run() { this.$emit({ pid: process.pid, n: padding.length }); } };`,
        );
      const first = pidIn(await own.invoke(large(1), invocation("dc_versions")));
      const second = pidIn(await own.invoke(large(2), invocation("dc_versions")));
      expect(first).toBeDefined();
      expect(second).not.toBe(first);
      await expect.poll(() => isAlive(first as number), { timeout: 10_000 }).toBe(false);
      // Small code fits beside it, and code the child has loaded runs there again.
      const small = source("dc_versions", PID_COMPONENT);
      expect(pidIn(await own.invoke(small, invocation("dc_versions")))).toBe(second);
      expect(pidIn(await own.invoke(large(2), invocation("dc_versions")))).toBe(second);
    });
  });

  it("lets a spare child go idle and reaps it while the oldest one serves sequential runs", async () => {
    // Idle long enough that neither child is reaped before both served the burst, even on a busy machine.
    await withPoolHost({ processes: 2, idleMs: 2000 }, async (own) => {
      const code = source("dc_spare", SLOW_PID);
      await Promise.all(Array.from({ length: 10 }, () => own.invoke(code, invocation(code.sourceId))));
      expect(own.pidsOf("dc_spare")).toHaveLength(2);
      const [oldest] = own.pidsOf("dc_spare");
      const served: (number | undefined)[] = [];
      await expect
        .poll(
          async () => {
            served.push(pidIn(await own.invoke(code, invocation(code.sourceId))));
            return own.pidsOf("dc_spare");
          },
          { timeout: 10_000, interval: 50 },
        )
        .toEqual([oldest]);
      expect(new Set(served)).toEqual(new Set([oldest]));
    });
  });

  it("answers other sources while one source's run blocks its child, then kills that child", async () => {
    await withPoolHost({ processes: 2 }, async (own) => {
      const healthy = source("dc_blocked_healthy", PID_COMPONENT);
      const looping = source(
        "dc_blocked_looping",
        "export default { run(event) { while (event.loop) {} this.$emit({ pid: process.pid }); } };",
      );
      // Loaded in the child first: it then loops as soon as it is sent.
      const blockedPid = pidIn(await own.invoke(looping, invocation(looping.sourceId, { event: { loop: false } })));
      let loopSettled = false;
      const looped = own
        .invoke(looping, invocation(looping.sourceId, { timeoutMs: 3000, event: { loop: true } }))
        .finally(() => {
          loopSettled = true;
        });

      const answers: InvocationResult[] = [];
      for (let i = 0; i < 10; i++) answers.push(await own.invoke(healthy, invocation(healthy.sourceId)));
      expect(answers.map((answer) => answer.error)).toEqual(Array(10).fill(undefined));
      expect(answers.map(pidIn)).not.toContain(blockedPid);
      // All answered while the loop still held its source's child.
      expect(loopSettled).toBe(false);

      expect((await looped).error?.name).toBe("TimeoutError");
      await expect.poll(() => isAlive(blockedPid as number), { timeout: 10_000 }).toBe(false);
    });
  });

  it("holds further runs of a source whose run blocks a child until that child is gone", async () => {
    await withPoolHost({ processes: 2 }, async (own) => {
      const looping = source(
        "dc_hold",
        "export default { run(event) { while (event.loop) {} this.$emit({ pid: process.pid }); } };",
      );
      // Loaded in the child first: it then loops as soon as it is sent.
      const blockedPid = pidIn(await own.invoke(looping, invocation(looping.sourceId, { event: { loop: false } })));
      const settled: string[] = [];
      const looped = own
        .invoke(looping, invocation(looping.sourceId, { timeoutMs: 2000, event: { loop: true } }))
        .finally(() => settled.push("loop"));
      // Sent to the same child behind the loop, then taken back unstarted once that child is blocked.
      const held = own
        .invoke(looping, invocation(looping.sourceId, { event: { loop: false } }))
        .finally(() => settled.push("held"));

      expect((await looped).error?.name).toBe("TimeoutError");
      const heldResult = await held;
      expect(heldResult.error).toBeUndefined();
      expect(pidIn(heldResult)).not.toBe(blockedPid);
      // Not run on a second child while the loop held the first: one looping source blocks one child.
      expect(settled).toEqual(["loop", "held"]);
    });
  });

  it("moves work off a child that code of a finished run blocks, and kills that child", async () => {
    await withPoolHost({ processes: 2 }, async (own) => {
      // Two versions of one source: the second runs in the process the first left looping.
      const leaving = source(
        "dc_stray_loop",
        `export default { run() {
          setTimeout(() => { while (true) {} }, 0);
          this.$emit({ pid: process.pid });
        } };`,
      );
      const healthy = source("dc_stray_loop", PID_COMPONENT);
      const strayPid = pidIn(await own.invoke(leaving, invocation(leaving.sourceId)));
      expect(strayPid).toBeDefined();
      const answers: InvocationResult[] = [];
      for (let i = 0; i < 5; i++) answers.push(await own.invoke(healthy, invocation(healthy.sourceId)));
      expect(answers.map((answer) => answer.error)).toEqual(Array(5).fill(undefined));
      await expect.poll(() => isAlive(strayPid as number), { timeout: 10_000 }).toBe(false);
      expect(answers.map(pidIn)).not.toContain(strayPid);
    });
  });

  it("gives the next run to a child that was blocked for a while, as soon as it answers", async () => {
    await withPoolHost({ processes: 2 }, async (own) => {
      const busy = source(
        "dc_was_blocked",
        `export default { run(event = {}) {
          const end = Date.now() + (event.ms ?? 0);
          while (Date.now() < end) {}
          this.$emit({ pid: process.pid });
        } };`,
      );
      const pid = pidIn(await own.invoke(busy, invocation(busy.sourceId)));
      // Silent for far longer than blockedAfterMs (300 ms): the child counts as blocked until it answers.
      expect(pidIn(await own.invoke(busy, invocation(busy.sourceId, { event: { ms: 900 } })))).toBe(pid);
      expect(pidIn(await own.invoke(busy, invocation(busy.sourceId)))).toBe(pid);
    });
  });

  it("does not also run an invocation it took back from a child that was busy for a while", async () => {
    const hits: number[] = [];
    const server = createServer((request, response) => {
      hits.push(Number(new URL(request.url ?? "/", "http://x").searchParams.get("pid")));
      response.end("ok");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    try {
      await withPoolHost({ processes: 2 }, async (own) => {
        const busy = source(
          "dc_busy",
          `export default { run(event) {
            const end = Date.now() + event.ms;
            while (Date.now() < end) {}
            this.$emit({ pid: process.pid });
          } };`,
        );
        const calling = source(
          "dc_busy",
          `export default { async run() {
            await fetch("http://127.0.0.1:${port}/?pid=" + process.pid);
            this.$emit({ pid: process.pid });
          } };`,
        );
        // Both loaded in the first child, so that the next two start there without a load.
        const busyPid = pidIn(await own.invoke(busy, invocation(busy.sourceId, { event: { ms: 0 } })));
        expect(pidIn(await own.invoke(calling, invocation(calling.sourceId)))).toBe(busyPid);
        hits.length = 0;

        // Sent together: the call waits behind a second of computing, long enough to count as blocked.
        const [busyResult, callResult] = await Promise.all([
          own.invoke(busy, invocation(busy.sourceId, { event: { ms: 1000 } })),
          own.invoke(calling, invocation(calling.sourceId)),
        ]);
        expect(pidIn(busyResult)).toBe(busyPid);
        expect(callResult.error).toBeUndefined();
        expect(pidIn(callResult)).not.toBe(busyPid);
        // Healthy again, the oldest child takes the next run: it has read and done all it was sent before.
        await expect
          .poll(async () => pidIn(await own.invoke(busy, invocation(busy.sourceId, { event: { ms: 0 } }))), {
            timeout: 10_000,
          })
          .toBe(busyPid);
        expect(hits).toEqual([pidIn(callResult)]);
      });
    } finally {
      server.close();
    }
  });

  /** Culprits that stop their child while another run waits in it. */
  const CULPRITS: [string, string, string, RegExp][] = [
    ["process.exit", "export default { run() { process.exit(7); } };", "SandboxCrashError", /exited with code 7/],
    ["process.abort", "export default { run() { process.abort(); } };", "SandboxCrashError", /SIGABRT/],
    [
      "a kill of its own process",
      'export default { run() { process.kill(process.pid, "SIGKILL"); } };',
      "SandboxCrashError",
      /SIGKILL/,
    ],
    ["an endless loop", "export default { run() { while (true) {} } };", "TimeoutError", /timed out after 1s/],
    ["a module that loops as it loads", "while (true) {}\nexport default {};", "TimeoutError", /timed out after 1s/],
    [
      "allocating without bound",
      "export default { run() { const hoard = []; while (true) hoard.push(new Array(1e6).fill(1)); } };",
      "OutOfMemoryError",
      /out of memory/,
    ],
    // What a child writes to its channels is untrusted: breaking the protocol kills that child only.
    ...(
      [
        ["garbage on its message channel", 'writeSync(4, "not json\\n")', /not JSON/],
        ["a message that is not an object", 'writeSync(4, "[1,2]\\n")', /not an object/],
        ["a message of no known type", 'writeSync(4, \'{"type":"hello"}\\n\')', /no known type/],
        ["a malformed started", 'writeSync(4, \'{"type":"started"}\\n\')', /malformed started/],
        ["a malformed result", 'writeSync(4, \'{"type":"result","result":5}\\n\')', /malformed result/],
        // The runtime's next message (this run's result) finishes the line: not JSON either.
        ["a partial message", 'writeSync(4, \'{"type":"res\')', /not JSON/],
        ["a message over the frame limit", 'writeSync(4, "x".repeat(17 * 1024 * 1024))', /longer than 16777216 bytes/],
        ["a write to its request channel", 'writeSync(3, "hello\\n")', /request channel/],
      ] as const
    ).map(([what, write, why]): [string, string, string, RegExp] => [
      what,
      // Still running when the host reads it (fd 3 and fd 4 are read apart: no order between them).
      `import { writeSync } from "node:fs";\nexport default { async run() { ${write}; await new Promise((resolve) => setTimeout(resolve, 500)); } };`,
      "SandboxCrashError",
      new RegExp(`broke the protocol with the host \\(it .*${why.source}.*\\) and was killed`),
    ]),
  ];

  it.each(CULPRITS)(
    "blames %s on its own run and runs the other one in flight again elsewhere",
    async (_, code, name, message) => {
      // The waiting run holds on the gate until the culprit's result is in: it is surely still in
      // flight when its child is stopped, and its run elsewhere does not wait.
      const gate = await startGate();
      try {
        await withPoolHost({ processes: 2 }, async (own) => {
          // Two versions of one source, so that both run in its process.
          const waiting = source(
            "dc_culprit",
            `export default {
            props: { http: { type: "$.interface.http", customResponse: true } },
            async run() {
              this.http.respond({ status: 200, body: String(process.pid) });
              await (await fetch("${gate.url}")).text();
              this.$emit({ pid: process.pid });
            },
          };`,
          );
          const culprit = source("dc_culprit", code);
          const responses: HttpResponseSpec[] = [];
          const waited = own.invoke(waiting, invocation(waiting.sourceId, CUSTOM_RESPONSE_PROPS), {
            onRespond: (response) => responses.push(response),
          });
          // The waiting run has started in the first child before the culprit joins it there.
          await expect.poll(() => responses.length, { timeout: 10_000 }).toBe(1);
          const firstPid = Number(responses[0]?.body);

          const culpritResult = await own.invoke(culprit, invocation(culprit.sourceId, { timeoutMs: 1000 }));
          gate.open();
          expect(culpritResult.error?.name).toBe(name);
          expect(culpritResult.error?.message).toMatch(message);

          const waitResult = await waited;
          expect(waitResult.error).toBeUndefined();
          expect(pidIn(waitResult)).not.toBe(firstPid);
          // The caller had its answer from the first run; the second run's respond is not passed on again.
          expect(responses).toHaveLength(1);
          expect(waitResult.response).toEqual(responses[0]);
          await expect.poll(() => isAlive(firstPid), { timeout: 10_000 }).toBe(false);
        });
      } finally {
        gate.close();
      }
    },
  );

  it("runs a displaced invocation again only once", async () => {
    const hits: number[] = [];
    const server = createServer((request, response) => {
      hits.push(Number(new URL(request.url ?? "/", "http://x").searchParams.get("pid")));
      response.end("ok");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    try {
      // A child starved of CPU on a busy machine is not taken for blocked here: the second exit
      // must reach the child the displaced run went to.
      await withPoolHost({ processes: 1, blockedAfterMs: 10_000 }, async (own) => {
        const waiting = source(
          "dc_twice",
          `export default { async run() {
            await fetch("http://127.0.0.1:${port}/started?pid=" + process.pid);
            await new Promise((resolve) => setTimeout(resolve, 5000));
          } };`,
        );
        const exiting = source("dc_twice", "export default { run() { process.exit(3); } };");
        const waited = own.invoke(waiting, invocation(waiting.sourceId));
        await expect.poll(() => hits.length, { timeout: 10_000 }).toBe(1);
        expect((await own.invoke(exiting, invocation(exiting.sourceId))).error?.name).toBe("SandboxCrashError");
        // Run again in a new child, which the second exit stops too.
        await expect.poll(() => hits.length, { timeout: 10_000 }).toBe(2);
        expect(hits[1]).not.toBe(hits[0]);
        expect((await own.invoke(exiting, invocation(exiting.sourceId))).error?.name).toBe("SandboxCrashError");

        const result = await waited;
        expect(result.error?.name).toBe("SandboxError");
        expect(result.error?.message).toMatch(/run again once already/);
        expect(hits).toHaveLength(2);
      });
    } finally {
      server.close();
    }
  });
});

describe("ProcessPoolHost: what a child sends", () => {
  /** Emits its pid; with `event.forge`, first writes a result for that invocation itself. */
  const FORGER = `import { writeSync } from "node:fs";
  export default { async run(event = {}) {
    if (event.forge) {
      writeSync(4, JSON.stringify({ type: "result", result: { invocationId: event.forge, emits: [{ event: "forged" }] } }) + "\\n");
    }
    if (event.wait) await new Promise((resolve) => setTimeout(resolve, event.wait));
    this.$emit({ pid: process.pid });
  } };`;

  it("kills a child that sends a result for an invocation it has not started, and runs that one elsewhere", async () => {
    // Block detection off: the forger holds its process while the victim is sent there.
    await withPoolHost({ blockedAfterMs: 60_000 }, async (own) => {
      const code = source(
        "dc_early",
        `import { readSync, writeSync } from "node:fs";
        export default {
          props: { http: { type: "$.interface.http", customResponse: true } },
          run(event = {}) {
            if (event.forge) {
              this.http.respond({ status: 200, body: "holding" });
              // Holds its process until the victim's request arrives on the request pipe (fd 3,
              // non-blocking), so the forged result is for an invocation sent here and not started.
              const end = Date.now() + 30_000;
              const buffer = Buffer.alloc(65536);
              while (Date.now() < end) {
                try {
                  if (readSync(3, buffer) > 0) break;
                } catch (error) {
                  if (error.code !== "EAGAIN") throw error;
                }
              }
              writeSync(4, JSON.stringify({ type: "result", result: { invocationId: event.forge, emits: [{ event: "forged" }] } }) + "\\n");
            }
            this.$emit({ pid: process.pid });
          },
        };`,
      );
      const firstPid = pidIn(await own.invoke(code, invocation(code.sourceId)));
      const victim = invocation(code.sourceId);
      let holding: () => void = () => {};
      const held = new Promise<void>((resolve) => {
        holding = resolve;
      });
      const forging = own.invoke(
        code,
        invocation(code.sourceId, { ...CUSTOM_RESPONSE_PROPS, event: { forge: victim.invocationId } }),
        { onRespond: () => holding() },
      );
      // The forger's code runs (and holds its process until the victim is sent there): the victim cannot start.
      await held;
      const [forger, forged] = await Promise.all([forging, own.invoke(code, victim)]);
      expect(forger.error?.name).toBe("SandboxCrashError");
      expect(forger.error?.message).toMatch(/result for an invocation it had not started/);
      expect(forged.error).toBeUndefined();
      expect(events(forged)).toEqual([{ pid: expect.any(Number) }]);
      expect(pidIn(forged)).not.toBe(firstPid);
      await expect.poll(() => isAlive(firstPid as number), { timeout: 10_000 }).toBe(false);
    });
  });

  it("ignores results for invocations not in flight in that child: another source's, or made up", async () => {
    await withPoolHost({}, async (own) => {
      const forger = source("dc_forger", FORGER);
      const victim = source("dc_victim", FORGER);
      const forgerPid = pidIn(await own.invoke(forger, invocation(forger.sourceId)));
      const victimRun = invocation(victim.sourceId, { event: { wait: 1000 } });
      const victimResult = own.invoke(victim, victimRun);
      const results = await Promise.all(
        [victimRun.invocationId, "inv_made_up"].map((forge) =>
          own.invoke(forger, invocation(forger.sourceId, { event: { forge } })),
        ),
      );
      expect(results.map((result) => [result.error, pidIn(result)])).toEqual([
        [undefined, forgerPid],
        [undefined, forgerPid],
      ]);
      const genuine = await victimResult;
      expect(genuine.error).toBeUndefined();
      expect(events(genuine)).toEqual([{ pid: expect.any(Number) }]);
      expect(pidIn(genuine)).not.toBe(forgerPid);
    });
  });

  it("ends a run whose result is over the frame limit with an error, and the child keeps serving", async () => {
    await withPoolHost({ heapMb: 256 }, async (own) => {
      // 70 emits of 250,000 characters: each under the emit limit, together over 16 MiB.
      const code = source(
        "dc_large",
        `export default { run(event = {}) {
          if (event.large) for (let n = 0; n < 70; n++) this.$emit("x".repeat(250000));
          this.$emit({ pid: process.pid });
        } };`,
      );
      const pid = pidIn(await own.invoke(code, invocation(code.sourceId)));
      const large = await own.invoke(code, invocation(code.sourceId, { event: { large: true } }));
      expect(large.error?.name).toBe("ResultTooLargeError");
      expect(large.emits).toEqual([]);
      expect(pidIn(await own.invoke(code, invocation(code.sourceId)))).toBe(pid);
    });
  });

  it("kills a child that leaves a message unfinished, long before the run's time is up", async () => {
    await withPoolHost({}, async (own) => {
      // The loop keeps the runtime from finishing the line; without the check the run would end
      // only at its time limit.
      const code = source(
        "dc_unfinished",
        'import { writeSync } from "node:fs";\nexport default { run() { writeSync(4, \'{"type":"be\'); while (true) {} } };',
      );
      const result = await own.invoke(code, invocation(code.sourceId, { timeoutMs: 60_000 }));
      expect(result.error?.name).toBe("SandboxCrashError");
      expect(result.error?.message).toMatch(/left a message unfinished/);
      expect(result.durationMs).toBeLessThan(60_000);
    });
  });
});

describe("ProcessPoolHost: what a component sees of the server", () => {
  it("gets no server path in its stacks, error messages and logs", async () => {
    const thrower = source(
      "dc_paths",
      `export default { run() {
        console.log(new Error("logged").stack);
        console.log("my url", import.meta.url);
        throw new Error("thrown at " + import.meta.url);
      } };`,
    );
    const result = await run(thrower);
    expect(result.error?.message).toBe("thrown at component.mjs");
    expect(result.error?.stack).toMatch(/\(component\.ts:4:\d+\)/);
    expect(result.logs.map((log) => log.message)).toEqual([
      expect.stringContaining("component.ts:2:21"),
      "my url component.mjs",
    ]);

    // Without npm plugins, a package import fails to load, naming the importing file.
    const missing = await run(source("dc_paths_load", 'import "no-such-package-xyz";\nexport default {};'));
    expect(missing.error?.message).toMatch(/no-such-package-xyz/);
    // A crash reason quotes the child's last line of stderr.
    const crash = await run(
      source(
        "dc_paths_crash",
        'export default { run() { process.stderr.write(import.meta.url + "\\n"); process.exit(2); } };',
      ),
    );
    expect(crash.error?.message).toMatch(/exited with code 2: component\.mjs$/);
    const described = await host.describe("throw new Error(import.meta.url);").catch((error: Error) => error.message);
    expect(described).toMatch(/component\.mjs/);

    const everything = JSON.stringify([result, missing, crash, described]);
    expect(everything).not.toContain(workDir);
    expect(everything).not.toContain(encodeURI(workDir));
  });

  it("loads code that carries no source map, and maps its stacks through the map beside it", async () => {
    // A multi-file component: the frame names the file of the component that threw, at its line.
    const files = source(
      "dc_maps",
      packComponentFiles({
        entry: "sources/thrower/thrower.mjs",
        files: {
          "sources/thrower/thrower.mjs":
            'import { fail } from "../common/fail.mjs";\nexport default { run() { fail(); } };\n',
          "sources/common/fail.mjs": '// Throws.\n\nexport function fail() {\n  throw new Error("from a helper");\n}\n',
        },
      }),
    );
    const result = await run(files);
    expect(result.error?.stack).toMatch(/^Error: from a helper\n {4}at fail \(sources\/common\/fail\.mjs:4:9\)\n/);
    expect(result.error?.stack).toContain("at Object.run (sources/thrower/thrower.mjs:2:26)");
    const bundle = join(workDir, "sources", "dc_maps", files.codeHash, "component.mjs");
    expect(readFileSync(bundle, "utf8")).not.toMatch(/sourceMappingURL|data:application\/json/);
    expect(JSON.parse(readFileSync(`${bundle}.map`, "utf8"))).toMatchObject({ version: 3 });
  });

  it("may change its own priority only: not the server's, not through process.binding", async () => {
    const before = getPriority(process.pid);
    const code = source(
      "dc_priority",
      `import os from "node:os";
      import { setPriority, getPriority } from "node:os";
      export default { run() {
        const attempts = [
          () => os.setPriority(process.ppid, 19),
          () => setPriority(process.ppid, 19),
          () => os.getPriority(process.ppid),
          () => getPriority(process.ppid),
          () => process.binding("os").setPriority(process.ppid, 19, {}),
        ];
        for (const attempt of attempts) {
          try { attempt(); this.$emit("done"); } catch (error) { this.$emit(error.code); }
        }
        os.setPriority(5);
        setPriority(0, 6);
        this.$emit(getPriority());
      } };`,
    );
    expect(events(await run(code))).toEqual(["EPERM", "EPERM", "EPERM", "EPERM", "ERR_ACCESS_DENIED", 6]);
    expect(getPriority(process.pid)).toBe(before);
  });
});

describe("ProcessPoolHost: the bound on live processes", () => {
  /** Resolves after `ms`, emitting its pid. */
  const SLEEPER = `export default { async run(event = {}) {
    await new Promise((resolve) => setTimeout(resolve, event.ms ?? 0));
    this.$emit({ pid: process.pid });
  } };`;

  it("stops the least recently used idle child of another source to start one a source needs", async () => {
    await withPoolHost({ maxProcesses: 2 }, async (own) => {
      const [a, b, c] = ["dc_lru_a", "dc_lru_b", "dc_lru_c"].map((id) => source(id, SLEEPER));
      const pidA = pidIn(await own.invoke(a as SourceCode, invocation("dc_lru_a")));
      const pidB = pidIn(await own.invoke(b as SourceCode, invocation("dc_lru_b")));
      // a was used last, so b goes.
      expect(pidIn(await own.invoke(a as SourceCode, invocation("dc_lru_a")))).toBe(pidA);
      const pidC = pidIn(await own.invoke(c as SourceCode, invocation("dc_lru_c")));
      expect(new Set([pidA, pidB, pidC]).size).toBe(3);
      await expect.poll(() => isAlive(pidB as number), { timeout: 10_000 }).toBe(false);
      expect([isAlive(pidA as number), isAlive(pidC as number), own.liveProcesses]).toEqual([true, true, 2]);
    });
  });

  it("makes a source wait for a slot while every child is busy, and never runs more than the bound", async () => {
    await withPoolHost({ maxProcesses: 2 }, async (own) => {
      const sources = ["dc_busy_a", "dc_busy_b", "dc_busy_c"].map((id) => source(id, SLEEPER));
      let most = 0;
      const sampler = setInterval(() => {
        most = Math.max(most, own.liveProcesses);
      }, 10);
      const finished: string[] = [];
      const runOf = (index: number, ms: number) =>
        own
          .invoke(sources[index] as SourceCode, invocation(sources[index]?.sourceId, { event: { ms } }))
          .finally(() => finished.push(sources[index]?.sourceId as string));
      try {
        const first = [runOf(0, 1000), runOf(1, 1000)];
        await expect.poll(() => own.liveProcesses).toBe(2);
        const waiting = runOf(2, 0);
        const results = await Promise.all([...first, waiting]);
        expect(results.map((result) => result.error)).toEqual([undefined, undefined, undefined]);
        // The third started only once one of the first two had finished (its child drained).
        expect(finished.indexOf("dc_busy_c")).toBeGreaterThan(0);
      } finally {
        clearInterval(sampler);
      }
      expect(most).toBe(2);
    });
  });

  it("drains a child its source keeps busy, so that a waiting source gets a slot", async () => {
    await withPoolHost({ maxProcesses: 1 }, async (own) => {
      const busy = source("dc_drain_busy", SLEEPER);
      const waiting = source("dc_drain_waiting", SLEEPER);
      let running = true;
      // Always three runs in flight: without draining its child would never be idle.
      const traffic = Array.from({ length: 3 }, async () => {
        const errors: unknown[] = [];
        while (running) {
          const result = await own.invoke(busy, invocation(busy.sourceId, { event: { ms: 100 } }));
          if (result.error) errors.push(result.error);
        }
        return errors;
      });
      try {
        await expect.poll(() => own.pidOf(busy.sourceId)).toBeDefined();
        const result = await own.invoke(waiting, invocation(waiting.sourceId));
        expect(result.error).toBeUndefined();
        expect(running).toBe(true);
      } finally {
        running = false;
      }
      expect((await Promise.all(traffic)).flat()).toEqual([]);
    });
  });

  it("counts a describe's child, which waits for a slot too", async () => {
    await withPoolHost({ maxProcesses: 1 }, async (own) => {
      const busy = source("dc_describe_busy", SLEEPER);
      let runDone = false;
      const running = own.invoke(busy, invocation(busy.sourceId, { event: { ms: 1000 } })).finally(() => {
        runDone = true;
      });
      await expect.poll(() => own.liveProcesses).toBe(1);
      const description = await own.describe('export default { name: "Waited" };');
      expect(description.name).toBe("Waited");
      expect(runDone).toBe(true);
      expect((await running).error).toBeUndefined();
    });
  });
});

describe("ProcessPoolHost: lifecycle", () => {
  it("removes source bundles unused for the retention time, describe bundles older than a day and the old layout, at start", async () => {
    const sweptDir = mkdtempSync(join(tmpdir(), "sluice-sweep-"));
    const DAY_S = 24 * 60 * 60;
    const folder = (path: string, ageSeconds: number) => {
      mkdirSync(join(sweptDir, path), { recursive: true });
      const time = Date.now() / 1000 - ageSeconds;
      utimesSync(join(sweptDir, path), time, time);
      return join(sweptDir, path);
    };
    const staleOwned = folder("sources/dc_sweep/stale", 10 * DAY_S);
    const recentOwned = folder("sources/dc_sweep/recent", 60);
    const staleSource = folder("sources/dc_gone/stale", 10 * DAY_S);
    const legacy = folder("owners/o_sweep/recent", 60);
    const staleDescribed = folder("describe/stale", 2 * DAY_S);
    const recentDescribed = folder("describe/recent", 60);
    const sweeping = new ProcessPoolHost({ workDir: sweptDir, bundleRetentionMs: 7 * DAY_S * 1000 });
    try {
      // Every bundle waits for the sweep, so it is over once one is built.
      await sweeping.prepare(source("dc_sweep", "export default { run() {} };"));
      expect(
        [staleOwned, recentOwned, staleDescribed, recentDescribed, staleSource, dirname(staleSource), legacy].map(
          existsSync,
        ),
      ).toEqual([false, true, false, true, false, false, false]);
    } finally {
      await sweeping.close();
      rmSync(sweptDir, { recursive: true, force: true });
    }
  });

  it("removes a source while its bundle is being built: no write into the folder, its runs fail, a deploy after answers 404", async () => {
    // New code each time, so that the first run builds its bundle while the removals go on.
    const code = source("dc_removed", `export default { run() { this.$emit(${Date.now()}); } };`);
    const folder = join(workDir, "sources", "dc_removed");
    const building = host.invoke(code, invocation(code.sourceId));
    // Two DELETEs at once, as a client that retries does: both finish, neither throws.
    await Promise.all([host.remove(code), host.remove(code)]);
    const [built, later] = [await building, await host.invoke(code, invocation(code.sourceId))];
    for (const result of [built, later]) {
      expect(result.error).toMatchObject({ name: "SandboxError", message: "the source was removed" });
      expect(result.emits).toEqual([]);
    }
    expect(existsSync(folder)).toBe(false);
    await expect(host.prepare(code)).rejects.toMatchObject({ code: "not_found", message: "source not found" });
    expect(host.wasRemoved("dc_removed")).toBe(true);
    expect(existsSync(folder)).toBe(false);
    // Another source is not concerned.
    expect(events(await run(source("dc_kept", "export default { run() { this.$emit(1); } };")))).toEqual([1]);
  });

  it("reaps an idle child, starts a new one when needed, and kills all on close", async () => {
    const reapingDir = mkdtempSync(join(tmpdir(), "sluice-reap-"));
    const reaping = new ProcessPoolHost({ workDir: reapingDir, idleMs: 200 });
    try {
      const code = source("dc_reap", PID_COMPONENT);
      const invoke = async () =>
        (events(await reaping.invoke(code, invocation(code.sourceId)))[0] as { pid: number }).pid;
      const first = await invoke();
      await expect.poll(() => isAlive(first), { timeout: 10_000 }).toBe(false);
      expect(reaping.pidOf("dc_reap")).toBeUndefined();

      const second = await invoke();
      expect(second).not.toBe(first);
      await reaping.close();
      expect(isAlive(second)).toBe(false);
      await expect(reaping.invoke(code, invocation())).rejects.toThrow("closed");
    } finally {
      await reaping.close();
      rmSync(reapingDir, { recursive: true, force: true });
    }
  });
});
