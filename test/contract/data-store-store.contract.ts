import { describe, expect, it } from "vitest";
import type { DataStoreRecord, DataStoreStore } from "#core/ports/data-store-store";

let sequence = 0;
const store = (workspaceId: string, name: string): DataStoreRecord => {
  sequence += 1;
  return { id: `ds_contract${sequence}`, workspaceId, name, createdAt: 1_790_000_000_000 + sequence };
};

const NOW = 1_790_000_000_000;
const PAGE = { limit: 100, maxBytes: 1024 * 1024 };

/** The behaviour every `DataStoreStore` adapter has; `make` gives an empty store each time. */
export function dataStoreStoreContract(make: () => Promise<DataStoreStore>) {
  describe("DataStoreStore contract", () => {
    it("finds a workspace's store by name, creating it once; the same name in another workspace is another store", async () => {
      const stores = await make();
      const first = await stores.findOrCreateStore(store("o_a", "orders"), 10);
      expect(await stores.findOrCreateStore(store("o_a", "orders"), 10)).toEqual(first);
      const other = await stores.findOrCreateStore(store("o_b", "orders"), 10);
      expect(other.id).not.toBe(first.id);
      expect(await stores.getStore(first.id)).toEqual(first);
      expect(await stores.getStore("ds_missing")).toBeUndefined();
    });

    it("refuses a new store past the workspace's limit with a conflict, but still finds existing ones", async () => {
      const stores = await make();
      const kept = await stores.findOrCreateStore(store("o_a", "one"), 2);
      await stores.findOrCreateStore(store("o_a", "two"), 2);
      await expect(stores.findOrCreateStore(store("o_a", "three"), 2)).rejects.toMatchObject({ code: "conflict" });
      expect(await stores.findOrCreateStore(store("o_a", "one"), 2)).toEqual(kept);
      await expect(stores.findOrCreateStore(store("o_b", "three"), 2)).resolves.toMatchObject({ name: "three" });
    });

    it("lists a workspace's stores by name, and deletes a store with its records", async () => {
      const stores = await make();
      const b = await stores.findOrCreateStore(store("o_a", "b"), 10);
      const a = await stores.findOrCreateStore(store("o_a", "a"), 10);
      await stores.findOrCreateStore(store("o_z", "c"), 10);
      expect(await stores.listStores("o_a")).toEqual([a, b]);
      await stores.putEntry(a.id, { key: "k", value: "1", expiry: null }, NOW, 10);
      await stores.deleteStore(a.id);
      await stores.deleteStore(a.id);
      expect(await stores.getStore(a.id)).toBeUndefined();
      expect(await stores.listStores("o_a")).toEqual([b]);
      expect(await stores.getEntry(a.id, "k", NOW)).toBeUndefined();
      expect(await stores.putEntry(a.id, { key: "k", value: "1", expiry: null }, NOW, 10)).toBe("gone");
      // The name is free again.
      expect((await stores.findOrCreateStore(store("o_a", "a"), 10)).id).not.toBe(a.id);
    });

    it("writes, overwrites and reads records as JSON text", async () => {
      const stores = await make();
      const { id } = await stores.findOrCreateStore(store("o_a", "s"), 10);
      expect(await stores.putEntry(id, { key: "k", value: '{"a":1}', expiry: null }, NOW, 10)).toBe("stored");
      expect(await stores.getEntry(id, "k", NOW)).toEqual({ key: "k", value: '{"a":1}' });
      await stores.putEntry(id, { key: "k", value: '""', expiry: "keep" }, NOW, 10);
      expect(await stores.getEntry(id, "k", NOW)).toEqual({ key: "k", value: '""' });
      expect(await stores.getEntry(id, "other", NOW)).toBeUndefined();
    });

    it("treats a record past its expiry as absent everywhere, and keeps or drops expiries as told", async () => {
      const stores = await make();
      const { id } = await stores.findOrCreateStore(store("o_a", "s"), 10);
      await stores.putEntry(id, { key: "t", value: "1", expiry: NOW + 1000 }, NOW, 10);
      expect(await stores.getEntry(id, "t", NOW + 999)).toEqual({ key: "t", value: "1", expiresAt: NOW + 1000 });
      expect(await stores.getEntry(id, "t", NOW + 1000)).toBeUndefined();
      expect((await stores.listEntries(id, NOW + 1000, PAGE)).entries).toEqual([]);
      expect(await stores.countEntries(id, NOW + 1000)).toBe(0);
      expect(await stores.setExpiry(id, "t", NOW + 5000, NOW + 1000)).toBe(false);
      expect(await stores.deleteEntry(id, "t", NOW + 1000)).toBe(false);

      // "keep": a live record keeps its expiry; an expired one is a new record, without one.
      await stores.putEntry(id, { key: "live", value: "1", expiry: NOW + 1000 }, NOW, 10);
      await stores.putEntry(id, { key: "live", value: "2", expiry: "keep" }, NOW + 10, 10);
      expect(await stores.getEntry(id, "live", NOW + 10)).toEqual({ key: "live", value: "2", expiresAt: NOW + 1000 });
      await stores.putEntry(id, { key: "live", value: "3", expiry: "keep" }, NOW + 2000, 10);
      expect(await stores.getEntry(id, "live", NOW + 9_999_999)).toEqual({ key: "live", value: "3" });
      // `null` removes an expiry; setExpiry sets and removes one.
      await stores.putEntry(id, { key: "n", value: "1", expiry: NOW + 1000 }, NOW, 10);
      await stores.putEntry(id, { key: "n", value: "1", expiry: null }, NOW, 10);
      expect(await stores.getEntry(id, "n", NOW + 5000)).toEqual({ key: "n", value: "1" });
      expect(await stores.setExpiry(id, "n", NOW + 100, NOW)).toBe(true);
      expect(await stores.getEntry(id, "n", NOW + 100)).toBeUndefined();
      await stores.putEntry(id, { key: "m", value: "1", expiry: NOW + 100 }, NOW, 10);
      expect(await stores.setExpiry(id, "m", null, NOW)).toBe(true);
      expect(await stores.getEntry(id, "m", NOW + 5000)).toEqual({ key: "m", value: "1" });
    });

    it("deletes one record, saying whether there was one", async () => {
      const stores = await make();
      const { id } = await stores.findOrCreateStore(store("o_a", "s"), 10);
      await stores.putEntry(id, { key: "k", value: "1", expiry: null }, NOW, 10);
      expect(await stores.deleteEntry(id, "k", NOW)).toBe(true);
      expect(await stores.deleteEntry(id, "k", NOW)).toBe(false);
      expect(await stores.getEntry(id, "k", NOW)).toBeUndefined();
    });

    it("lists live records in key byte order, in pages bounded by count and bytes", async () => {
      const stores = await make();
      const { id } = await stores.findOrCreateStore(store("o_a", "s"), 100);
      const keys = ["b", "a", "a b", "é", "Z", "", "b/1", "zz"];
      for (const key of keys) await stores.putEntry(id, { key, value: JSON.stringify(key), expiry: null }, NOW, 100);
      await stores.putEntry(id, { key: "gone", value: "1", expiry: NOW }, NOW - 1, 100);
      const sorted = [...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
      const all = await stores.listEntries(id, NOW, PAGE);
      expect(all.entries.map((entry) => entry.key)).toEqual(sorted);
      expect(all.nextAfter).toBeUndefined();
      expect(await stores.countEntries(id, NOW)).toBe(keys.length);

      const seen: string[] = [];
      let after: string | undefined;
      do {
        const page = await stores.listEntries(id, NOW, {
          limit: 3,
          maxBytes: 1024,
          ...(after === undefined ? {} : { after }),
        });
        expect(page.entries.length).toBeLessThanOrEqual(3);
        seen.push(...page.entries.map((entry) => entry.key));
        after = page.nextAfter;
      } while (after !== undefined);
      expect(seen).toEqual(sorted);

      const byBytes = await stores.listEntries(id, NOW, { limit: 100, maxBytes: 1 });
      expect(byBytes.entries).toHaveLength(1);
      expect(byBytes.nextAfter).toBe(sorted[0]);
      const keysOnly = await stores.listEntries(id, NOW, { ...PAGE, keysOnly: true });
      expect(keysOnly.entries.map((entry) => [entry.key, entry.value])).toEqual(sorted.map((key) => [key, ""]));
    });

    it("refuses a new key past the record limit, but not an overwrite; expired and deleted records make room", async () => {
      const stores = await make();
      const { id } = await stores.findOrCreateStore(store("o_a", "s"), 10);
      await stores.putEntry(id, { key: "a", value: "1", expiry: null }, NOW, 3);
      await stores.putEntry(id, { key: "b", value: "1", expiry: null }, NOW, 3);
      await stores.putEntry(id, { key: "t", value: "1", expiry: NOW + 10 }, NOW, 3);
      expect(await stores.putEntry(id, { key: "c", value: "1", expiry: null }, NOW, 3)).toBe("full");
      expect(await stores.putEntry(id, { key: "a", value: "2", expiry: null }, NOW, 3)).toBe("stored");
      expect(await stores.putEntry(id, { key: "c", value: "1", expiry: null }, NOW + 10, 3)).toBe("stored");
      expect(await stores.putEntry(id, { key: "d", value: "1", expiry: null }, NOW + 10, 3)).toBe("full");
      expect(await stores.deleteEntry(id, "b", NOW + 10)).toBe(true);
      expect(await stores.putEntry(id, { key: "d", value: "1", expiry: null }, NOW + 10, 3)).toBe("stored");
      expect(await stores.getEntry(id, "c", NOW + 10)).toEqual({ key: "c", value: "1" });
    });

    it("clears every record and keeps the store, which then fills up afresh", async () => {
      const stores = await make();
      const { id } = await stores.findOrCreateStore(store("o_a", "s"), 10);
      const other = await stores.findOrCreateStore(store("o_a", "other"), 10);
      for (const key of ["a", "b"]) await stores.putEntry(id, { key, value: "1", expiry: null }, NOW, 2);
      await stores.putEntry(other.id, { key: "a", value: "1", expiry: null }, NOW, 2);
      await stores.clearEntries(id);
      expect(await stores.countEntries(id, NOW)).toBe(0);
      expect(await stores.getStore(id)).toMatchObject({ id });
      expect(await stores.getEntry(other.id, "a", NOW)).toEqual({ key: "a", value: "1" });
      for (const key of ["c", "d"]) {
        expect(await stores.putEntry(id, { key, value: "1", expiry: null }, NOW, 2)).toBe("stored");
      }
      expect(await stores.putEntry(id, { key: "e", value: "1", expiry: null }, NOW, 2)).toBe("full");
    });
  });
}
