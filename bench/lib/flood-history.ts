/**
 * Two tenants for the flood scenario: the first (the data dir's own user) with one source holding a
 * long history, the second (made with `createLocalUser`, as `sluice create-user` does) with a source
 * of its own.
 *
 * Both sources are deployed through the API and the first run once (so its sandbox bundle exists);
 * then the server is stopped and the history is written into the same data directory through the
 * SQLite adapter itself (`SqliteEventStore.appendEvents`, as bench/lib/fleet.ts does: no SQL of the
 * bench depends on the schema), a hundred thousand events per transaction; then the measured
 * server starts on that data. Through the API, a million events would take minutes to emit.
 */
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteEventStore } from "#adapters/local/sqlite-event-store";
import type { NewEvent } from "#core/component-model";
import { createLocalUser } from "#local-mode/bootstrap";
import { DATABASE_FILE } from "#local-mode/composition";
import { numberedBody } from "./common.ts";
import { INGEST_CODE } from "./components.ts";
import { seedingServer } from "./fleet.ts";
import type { BenchServer } from "./processes.ts";
import type { ScenarioContext } from "./scenario.ts";
import { type DeployedSource, type SluiceApi, sluiceApi } from "./sluice-api.ts";

/** Events per append while seeding (one ms of ids each), and appends per transaction. */
const SEED_BATCH = 5000;
const BATCHES_PER_TURN = 20;

export interface Tenant {
  api: SluiceApi;
  apiKey: string;
  source: DeployedSource;
}

export interface FloodHistory {
  server: BenchServer;
  /** The tenant whose source holds the history. */
  flooder: Tenant;
  /** Another tenant, whose requests are measured. */
  other: Tenant;
  /** Events written into the flooder's source (its default channel). */
  events: number;
  /** Id of the newest event written. */
  lastId: string;
  seedMs: number;
}

export async function floodHistory(context: ScenarioContext, events: number): Promise<FloodHistory> {
  const started = performance.now();
  const { dataDir, seeder, api: flooderApi, first: floodSource } = await seedingServer(context, "sluice-bench-flood-");
  // The first event goes with the rest of the history: the flooder's source holds exactly `events`.
  await flooderApi.call("DELETE", `/sources/${floodSource.id}/events`);
  const created = await createLocalUser(dataDir, { username: "bench-other", email: "other@bench.invalid" });
  const otherApi = sluiceApi({ baseUrl: seeder.baseUrl, apiKey: created.apiKey });
  const otherSource = await otherApi.deploy(INGEST_CODE);
  await seeder.stop({ keepData: true });

  let lastId = "";
  const db = openSqlite(join(dataDir, DATABASE_FILE));
  try {
    const store = new SqliteEventStore(db);
    const firstMs = Date.now() - 60 * 60 * 1000;
    let batch = 0;
    for (let written = 0; written < events; ) {
      const appends: Promise<{ id: string }[]>[] = [];
      for (let i = 0; i < BATCHES_PER_TURN && written < events; i++, batch++) {
        const size = Math.min(SEED_BATCH, events - written);
        const bodies: NewEvent[] = Array.from({ length: size }, (_, k) => ({
          channel: "",
          event: JSON.parse(numberedBody(written + k)),
          emitId: randomUUID(),
          meta: {},
        }));
        written += size;
        // Appends of one turn share one transaction (SqliteEventStore's grouped writes).
        appends.push(store.appendEvents(floodSource.id, bodies, firstMs + batch));
      }
      const stored = await Promise.all(appends);
      lastId = stored.at(-1)?.at(-1)?.id ?? lastId;
    }
  } finally {
    db.close();
  }

  const server = await context.startServer({ dataDir });
  const rebased = (source: DeployedSource) => ({
    id: source.id,
    endpoint: `${server.root}/http/${new URL(source.endpoint).pathname.split("/").at(-1)}`,
  });
  return {
    server,
    flooder: { api: sluiceApi(server), apiKey: server.apiKey, source: rebased(floodSource) },
    other: {
      api: sluiceApi({ baseUrl: server.baseUrl, apiKey: created.apiKey }),
      apiKey: created.apiKey,
      source: rebased(otherSource),
    },
    events,
    lastId,
    seedMs: performance.now() - started,
  };
}
