import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startWalCheckpointer } from "#adapters/local/sqlite-checkpointer";
import { openSqlite, type SqliteDatabase } from "#adapters/local/sqlite-database";
import { eventually, when } from "../../support/eventually.ts";
import { recordingLogger } from "../../support/recording-logger.ts";

const dirs: string[] = [];
const opened: SqliteDatabase[] = [];
afterEach(() => {
  for (const db of opened.splice(0)) if (db.open) db.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function database() {
  const dir = mkdtempSync(join(tmpdir(), "sluice-checkpoint-"));
  dirs.push(dir);
  const file = join(dir, "sluice.db");
  const db = openSqlite(file);
  opened.push(db);
  db.exec("CREATE TABLE filler (id INTEGER PRIMARY KEY, data TEXT NOT NULL)");
  return { db, file };
}

/** About `pages` 4 KiB pages of new rows, in one commit. */
function write(db: SqliteDatabase, pages: number) {
  const insert = db.prepare("INSERT INTO filler (data) VALUES (?)");
  db.transaction(() => {
    for (let i = 0; i < pages * 4; i++) insert.run("x".repeat(900));
  })();
}

const autocheckpoint = (db: SqliteDatabase) => db.pragma("wal_autocheckpoint", { simple: true });

describe("startWalCheckpointer", () => {
  it("takes the checkpoints off the server's connection and copies the WAL into the file from its worker", async () => {
    const { db, file } = database();
    const errors: Record<string, unknown>[] = [];
    const checkpointer = await startWalCheckpointer(db, file, recordingLogger(errors), { intervalMs: 20 });
    try {
      expect(autocheckpoint(db)).toBe(0);
      const before = statSync(file).size;
      // Far past the 1,000 pages at which the connection itself would have checkpointed.
      write(db, 1500);
      // The worker copied the pages into the database file (which only a checkpoint writes).
      await eventually(() => when(statSync(file).size > before + 1000 * 4096), "the worker's checkpoint");
      expect(db.prepare("SELECT count(*) AS rows FROM filler").get()).toEqual({ rows: 6000 });
    } finally {
      await checkpointer.stop();
    }
    // Stopped: the connection checkpoints by itself again.
    expect(autocheckpoint(db)).toBe(1000);
    expect(errors).toEqual([]);
  });

  it("starts the WAL over while writes never pause, so that it stops growing", async () => {
    const { db, file } = database();
    const errors: Record<string, unknown>[] = [];
    const checkpointer = await startWalCheckpointer(db, file, recordingLogger(errors), {
      intervalMs: 10,
      restartPages: 128,
      catchUpPages: 128,
    });
    const insert = db.prepare("INSERT INTO filler (data) VALUES (?)");
    let pagesWritten = 0;
    try {
      // A commit of about a page every turn of the event loop, for a second: the worker's PASSIVE
      // checkpoints never find the WAL without a newer frame than the one they copied up to.
      const until = Date.now() + 1_000;
      while (Date.now() < until) {
        insert.run("x".repeat(3_000));
        pagesWritten++;
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      await checkpointer.stop();
    }
    const walPages = statSync(`${file}-wal`).size / 4096;
    // Every commit adds at least one frame: a WAL never started over holds at least one page per
    // commit (about four here: 45,000 pages for 12,000 commits before decision 445).
    expect(pagesWritten).toBeGreaterThan(1_000);
    expect(walPages).toBeLessThan(pagesWritten);
    expect(db.prepare("SELECT count(*) AS rows FROM filler").get()).toEqual({ rows: pagesWritten });
    expect(errors).toEqual([]);
  });

  it("leaves the checkpoints to the server's connection when the worker cannot open the file", async () => {
    const { db } = database();
    const errors: Record<string, unknown>[] = [];
    const checkpointer = await startWalCheckpointer(db, join(dirs[0] as string, "missing.db"), recordingLogger(errors));
    await checkpointer.stop();
    expect(autocheckpoint(db)).toBe(1000);
    expect(errors).toEqual([expect.objectContaining({ message: expect.stringContaining("WAL checkpoint worker") })]);
  });
});
