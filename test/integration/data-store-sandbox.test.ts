/**
 * `data_store` props through real sandbox children (`ProcessPoolHost`) and the real SQLite store,
 * with a clock the test drives: a TTL that runs out between two runs of a source, and a component
 * that writes hostile `data_store` messages to its sandbox's channel.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessPoolHost } from "#adapters/local/process-pool-host";
import { bindDataStoreProps } from "#core/data-stores";
import type { Deps } from "#core/ports/deps";
import { invokeSource, loadComponent } from "#core/source-runs";
import { deploySource } from "#core/sources";
import type { Json } from "#runtime/protocol";
import { accountIn, memoryDeps } from "../support/memory-deps.ts";

const START = Date.UTC(2026, 10, 20, 12);

/** Remembers the first `timestamp` it saw for 60 s; emits what it found. */
const TOKEN_SOURCE = `
export default {
  name: "Token",
  version: "0.0.1",
  props: { dataStore: { type: "data_store" } },
  async run(event) {
    const seen = await this.dataStore.get("token");
    if (seen === undefined) await this.dataStore.set("token", event.n, { ttl: 60 });
    this.$emit({ seen: seen ?? null, keys: await this.dataStore.keys() });
  },
};
`;

/** Writes what its event says to the message pipe, then uses its store as usual. */
const HOSTILE_SOURCE = `
import { writeSync } from "node:fs";
export default {
  name: "Hostile",
  version: "0.0.1",
  props: { dataStore: { type: "data_store" } },
  async run(event) {
    if (event.line) writeSync(4, event.line + "\\n");
    if (event.flood) {
      const settled = await Promise.allSettled(
        Array.from({ length: event.flood }, (_, n) => this.dataStore.get("k" + n)),
      );
      const refused = settled.filter((outcome) => outcome.status === "rejected");
      this.$emit({ settled: settled.length, refused: refused.length, reason: refused[0]?.reason.message ?? null });
    }
    await this.dataStore.set("after", true);
    this.$emit({ after: await this.dataStore.get("after") });
  },
};
`;

let workDir: string;
let host: ProcessPoolHost;
let deps: ReturnType<typeof memoryDeps>;
let userId: string;
let workspaceId: string;

beforeAll(async () => {
  workDir = mkdtempSync(join(tmpdir(), "sluice-ds-sandbox-"));
  host = new ProcessPoolHost({ workDir, heapMb: 64 });
  deps = memoryDeps(START, {
    host,
    runs: { enqueue: async () => {} },
    timers: { schedule: async () => {}, cancel: async () => {} },
  });
  const account = await accountIn(deps, "sandboxed");
  userId = account.user.id;
  workspaceId = account.workspace.id;
});

afterAll(async () => {
  await host?.close();
  rmSync(workDir, { recursive: true, force: true });
});

async function deploy(code: string) {
  const view = await deploySource(deps, { userId }, { component_code: code });
  const source = await deps.sources.getSource(view.id);
  const component = source && (await loadComponent(deps as Deps, source.componentId));
  if (!source || !component) throw new Error("the source was not deployed");
  return (event: Json) => invokeSource(deps, source, component, "run", event);
}

describe("data_store props in real sandbox children", () => {
  it("lets a record's TTL run out between two runs, by the server's clock", async () => {
    const run = await deploy(TOKEN_SOURCE);
    expect((await run({ n: 1 })).result.emits[0]?.event).toEqual({ seen: null, keys: ["token"] });
    deps.clock.set(START + 59_000);
    expect((await run({ n: 2 })).result.emits[0]?.event).toEqual({ seen: 1, keys: ["token"] });
    deps.clock.set(START + 60_000);
    expect((await run({ n: 3 })).result.emits[0]?.event).toEqual({ seen: null, keys: ["token"] });
    deps.clock.set(START + 119_999);
    expect((await run({ n: 4 })).result.emits[0]?.event).toEqual({ seen: 3, keys: ["token"] });
  });

  it("answers a forged call for a run that is not its own with a refusal, and touches no store", async () => {
    const victim = await bindDataStoreProps(deps, "o_victim", "dc_victim", {}, { s: "data_store" }, new Set());
    const victimId = (victim.s as { id: string }).id;
    await deps.dataStores.putEntry(victimId, { key: "secret", value: '"kept"', expiry: null }, START, 10);
    const run = await deploy(HOSTILE_SOURCE);
    const forged = JSON.stringify({
      type: "data_store",
      invocationId: "inv_not_running",
      callId: 1,
      call: { store: victimId, op: "clear" },
    });
    const { result } = await run({ line: forged });
    expect(result.error).toBeUndefined();
    expect(result.emits.map((emit) => emit.event)).toEqual([{ after: true }]);
    expect(await deps.dataStores.getEntry(victimId, "secret", deps.clock.nowMs())).toEqual({
      key: "secret",
      value: '"kept"',
    });
    expect((await deps.dataStores.listStores(workspaceId)).length).toBeGreaterThan(0);
  });

  it("kills a child that sends a malformed data store message, failing only that run", async () => {
    const run = await deploy(HOSTILE_SOURCE);
    const malformed = JSON.stringify({ type: "data_store", invocationId: "x", callId: "one", call: {} });
    const { result } = await run({ line: malformed });
    expect(result.error).toMatchObject({
      name: "SandboxCrashError",
      message: expect.stringContaining("it sent a malformed data_store message"),
    });
    // The next run gets a fresh child, and its store as it was.
    expect((await run({})).result.emits.map((emit) => emit.event)).toEqual([{ after: true }]);
  });

  it("answers every call of a flood, refusing those past the waiting limit, and the run goes on", async () => {
    const run = await deploy(HOSTILE_SOURCE);
    const { result } = await run({ flood: 3000 });
    expect(result.error).toBeUndefined();
    const [flood, after] = result.emits.map((emit) => emit.event) as [Record<string, unknown>, unknown];
    expect(flood.settled).toBe(3000);
    // How many wait at once depends on how the messages arrive; each refusal says why.
    if ((flood.refused as number) > 0) expect(flood.reason).toMatch(/at most 1000 data store calls waiting/);
    expect(after).toEqual({ after: true });
  });
});
