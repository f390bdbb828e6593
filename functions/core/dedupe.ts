/**
 * Ordering and dedupe of the events one run emitted (component-model.md "Events",
 * real-behaviour.md §1.5). The runtime returns emits in call order; trusted code orders them with
 * {@link orderEmits}, then filters them with {@link applyDedupe} against the source's stored
 * `DedupeState`, then stores what was accepted.
 */
import type { EmitRecord } from "#runtime/protocol";
import type { DedupeState } from "./component-model.ts";

export const DEDUPE_STRATEGIES = ["unique", "greatest", "last"] as const;
export type DedupeStrategy = (typeof DEDUPE_STRATEGIES)[number];

/** Ids the `unique` strategy remembers (component-model.md "Limits"). */
export const UNIQUE_CACHE_SIZE = 100;

export const isDedupeStrategy = (value: unknown): value is DedupeStrategy =>
  (DEDUPE_STRATEGIES as readonly unknown[]).includes(value);

/**
 * Orders emits oldest to newest by `ts` (epoch ms). The rule: emits with a `ts` (a finite number)
 * are sorted among the positions they occupy, stably (equal `ts` keep call order); emits without
 * one stay at their position in call order. So `[A ts=5, B, C ts=1]` becomes `[C, B, A]`.
 */
export function orderEmits(emits: EmitRecord[]): EmitRecord[] {
  const slots: number[] = [];
  const timed: EmitRecord[] = [];
  emits.forEach((emit, index) => {
    if (tsOf(emit) !== undefined) {
      slots.push(index);
      timed.push(emit);
    }
  });
  // Array.prototype.sort is stable (ES2019).
  timed.sort((a, b) => (tsOf(a) as number) - (tsOf(b) as number));
  const out = [...emits];
  slots.forEach((slot, i) => {
    out[slot] = timed[i] as EmitRecord;
  });
  return out;
}

function tsOf(emit: EmitRecord): number | undefined {
  const ts = emit.meta.ts;
  return typeof ts === "number" && Number.isFinite(ts) ? ts : undefined;
}

export interface DedupeResult {
  accepted: EmitRecord[];
  /**
   * `kind` tells a mistake in the component (`missing_id`, worth a line in the source's logs) from
   * the strategy doing its job (`duplicate`: a polling source re-emits what it saw before).
   */
  refused: { emit: EmitRecord; reason: string; kind: "missing_id" | "duplicate" }[];
  /** The state to store; a new object, the input is never changed. */
  state: DedupeState;
  /** Set when the component names a strategy that does not exist: its events are not deduped. */
  warning?: string;
}

/**
 * Applies the component's `dedupe` strategy to emits already in order ({@link orderEmits}).
 *
 * - No strategy (`undefined` or `""`): everything is accepted, the state is unchanged.
 * - An unknown strategy: treated as none, with a `warning` for the source's logs (refusing every
 *   event would lose data over a typo the component's author cannot see otherwise).
 * - Under a strategy, the key is `meta.id` (never `event.id`); an emit without one (absent, `null`
 *   or `""`) is refused with a reason rather than dropped silently.
 * - `unique`: ids compared as strings (`1` and `"1"` are the same id); a FIFO of the last 100
 *   accepted ids, which also dedupes within the batch.
 * - `greatest`: accepted only when greater than the greatest id so far, batch included. Numeric
 *   when both ids are numbers or numeric strings (integers compared exactly, beyond 2^53 too),
 *   otherwise a string comparison (which orders ISO 8601 timestamps correctly).
 * - `last`: the emits after the last one whose id matches the cached id are accepted; when none
 *   matches, all are. The cache becomes the id of the last accepted emit (the newest in `ts` order).
 */
export function applyDedupe(strategy: string | undefined, ordered: EmitRecord[], state: DedupeState): DedupeResult {
  if (strategy === undefined || strategy === "") return { accepted: [...ordered], refused: [], state: { ...state } };
  if (!isDedupeStrategy(strategy)) {
    return {
      accepted: [...ordered],
      refused: [],
      state: { ...state },
      warning: `unknown dedupe strategy "${strategy}" (known: ${DEDUPE_STRATEGIES.join(", ")}): events are emitted without dedupe`,
    };
  }

  const refused: DedupeResult["refused"] = [];
  const withId: { emit: EmitRecord; id: string | number }[] = [];
  for (const emit of ordered) {
    const id = idOf(emit);
    if (id === undefined)
      refused.push({ emit, reason: `emitted without an id under dedupe strategy ${strategy}`, kind: "missing_id" });
    else withId.push({ emit, id });
  }

  const accepted: EmitRecord[] = [];
  const next: DedupeState = { ...state };
  if (strategy === "unique") {
    const cache = [...(state.unique ?? [])];
    const seen = new Set(cache);
    for (const { emit, id } of withId) {
      const key = String(id);
      if (seen.has(key)) {
        refused.push({
          emit,
          reason: `id ${JSON.stringify(id)} was already emitted (dedupe: unique)`,
          kind: "duplicate",
        });
        continue;
      }
      accepted.push(emit);
      cache.push(key);
      seen.add(key);
      while (cache.length > UNIQUE_CACHE_SIZE) seen.delete(cache.shift() as string);
    }
    next.unique = cache;
  } else if (strategy === "greatest") {
    let greatest = state.greatest;
    for (const { emit, id } of withId) {
      if (greatest === undefined || compareIds(id, greatest) > 0) {
        accepted.push(emit);
        greatest = id;
      } else {
        refused.push({
          emit,
          reason: `id ${JSON.stringify(id)} is not greater than ${JSON.stringify(greatest)} (dedupe: greatest)`,
          kind: "duplicate",
        });
      }
    }
    if (greatest !== undefined) next.greatest = greatest;
  } else {
    const cached = state.last;
    const match = cached === undefined ? -1 : withId.findLastIndex(({ id }) => String(id) === String(cached));
    withId.forEach(({ emit, id }, index) => {
      if (index > match) accepted.push(emit);
      else {
        refused.push({
          emit,
          reason: `id ${JSON.stringify(id)} is not after the last emitted id (dedupe: last)`,
          kind: "duplicate",
        });
      }
    });
    const newest = withId.at(-1);
    if (match < withId.length - 1 && newest) next.last = newest.id;
  }
  return { accepted, refused, state: next };
}

function idOf(emit: EmitRecord): string | number | undefined {
  const id: unknown = emit.meta.id;
  if (typeof id === "number" && Number.isFinite(id)) return id;
  if (typeof id === "string" && id !== "") return id;
  return undefined;
}

const NUMERIC = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;
const INTEGER = /^[-+]?\d+$/;

/** Compares two ids: numerically when both are numeric, otherwise as strings. */
export function compareIds(a: string | number, b: string | number): number {
  const numericA = typeof a === "number" || NUMERIC.test(a);
  const numericB = typeof b === "number" || NUMERIC.test(b);
  if (numericA && numericB) {
    const bigA = asBigInt(a);
    const bigB = asBigInt(b);
    if (bigA !== undefined && bigB !== undefined) return bigA === bigB ? 0 : bigA > bigB ? 1 : -1;
    return Math.sign(Number(a) - Number(b));
  }
  const textA = String(a);
  const textB = String(b);
  return textA === textB ? 0 : textA > textB ? 1 : -1;
}

function asBigInt(value: string | number): bigint | undefined {
  if (typeof value === "number") return Number.isSafeInteger(value) ? BigInt(value) : undefined;
  return INTEGER.test(value) ? BigInt(value) : undefined;
}
