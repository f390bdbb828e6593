/**
 * Resource identifiers: the spec's prefix followed by a body that sorts by creation time.
 * Time-sortable bodies let both stores page through resources in creation order with the id
 * itself as the key (see docs/table-design.md). The body is 10 characters of time (milliseconds
 * in Crockford base32) and 12 characters of randomness (60 bits), so ids stay unguessable.
 */
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
} as const;

export type ResourceKind = keyof typeof ID_PREFIXES;

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
const TIME_CHARS = 10;
const RANDOM_CHARS = 12;
const BODY = new RegExp(`^[${ALPHABET}]{${TIME_CHARS + RANDOM_CHARS}}$`);

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

/** True when `id` has the prefix of `kind` and a well-formed body. */
export function isId(kind: ResourceKind, id: string): boolean {
  const prefix = ID_PREFIXES[kind];
  return id.startsWith(prefix) && BODY.test(id.slice(prefix.length));
}

export const RANDOM_BYTES_PER_ID = RANDOM_CHARS;
