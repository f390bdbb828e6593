import type { SqliteDatabase } from "./sqlite-database.ts";

/** Freezes `value` and everything reachable from it; returns it. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/**
 * An in-process cache of what one store read from the local SQLite file: a few maps, emptied
 * together. It holds only what nothing can have changed since it was read:
 * - the store empties it ({@link clear}) before each of its own writes (a commit on this
 *   connection does not change `PRAGMA data_version`, so it would not be noticed otherwise);
 * - a commit by another connection to the file (another process) changes `PRAGMA data_version`,
 *   which is read at the first lookup of each turn of the event loop, before anything of that
 *   turn is read from the file, and empties it when it moved. Reading the version costs about as
 *   much as reading a row, hence once per turn: a commit by another process within the turn is
 *   concurrent with its reads. Whatever is read after the version, within the turn, is kept under
 *   that version, so a commit that lands mid-turn empties it at the next turn.
 * Values are deeply frozen when stored; the store hands out copies. Each map holds at most `limit`
 * entries: past that, the whole cache starts over. A `limit` of 0 or less disables it.
 */
export class SqliteReadCache {
  private readonly maps: Map<string, unknown>[] = [];
  private readonly dataVersion;
  /** `PRAGMA data_version` under which the cached values were read. */
  private version = -1;
  private checkedThisTurn = false;

  constructor(
    db: SqliteDatabase,
    private readonly limit = 1000,
  ) {
    this.dataVersion = db.prepare<[], number>("PRAGMA data_version").pluck();
  }

  /** A new map of this cache, emptied with the others. Read it through {@link get}. */
  map<T>(): Map<string, T> {
    const map = new Map<string, T>();
    this.maps.push(map);
    return map;
  }

  /** The value under `key`, when it is current; call before reading the file for it. */
  get<T>(map: Map<string, T>, key: string): T | undefined {
    if (this.limit <= 0) return undefined;
    if (!this.checkedThisTurn) {
      this.checkedThisTurn = true;
      setImmediate(this.newTurn);
      const version = this.dataVersion.get() as number;
      if (version !== this.version) {
        this.clear();
        this.version = version;
        return undefined;
      }
    }
    return map.get(key);
  }

  /** Stores `value` (deeply frozen) under `key` and returns it; only after a {@link get} of this turn. */
  set<T>(map: Map<string, T>, key: string, value: T): T {
    if (this.limit <= 0 || !this.checkedThisTurn) return value;
    if (map.size >= this.limit) this.clear();
    const frozen = deepFreeze(value);
    map.set(key, frozen);
    return frozen;
  }

  clear(): void {
    for (const map of this.maps) map.clear();
  }

  private readonly newTurn = () => {
    this.checkedThisTurn = false;
  };
}
