/**
 * 1,000 deployed sources (and optionally their history) for the scale and history scenarios.
 *
 * Deploying through the API costs about 80 ms a source here (the deploy row measures that), so
 * 1,000 deploys would take minutes. Instead one source is deployed through the API and run once,
 * the server is stopped, and the other sources are written into the same data directory through
 * the SQLite adapters themselves (`SqliteSourceStore.createSource`, `SqliteEventStore.appendEvents`:
 * the same code the server stores them with, so no SQL of the bench depends on the schema); then
 * the measured server starts on that data. The copies differ from the deployed one only in id,
 * name and endpoint key; the component has no hooks, so a deploy would have stored the same rows.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteEventStore } from "#adapters/local/sqlite-event-store";
import { SqliteSourceStore } from "#adapters/local/sqlite-source-store";
import type { NewEvent } from "#core/component-model";
import { formatId } from "#core/ids";
import { DATABASE_FILE } from "#local-mode/composition";
import { eventually, when } from "../../test/support/eventually.ts";
import { INGEST_CODE } from "./components.ts";
import type { BenchServer } from "./processes.ts";
import type { ScenarioContext } from "./scenario.ts";
import { type DeployedSource, sluiceApi } from "./sluice-api.ts";

export interface Fleet {
  server: BenchServer;
  sources: DeployedSource[];
  /** Events written per source before the server started. */
  eventsPerSource: number;
  seedMs: number;
}

/**
 * A data directory (removed at the end of the scenario) with local mode started on it, unprofiled,
 * to write what the measured server will find, and the ingest source deployed and run once (so its
 * sandbox bundle exists). Stop the seeder with `keepData` before writing to the file directly.
 */
export async function seedingServer(context: ScenarioContext, prefix: string) {
  const dataDir = mkdtempSync(join(tmpdir(), prefix));
  context.defer(() => rmSync(dataDir, { recursive: true, force: true }));
  const seeder = await context.startServer({ dataDir, profile: false });
  const api = sluiceApi(seeder);
  const first = await api.deploy(INGEST_CODE);
  await fetch(first.endpoint, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  await eventually(async () => when((await api.eventCount(first.id)) >= 1), "the first source's event", {
    timeoutMs: 30_000,
  });
  return { dataDir, seeder, api, first };
}

export async function buildFleet(
  context: ScenarioContext,
  { sources: total, eventsPerSource }: { sources: number; eventsPerSource: number },
): Promise<Fleet> {
  const started = performance.now();
  // One run builds the sandbox bundle that every copy shares.
  const { dataDir, seeder, first } = await seedingServer(context, "sluice-bench-fleet-");
  await seeder.stop({ keepData: true });

  const db = openSqlite(join(dataDir, DATABASE_FILE));
  const copies: { id: string; key: string }[] = [];
  try {
    const store = new SqliteSourceStore(db);
    const template = await store.getSource(first.id);
    if (!template?.endpointKey) throw new Error("the deployed source has no endpoint key");
    const now = Date.now();
    for (let index = 1; index < total; index++) {
      const id = formatId("source", now + index, randomBytes(10));
      const key = randomBytes(18).toString("base64url");
      await store.createSource({
        ...template,
        id,
        name: `Bench fleet ${index}`,
        nameSlug: `bench-fleet-${index}`,
        endpointKey: key,
      });
      copies.push({ id, key });
    }
    if (eventsPerSource > 0) {
      const events = new SqliteEventStore(db);
      for (const id of [first.id, ...copies.map((copy) => copy.id)]) {
        const batch: NewEvent[] = Array.from({ length: eventsPerSource }, (_, n) => ({
          channel: "",
          event: { n, note: "seeded by the bench" },
          emitId: randomUUID(),
          meta: { id: n, summary: `event ${n}` },
        }));
        await events.appendEvents(id, batch, Date.now());
      }
    }
  } finally {
    db.close();
  }

  const server = await context.startServer({ dataDir });
  const endpointOf = (key: string) => `${server.root}/http/${key}`;
  const firstKey = new URL(first.endpoint).pathname.split("/").at(-1) as string;
  return {
    server,
    sources: [
      { id: first.id, endpoint: endpointOf(firstKey) },
      ...copies.map((copy) => ({ id: copy.id, endpoint: endpointOf(copy.key) })),
    ],
    eventsPerSource,
    seedMs: performance.now() - started,
  };
}
