import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
import { STORED_USAGE_MIGRATIONS } from "#adapters/local/sqlite-usage-schema";
import { SqliteUsageStore } from "#adapters/local/sqlite-usage-store";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function twoConnections() {
  const dir = mkdtempSync(join(tmpdir(), "sluice-usage-"));
  dirs.push(dir);
  const file = join(dir, "sluice.db");
  return { writer: new SqliteUsageStore(openSqlite(file)), reader: new SqliteUsageStore(openSqlite(file)) };
}

describe("SqliteUsageStore grouped additions", () => {
  it("resolves an addition only once it is committed, summing one turn's additions per owner and day", async () => {
    const { writer, reader } = twoConnections();
    const added = Promise.all([
      writer.addUsage("o_a", "2026-11-21", { invocations: 1, computeTimeMs: 5 }),
      writer.addUsage("o_a", "2026-11-21", { invocations: 1, computeTimeMs: 7 }),
      writer.addUsage("o_b", "2026-11-21", { invocations: 1, credits: 2 }),
    ]);
    // Not written yet: another connection does not see it.
    expect(await reader.getUsage("o_a", "2026-11-21")).toEqual({ invocations: 0, computeTimeMs: 0, credits: 0 });
    await added;
    expect(await reader.getUsage("o_a", "2026-11-21")).toEqual({ invocations: 2, computeTimeMs: 12, credits: 0 });
    expect(await reader.getUsage("o_b", "2026-11-21")).toEqual({ invocations: 1, computeTimeMs: 0, credits: 2 });
  });

  it("counts pending additions in its own reads, and writes them on flush", async () => {
    const { writer, reader } = twoConnections();
    const added = writer.addUsage("o_a", "2026-11-21", { invocations: 3 });
    expect((await writer.getUsage("o_a", "2026-11-21")).invocations).toBe(3);
    await added;
    void writer.addUsage("o_a", "2026-11-21", { invocations: 1 });
    writer.flush();
    expect((await reader.getUsage("o_a", "2026-11-21")).invocations).toBe(4);
  });

  it("rejects the additions of a write that failed", async () => {
    const db = openSqlite(":memory:");
    const store = new SqliteUsageStore(db);
    const added = store.addUsage("o_a", "2026-11-21", { invocations: 1 });
    db.close();
    await expect(added).rejects.toThrow();
  });
});

describe("SqliteUsageStore stored totals", () => {
  it("counts what a data dir written before the storage quotas holds, when it is opened", () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-usage-"));
    dirs.push(dir);
    const file = join(dir, "sluice.db");
    const old = openSqlite(file);
    // Back to the schema before the stored totals, with a source and two events in it.
    old.exec("DROP TRIGGER events_leave_stored_usage; DROP TABLE stored_usage; DROP TABLE stored_sources;");
    old
      .prepare(
        `INSERT INTO sources (id, user_id, workspace_id, component_id, name, name_slug, configured_props, active, created_at, updated_at)
         VALUES ('dc_old', 'u_1', 'o_old', 'sc_1', 'old', 'old', '{}', 1, 0, 0)`,
      )
      .run();
    const insert = old.prepare(
      "INSERT INTO events (source_id, ms, n, channel, indexed_at_ms, event, emit_id, meta) VALUES ('dc_old', 1, ?, '', 1, ?, 'e', '{}')",
    );
    insert.run(0, '{"a":"é"}');
    insert.run(1, "[1]");
    // The migration, as opening a data dir of that version runs it.
    for (const migration of STORED_USAGE_MIGRATIONS) old.exec(migration);
    old.close();

    const store = new SqliteUsageStore(openSqlite(file));
    // UTF-8 bytes: {"a":"é"} is 10, [1] is 3, and each meta {} is 2.
    return expect(store.getStored("o_old")).resolves.toEqual({ events: 2, bytes: 10 + 3 + 2 + 2 });
  });

  it("keeps subtracting for a source's workspace after its first addition, even before that is written", async () => {
    const db = openSqlite(":memory:");
    const store = new SqliteUsageStore(db);
    const counted = store.addStored("o_a", "dc_a", Date.now(), { events: 1, bytes: 5 });
    db.prepare(
      "INSERT INTO events (source_id, ms, n, channel, indexed_at_ms, event, emit_id, meta) VALUES ('dc_a', 1, 0, '', 1, '123', 'e', '{}')",
    ).run();
    // Removed in the same turn, while the addition still waits for the grouped write.
    db.prepare("DELETE FROM events WHERE source_id = 'dc_a'").run();
    await counted;
    expect(await store.getStored("o_a")).toEqual({ events: 0, bytes: 0 });
  });
});
