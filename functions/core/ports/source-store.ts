import type { SourceRecord, SourceState } from "#core/component-model";
import type { Page, PageQuery } from "#core/pagination";

/**
 * An `Idempotency-Key` remembered for the create that used it (#core/idempotency-keys): one per
 * user and key. It lives as long as its source, at most until `expiresAt`.
 */
export interface DeployClaim {
  userId: string;
  key: string;
  /** `requestHash` of the body of the create that used the key. */
  requestHash: string;
  sourceId: string;
  /** When the create began (ms). */
  createdAt: number;
  /** After this (ms) the key is forgotten and may be used again. */
  expiresAt: number;
}

/**
 * Deployed sources (`dc_`), their per-source state, and the lookups the interfaces need.
 * Adapters: `SqliteSourceStore`, `DynamoDbSourceStore`; both pass
 * `test/contract/source-store.contract.ts`.
 */
export interface SourceStore {
  /**
   * Saves a new source. Its `nameSlug` is taken as the wanted slug: when another source of the
   * same `userId` has it, the store appends `-1`, `-2`, ... (the lowest free counter) and returns
   * the record as saved. Throws `conflict` when the id or the endpoint key exists.
   * With `claim`, the claim is saved in the same write, unless the user has an unexpired claim of
   * the same key (one whose `expiresAt` is after `claim.createdAt`): then nothing is saved and it
   * throws `conflict`. The claim goes when the source is deleted.
   */
  createSource(source: SourceRecord, claim?: DeployClaim): Promise<SourceRecord>;
  /**
   * Replaces a source. When `nameSlug` changed, the new one is made unique like on create and the
   * old one is released. Throws `not_found` when the source does not exist.
   */
  updateSource(source: SourceRecord): Promise<SourceRecord>;
  /** Removes a source, its slug, its endpoint key, its state and its claim. Removing a missing one succeeds. */
  deleteSource(id: string): Promise<void>;
  getSource(id: string): Promise<SourceRecord | undefined>;
  findSourceByEndpointKey(endpointKey: string): Promise<SourceRecord | undefined>;
  /** Sources deployed by a user, newest first by id. */
  listSourcesOfUser(userId: string, page: PageQuery): Promise<Page<SourceRecord>>;
  /** Sources of a workspace, newest first by id. */
  listSourcesOfWorkspace(workspaceId: string, page: PageQuery): Promise<Page<SourceRecord>>;
  /** The user's claim of `key`, unless it expired by `nowMs` or its source was deleted. */
  findDeployClaim(userId: string, key: string, nowMs: number): Promise<DeployClaim | undefined>;
  /** Sources whose deploy began before `startedBefore` (ms) and never finished (`deployingSince`). */
  listDeployingSources(startedBefore: number): Promise<SourceRecord[]>;
  /** Every active source with a timer (local mode schedules them at start). */
  listActiveTimerSources(): Promise<SourceRecord[]>;
  /** `$.service.db` snapshot and dedupe memory; `{db: {}, dedupe: {}, version: 0}` when none. */
  getSourceState(sourceId: string): Promise<SourceState>;
  /**
   * Writes the state when its stored version is still `expectedVersion` (0: none stored yet) and
   * stores it as `expectedVersion + 1`. Throws `conflict` when another write came first.
   */
  putSourceState(sourceId: string, state: Omit<SourceState, "version">, expectedVersion: number): Promise<void>;
}
