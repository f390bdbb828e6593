import { describe, expect, it } from "vitest";
import { nextTurn } from "#adapters/local/event-loop";

const immediate = () => new Promise((resolve) => setImmediate(resolve));

describe("nextTurn", () => {
  it("lets one waiting piece of long work run per loop iteration, first come first served", async () => {
    const order: number[] = [];
    const waits = [1, 2, 3].map((n) => nextTurn().then(() => order.push(n)));
    const seen: number[] = [];
    for (let i = 0; i < 3; i++) {
      await immediate();
      seen.push(order.length);
    }
    await Promise.all(waits);
    // One released in each iteration (all three at once with a plain setImmediate).
    expect(seen).toEqual([1, 2, 3]);
    expect(order).toEqual([1, 2, 3]);
  });

  it("interleaves the pieces of two long tasks", async () => {
    const log: string[] = [];
    const task = async (name: string) => {
      for (let piece = 0; piece < 3; piece++) {
        log.push(name);
        await nextTurn();
      }
    };
    await Promise.all([task("a"), task("b")]);
    expect(log).toEqual(["a", "b", "a", "b", "a", "b"]);
  });
});
