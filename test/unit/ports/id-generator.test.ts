import { describe, expect, it } from "vitest";
import { isId } from "#core/ids";
import { RandomBytePool, randomIdGenerator } from "#core/ports/id-generator";

describe("RandomBytePool", () => {
  it("hands out the requested number of bytes, never the same bytes twice, across refills", () => {
    const pool = new RandomBytePool(64);
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const bytes = pool.bytes(12);
      expect(bytes).toHaveLength(12);
      seen.add(bytes.toString("hex"));
    }
    expect(seen.size).toBe(200);
    // Larger than the pool: drawn directly.
    expect(pool.bytes(100)).toHaveLength(100);
    expect(Buffer.from(pool.base64url(100), "base64url")).toHaveLength(100);
  });

  it("returns bytes that a refill does not change", () => {
    const pool = new RandomBytePool(16);
    const first = pool.bytes(12);
    const copy = Buffer.from(first);
    pool.bytes(12); // refills the pool
    expect(first.equals(copy)).toBe(true);
  });
});

describe("randomIdGenerator", () => {
  it("makes well-formed, distinct ids and base64url secrets of the requested size", () => {
    const ids = randomIdGenerator({ nowMs: () => 1_790_000_000_000 });
    const made = Array.from({ length: 500 }, () => ids.newId("source"));
    expect(made.every((id) => isId("source", id))).toBe(true);
    expect(new Set(made).size).toBe(500);
    const secrets = Array.from({ length: 500 }, () => ids.newSecret(12));
    expect(secrets.every((secret) => /^[A-Za-z0-9_-]{16}$/.test(secret))).toBe(true);
    expect(new Set(secrets).size).toBe(500);
    expect(Buffer.from(ids.newSecret(24), "base64url")).toHaveLength(24);
  });
});
