import { afterEach, describe, expect, it, vi } from "vitest";
import { loadLocalConfig } from "#config/env";
import type { NewEvent } from "#core/component-model";
import { silentLogger } from "#core/ports/logger";
import { type LocalMode, localDeps } from "#local-mode/composition";
import { newDataDir } from "../../support/local-process.ts";
import { runningRun } from "../../support/workflow-record.ts";

const DAY_MS = 86_400_000;
const events = (count: number, channel = ""): NewEvent[] =>
  Array.from({ length: count }, (_, n) => ({ channel, event: { n }, emitId: `e${n}`, meta: {} }));

/**
 * Local mode's retention as a user sets it: the SLUICE_EVENT_RETENTION_* variables reach the
 * store of `localDeps`, whose sweep (a minute's interval, faked here) removes what they exclude.
 */
describe("event retention in local mode", () => {
  let local: LocalMode | undefined;
  /** Local mode with these retention settings, its sweep's interval faked. */
  async function startKeeping({ days, perChannel }: { days: number; perChannel: number }): Promise<LocalMode> {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const config = loadLocalConfig({
      PORT: "0",
      SLUICE_DATA_DIR: newDataDir(),
      SLUICE_EVENT_RETENTION_DAYS: String(days),
      SLUICE_EVENT_RETENTION_PER_CHANNEL: String(perChannel),
    });
    return localDeps(config, silentLogger);
  }

  afterEach(async () => {
    await local?.close();
    local = undefined;
    vi.useRealTimers();
  });

  it("removes events older than SLUICE_EVENT_RETENTION_DAYS and beyond SLUICE_EVENT_RETENTION_PER_CHANNEL every minute", async () => {
    local = await startKeeping({ days: 1, perChannel: 2 });
    const store = local.deps.events;
    const now = Date.now();
    await store.appendEvents("dc_old", events(3), now - 2 * DAY_MS);
    const recent = await store.appendEvents("dc_new", [...events(3), ...events(1, "orders")], now);
    const ids = async (sourceId: string) => (await store.listEvents(sourceId, { limit: 10 })).items.map((e) => e.id);
    // Nothing is removed before the sweep runs.
    expect(await ids("dc_old")).toHaveLength(3);
    expect(await ids("dc_new")).toHaveLength(4);

    vi.advanceTimersByTime(60_000);
    await vi.waitFor(
      async () => {
        expect(await ids("dc_old")).toEqual([]);
        // Two per channel: the newest two of the default channel, and the one of `orders`.
        expect(await ids("dc_new")).toEqual([recent[3]!.id, recent[2]!.id, recent[1]!.id]);
      },
      { timeout: 10_000, interval: 20 },
    );
  });

  it("removes workflow runs as it removes events: older than the days, beyond the count per workflow", async () => {
    local = await startKeeping({ days: 1, perChannel: 2 });
    const runs = local.deps.workflowRuns;
    const now = Date.now();
    const begin = (workflowId: string, id: string, startedAt: number) =>
      runs.beginRun(runningRun({ id, workflowId, startedAt }), startedAt);
    await begin("p_old", "run_1", now - 2 * DAY_MS);
    for (const id of ["run_1", "run_2", "run_3"]) await begin("p_busy", id, now);
    const ids = async (workflowId: string) => (await runs.listRuns(workflowId, { limit: 10 })).items.map((r) => r.id);
    expect(await ids("p_old")).toEqual(["run_1"]);

    vi.advanceTimersByTime(60_000);
    await vi.waitFor(
      async () => {
        expect(await ids("p_old")).toEqual([]);
        expect(await ids("p_busy")).toEqual(["run_3", "run_2"]);
      },
      { timeout: 10_000, interval: 20 },
    );
  });
});
