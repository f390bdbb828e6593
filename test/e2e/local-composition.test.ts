import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { localDeps } from "#adapters/local/composition";
import { loadLocalConfig } from "#config/env";
import { silentLogger } from "#ports/logger";
import { eventually } from "../support/api-client.ts";

/** The settings of local mode reach the parts they configure (each part's behaviour is tested with it). */
describe("the local composition root", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it("keeps only SLUICE_EVENT_RETENTION_PER_CHANNEL events per channel once a source has 1,000 appends", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "sluice-composition-"));
    dirs.push(dataDir);
    const config = loadLocalConfig({ SLUICE_DATA_DIR: dataDir, SLUICE_EVENT_RETENTION_PER_CHANNEL: "5" });
    const local = await localDeps(config, silentLogger);
    try {
      const events = Array.from({ length: 1_000 }, (_, n) => ({
        channel: "",
        event: { n },
        emitId: `e${n}`,
        meta: {},
      }));
      await local.deps.events.appendEvents("dc_retained", events, Date.now());
      const kept = await eventually(async () => {
        const page = await local.deps.events.listEvents("dc_retained", { limit: 100 });
        return page.totalCount <= 5 ? page : undefined;
      }, "the count trim");
      expect(kept.items.map((item) => (item.event as { n: number }).n)).toEqual([999, 998, 997, 996, 995]);
    } finally {
      await local.close();
    }
  });
});
