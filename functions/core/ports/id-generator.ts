import { randomBytes, randomFillSync } from "node:crypto";
import { formatId, RANDOM_BYTES_PER_ID, type ResourceKind } from "#core/ids";
import type { Clock } from "./clock.ts";

/** Makes new resource ids and secrets; injected so tests can make them predictable. */
export interface IdGenerator {
  newId(kind: ResourceKind): string;
  /** A random secret of `bytes` bytes, base64url encoded. */
  newSecret(bytes: number): string;
}

/** Bytes drawn from the CSPRNG at a time; requests of up to `POOLED_MAX` bytes are cut from them. */
const POOL_BYTES = 4096;
const POOLED_MAX = 64;

/**
 * Cryptographically random bytes, drawn from the CSPRNG a few KiB at a time (as Node's own
 * `randomUUID` does): every request gets bytes no other request got. Each source run takes two
 * secrets, and one `randomBytes` call per secret was a measurable share of local mode's ingest.
 */
export class RandomBytePool {
  private readonly pool: Buffer;
  private offset: number;

  constructor(private readonly poolBytes = POOL_BYTES) {
    this.pool = Buffer.alloc(poolBytes);
    this.offset = poolBytes;
  }

  /** `bytes` random bytes. */
  bytes(bytes: number): Buffer {
    if (!this.pooled(bytes)) return randomBytes(bytes);
    // A copy: the pool's bytes are overwritten when it is refilled.
    return Buffer.from(this.take(bytes));
  }

  /** `bytes` random bytes, base64url encoded. */
  base64url(bytes: number): string {
    if (!this.pooled(bytes)) return randomBytes(bytes).toString("base64url");
    return this.take(bytes).toString("base64url");
  }

  private pooled(bytes: number): boolean {
    return bytes <= POOLED_MAX && bytes <= this.poolBytes;
  }

  /** The next `bytes` unused bytes of the pool (read them before the next call). */
  private take(bytes: number): Buffer {
    if (this.offset + bytes > this.poolBytes) {
      randomFillSync(this.pool);
      this.offset = 0;
    }
    const start = this.offset;
    this.offset += bytes;
    return this.pool.subarray(start, this.offset);
  }
}

export function randomIdGenerator(clock: Clock): IdGenerator {
  const random = new RandomBytePool();
  return {
    newId: (kind) => formatId(kind, clock.nowMs(), random.bytes(RANDOM_BYTES_PER_ID)),
    newSecret: (bytes) => random.base64url(bytes),
  };
}
