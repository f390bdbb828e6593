import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
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
