/**
 * Resource identifiers: the spec's prefix followed by a body that sorts by creation time.
 * Time-sortable bodies let both stores page through resources in creation order with the id
 * itself as the key (see docs/table-design.md). The body is 10 characters of time (milliseconds
 * in Crockford base32) and 12 characters of randomness (60 bits), so ids stay unguessable.
 *
 * Ids Sluice makes have that shape, but ids it accepts are opaque (rest-api.md "Identifiers are
 * opaque strings"): a known prefix and 1 to {@link ID_BODY_MAX_LENGTH} characters of
 * `[A-Za-z0-9_-]` ({@link ID_BODY_PATTERN}), so ids shaped like the hosted service's (`p_MOCn3Ez`,
 * `dc_abc123`) are looked up and answer 404 where they do not exist, instead of a 400.
 */
import { sha256Hex } from "./sha256.ts";

export const ID_PREFIXES = {
  user: "u_",
  workspace: "o_",
  project: "proj_",
  workflow: "p_",
  source: "dc_",
  component: "sc_",
  subscription: "sub_",
  webhook: "wh_",
  account: "apn_",
  app: "app_",
  step: "c_",
  httpTrigger: "hi_",
  timerTrigger: "ti_",
  emailTrigger: "ei_",
  template: "tch_",
  deployment: "d_",
  apiKey: "key_",
  /** Not in the spec: one delivery of one event to one webhook (also the id of its dead letter). */
  delivery: "dlv_",
  /** Not in the spec: one run of a workflow (internal; `GET /v1/workflows/{id}/runs`). */
  run: "run_",
  /** A workspace's data store (the hosted service's `ds_` ids). */
  dataStore: "ds_",
} as const;

export type ResourceKind = keyof typeof ID_PREFIXES;

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
const TIME_CHARS = 10;
const RANDOM_CHARS = 12;

/** Longest body (after the prefix) of an id Sluice accepts. */
export const ID_BODY_MAX_LENGTH = 64;
/**
 * The body of an accepted id, as a regular expression source: letters, digits, `_` and `-`, the
 * alphabet of URL-safe ids. No character of it needs escaping in a URL, a header or a log line.
 */
export const ID_BODY_PATTERN = `[A-Za-z0-9_-]{1,${ID_BODY_MAX_LENGTH}}`;
const ACCEPTED_BODY = new RegExp(`^${ID_BODY_PATTERN}$`);
/** Longest id Sluice accepts: the longest prefix and the longest body. */
export const ID_MAX_LENGTH =
  Math.max(...Object.values(ID_PREFIXES).map((prefix) => prefix.length)) + ID_BODY_MAX_LENGTH;

/** The pattern of an accepted id with `prefix`, anchored: `^dc_[A-Za-z0-9_-]{1,64}$`. */
export function idPattern(prefix: string): string {
  return `^${prefix}${ID_BODY_PATTERN}$`;
}

/** Builds an id from a time and random bytes; the `IdGenerator` port supplies both. */
export function formatId(kind: ResourceKind, epochMs: number, random: Uint8Array): string {
  let time = "";
  let rest = Math.max(0, Math.floor(epochMs));
  for (let i = 0; i < TIME_CHARS; i++) {
    time = ALPHABET[rest % 32] + time;
    rest = Math.floor(rest / 32);
  }
  let tail = "";
  for (let i = 0; i < RANDOM_CHARS; i++) {
    tail += ALPHABET[(random[i] ?? 0) % 32];
  }
  return `${ID_PREFIXES[kind]}${time}${tail}`;
}

/**
 * The id of a probe (a dynamic props probe source, an action run on its own, their parts): time 0,
 * which no id Sluice makes for a resource has (`PROBE_ID_TIME`, whose functions the stack's
 * rights single out), and a body derived from `parts`, so the same parts name the same probe.
 */
export function probeIdOf(kind: ResourceKind, ...parts: string[]): string {
  return formatId(kind, 0, Buffer.from(sha256Hex(parts.join("\n")), "hex"));
}

/** The time a {@link formatId} id of `kind` was made at (epoch ms); undefined for an id of another shape. */
export function idEpochMs(kind: ResourceKind, id: string): number | undefined {
  const prefix = ID_PREFIXES[kind];
  if (!id.startsWith(prefix)) return undefined;
  const time = id.slice(prefix.length, prefix.length + TIME_CHARS);
  if (time.length < TIME_CHARS) return undefined;
  let ms = 0;
  for (const char of time) {
    const digit = ALPHABET.indexOf(char);
    if (digit < 0) return undefined;
    ms = ms * 32 + digit;
  }
  return ms;
}

/** True when `id` has the prefix of `kind` and an accepted body ({@link ID_BODY_PATTERN}). */
export function isId(kind: ResourceKind, id: string): boolean {
  const prefix = ID_PREFIXES[kind];
  return id.startsWith(prefix) && ACCEPTED_BODY.test(id.slice(prefix.length));
}

export const RANDOM_BYTES_PER_ID = RANDOM_CHARS;
