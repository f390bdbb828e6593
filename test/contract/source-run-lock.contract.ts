import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import type { SourceRunLock } from "#core/ports/source-run-lock";

const LONG = 60_000;

/**
 * Behaviour every `SourceRunLock` adapter must have, on the real clock. `makeLock` returns a lock
 * with nothing held.
 */
export function sourceRunLockContract(makeLock: () => Promise<SourceRunLock>) {
  describe("SourceRunLock", () => {
    it("lets one holder in at a time: a waiter gets the source once it is released", async () => {
      const lock = await makeLock();
      const first = await lock.acquire("dc_one", { leaseMs: LONG });
      expect(first?.held()).toBe(true);
      let second: Awaited<ReturnType<SourceRunLock["acquire"]>> | "waiting" = "waiting";
      const waiting = lock.acquire("dc_one", { leaseMs: LONG, waitUntilMs: Date.now() + 10_000 }).then((lease) => {
        second = lease;
        return lease;
      });
      await sleep(100);
      expect(second).toBe("waiting");
      await first?.release();
      expect(first?.held()).toBe(false);
      const lease = await waiting;
      expect(lease?.held()).toBe(true);
      await lease?.release();
    });

    it("gives up at the waiter's deadline, leaving the holder's hold as it was", async () => {
      const lock = await makeLock();
      const holder = await lock.acquire("dc_one", { leaseMs: LONG });
      const started = Date.now();
      expect(await lock.acquire("dc_one", { leaseMs: LONG, waitUntilMs: started + 150 })).toBeUndefined();
      expect(Date.now() - started).toBeGreaterThanOrEqual(100);
      expect(await lock.acquire("dc_one", { leaseMs: LONG, waitUntilMs: Date.now() - 1 })).toBeUndefined();
      expect(holder?.held()).toBe(true);
      await holder?.release();
    });

    it("holds each source apart", async () => {
      const lock = await makeLock();
      const one = await lock.acquire("dc_one", { leaseMs: LONG });
      const other = await lock.acquire("dc_other", { leaseMs: LONG, waitUntilMs: Date.now() + 1_000 });
      expect(other?.held()).toBe(true);
      await Promise.all([one?.release(), other?.release()]);
    });

    it("frees a source whose holder never releases once its lease ends; the late release frees nothing", async () => {
      const lock = await makeLock();
      const stuck = await lock.acquire("dc_one", { leaseMs: 300 });
      const next = await lock.acquire("dc_one", { leaseMs: LONG, waitUntilMs: Date.now() + 10_000 });
      expect(next?.held()).toBe(true);
      expect(stuck?.held()).toBe(false);
      await stuck?.release();
      expect(next?.held()).toBe(true);
      expect(await lock.acquire("dc_one", { leaseMs: LONG, waitUntilMs: Date.now() + 200 })).toBeUndefined();
      await next?.release();
      const after = await lock.acquire("dc_one", { leaseMs: LONG, waitUntilMs: Date.now() + 1_000 });
      expect(after?.held()).toBe(true);
      await after?.release();
    });

    it("never lets two of many concurrent runs hold one source at once, and serves them all", async () => {
      const lock = await makeLock();
      let inside = 0;
      let most = 0;
      let served = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          const lease = await lock.acquire("dc_busy", { leaseMs: LONG, waitUntilMs: Date.now() + 20_000 });
          expect(lease).toBeDefined();
          inside++;
          most = Math.max(most, inside);
          await sleep(10);
          inside--;
          served++;
          await lease?.release();
        }),
      );
      expect({ most, served }).toEqual({ most: 1, served: 8 });
    });
  });
}
