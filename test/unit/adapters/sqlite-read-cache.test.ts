import { describe, expect, it } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteReadCache } from "#adapters/local/sqlite-read-cache";

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

// What another connection's commit does to the cache is tested through the stores that use it
// (sqlite-source-store.test.ts, sqlite-subscription-store.test.ts).
describe("SqliteReadCache", () => {
  it("holds at most `limit` entries per map: one more empties every map of the cache", () => {
    const cache = new SqliteReadCache(openSqlite(":memory:"), 2);
    const byId = cache.map<{ n: number }>();
    const byKey = cache.map<{ n: number }>();
    expect(cache.get(byId, "a")).toBeUndefined();
    cache.set(byId, "a", { n: 1 });
    cache.set(byId, "b", { n: 2 });
    cache.set(byKey, "k", { n: 3 });
    expect(cache.get(byId, "b")).toEqual({ n: 2 });
    cache.set(byId, "c", { n: 4 });
    expect([cache.get(byId, "a"), cache.get(byId, "b"), cache.get(byKey, "k")]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    expect(cache.get(byId, "c")).toEqual({ n: 4 });
  });

  it("stores values deeply frozen", () => {
    const cache = new SqliteReadCache(openSqlite(":memory:"));
    const map = cache.map<{ props: { list: number[] } }>();
    cache.get(map, "a");
    const stored = cache.set(map, "a", { props: { list: [1] } });
    expect(() => stored.props.list.push(2)).toThrow(TypeError);
    expect(cache.get(map, "a")).toEqual({ props: { list: [1] } });
  });

  it("keeps nothing set in a turn before that turn's first lookup (the file's version is not checked yet)", async () => {
    const cache = new SqliteReadCache(openSqlite(":memory:"));
    const map = cache.map<number>();
    cache.get(map, "warm");
    await nextTurn();
    expect(cache.set(map, "a", 1)).toBe(1);
    expect(cache.get(map, "a")).toBeUndefined();
    cache.set(map, "a", 2);
    expect(cache.get(map, "a")).toBe(2);
    await nextTurn();
    expect(cache.get(map, "a")).toBe(2);
  });

  it("caches nothing with a limit of 0", () => {
    const cache = new SqliteReadCache(openSqlite(":memory:"), 0);
    const map = cache.map<number>();
    expect(cache.get(map, "a")).toBeUndefined();
    expect(cache.set(map, "a", 1)).toBe(1);
    expect(cache.get(map, "a")).toBeUndefined();
  });
});
