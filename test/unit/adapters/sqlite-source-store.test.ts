import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteSourceStore } from "#adapters/local/sqlite-source-store";
import type { SourceRecord } from "#core/component-model";
import { sourceRecord } from "../../support/source-record.ts";

const OWNER = { user: { id: "u_owner" }, workspace: { id: "o_owner" } };
const withKey = (id: string, endpointKey: string): SourceRecord => ({ ...sourceRecord(OWNER, id, 1), endpointKey });
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("SqliteSourceStore's cache of read sources", () => {
  it("never answers from the cache what this store changed since: update, endpoint key change, delete", async () => {
    const store = new SqliteSourceStore(openSqlite(":memory:"));
    await store.createSource({ ...withKey("dc_a", "key-a"), configuredProps: { n: 1 } });
    expect((await store.findSourceByEndpointKey("key-a"))?.id).toBe("dc_a");
    expect((await store.getSource("dc_a"))?.configuredProps).toEqual({ n: 1 });

    await store.updateSource({ ...withKey("dc_a", "key-b"), configuredProps: { n: 2 }, active: false });
    expect(await store.findSourceByEndpointKey("key-a")).toBeUndefined();
    expect(await store.findSourceByEndpointKey("key-b")).toMatchObject({ id: "dc_a", active: false });
    expect((await store.getSource("dc_a"))?.configuredProps).toEqual({ n: 2 });

    await store.deleteSource("dc_a");
    expect(await store.getSource("dc_a")).toBeUndefined();
    expect(await store.findSourceByEndpointKey("key-b")).toBeUndefined();
  });

  it("hands out copies: changing a returned record does not change what the next read returns", async () => {
    const store = new SqliteSourceStore(openSqlite(":memory:"));
    await store.createSource({ ...withKey("dc_a", "key-a"), configuredProps: { n: 1 } });
    const first = (await store.getSource("dc_a")) as SourceRecord;
    first.name = "changed";
    first.active = false;
    expect(() => {
      (first.configuredProps as Record<string, unknown>).n = 2;
    }).toThrow(TypeError);
    expect(await store.getSource("dc_a")).toMatchObject({ name: "feed", active: true, configuredProps: { n: 1 } });
    expect(await store.findSourceByEndpointKey("key-a")).toMatchObject({ name: "feed", active: true });
  });

  it("sees a write made by another connection to the file from the next turn of the event loop", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-source-cache-"));
    dirs.push(dir);
    const mine = new SqliteSourceStore(openSqlite(join(dir, "sluice.db")));
    const other = new SqliteSourceStore(openSqlite(join(dir, "sluice.db")));
    await mine.createSource(withKey("dc_a", "key-a"));
    expect((await mine.getSource("dc_a"))?.name).toBe("feed");
    expect((await mine.findSourceByEndpointKey("key-a"))?.name).toBe("feed");

    await other.updateSource({ ...withKey("dc_a", "key-a"), name: "renamed" });
    await nextTurn();
    expect((await mine.getSource("dc_a"))?.name).toBe("renamed");
    expect((await mine.findSourceByEndpointKey("key-a"))?.name).toBe("renamed");

    await other.deleteSource("dc_a");
    await nextTurn();
    expect(await mine.findSourceByEndpointKey("key-a")).toBeUndefined();

    // A key known to name no source (remembered: workflow triggers ask here on every request)
    // is found once another connection gives it to a source, and once this store does.
    expect(await mine.findSourceByEndpointKey("key-c")).toBeUndefined();
    await other.createSource(withKey("dc_c", "key-c"));
    await nextTurn();
    expect((await mine.findSourceByEndpointKey("key-c"))?.id).toBe("dc_c");
    expect(await mine.findSourceByEndpointKey("key-d")).toBeUndefined();
    await mine.createSource(withKey("dc_d", "key-d"));
    expect((await mine.findSourceByEndpointKey("key-d"))?.id).toBe("dc_d");
  });

  it("stays bounded: past cacheSize sources it starts over, and every read still answers", async () => {
    const store = new SqliteSourceStore(openSqlite(":memory:"), { cacheSize: 3 });
    for (let i = 0; i < 10; i++) await store.createSource(withKey(`dc_${i}`, `key-${i}`));
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 10; i++) {
        expect((await store.findSourceByEndpointKey(`key-${i}`))?.id).toBe(`dc_${i}`);
        expect((await store.getSource(`dc_${i}`))?.endpointKey).toBe(`key-${i}`);
      }
    }
  });
});

describe("SqliteSourceStore's cache of source states", () => {
  it("answers a state write's next read from the file, and a conflicting write does not leave a stale state", async () => {
    const store = new SqliteSourceStore(openSqlite(":memory:"));
    expect(await store.getSourceState("dc_a")).toEqual({ db: {}, dedupe: {}, version: 0 });
    await store.putSourceState("dc_a", { db: { n: 1 }, dedupe: {} }, 0);
    expect(await store.getSourceState("dc_a")).toEqual({ db: { n: 1 }, dedupe: {}, version: 1 });
    await expect(store.putSourceState("dc_a", { db: { n: 9 }, dedupe: {} }, 0)).rejects.toMatchObject({
      code: "conflict",
    });
    const state = await store.getSourceState("dc_a");
    expect(state).toEqual({ db: { n: 1 }, dedupe: {}, version: 1 });
    expect(() => {
      state.db.n = 2;
    }).toThrow(TypeError);
    await store.putSourceState("dc_a", { db: { n: 2 }, dedupe: { unique: ["x"] } }, 1);
    expect(await store.getSourceState("dc_a")).toEqual({ db: { n: 2 }, dedupe: { unique: ["x"] }, version: 2 });
    await store.deleteSource("dc_a");
    expect(await store.getSourceState("dc_a")).toEqual({ db: {}, dedupe: {}, version: 0 });
  });

  it("sees a state written by another connection from the next turn of the event loop", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-state-cache-"));
    dirs.push(dir);
    const mine = new SqliteSourceStore(openSqlite(join(dir, "sluice.db")));
    const other = new SqliteSourceStore(openSqlite(join(dir, "sluice.db")));
    expect((await mine.getSourceState("dc_a")).version).toBe(0);
    await other.putSourceState("dc_a", { db: { n: 1 }, dedupe: {} }, 0);
    await nextTurn();
    expect(await mine.getSourceState("dc_a")).toEqual({ db: { n: 1 }, dedupe: {}, version: 1 });
  });
});
