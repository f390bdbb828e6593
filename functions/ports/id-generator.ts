import { randomBytes } from "node:crypto";
import { formatId, RANDOM_BYTES_PER_ID, type ResourceKind } from "#core/ids";
import type { Clock } from "./clock.ts";

/** Makes new resource ids and secrets; injected so tests can make them predictable. */
export interface IdGenerator {
  newId(kind: ResourceKind): string;
  /** A random secret of `bytes` bytes, base64url encoded. */
  newSecret(bytes: number): string;
}

export function randomIdGenerator(clock: Clock): IdGenerator {
  return {
    newId: (kind) => formatId(kind, clock.nowMs(), randomBytes(RANDOM_BYTES_PER_ID)),
    newSecret: (bytes) => randomBytes(bytes).toString("base64url"),
  };
}
