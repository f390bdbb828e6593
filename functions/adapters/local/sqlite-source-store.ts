import {
  isDeployStep,
  type SourceRecord,
  type SourceSettings,
  type SourceState,
  type TimerSpec,
} from "#core/component-model";
import { conflict, notFound } from "#core/errors";
import type { Page, PageQuery } from "#core/pagination";
import type { DeployClaim, SourceStore } from "#core/ports/source-store";
import { lowestFreeSlug } from "#core/slugs";
import { type SqliteDatabase, violatedConstraint } from "./sqlite-database.ts";
import { pageStatements, readPage } from "./sqlite-paging.ts";
import { SqliteReadCache } from "./sqlite-read-cache.ts";

interface SourceRow {
  id: string;
  user_id: string;
  workspace_id: string;
  component_id: string;
  name: string;
  name_slug: string;
  configured_props: string;
  active: number;
  endpoint_key: string | null;
  timer: string | null;
  prop_definitions: string | null;
  workflow_id: string | null;
  deploying_since: number | null;
  deploy_step: string | null;
  deploy_error: string | null;
  update_from: string | null;
  created_at: number;
  updated_at: number;
}

interface ClaimRow {
  user_id: string;
  key: string;
  request_hash: string;
  source_id: string;
  created_at: number;
  expires_at: number;
}

interface StateRow {
  db: string;
  dedupe: string;
  version: number;
}

function toSource(row: SourceRow): SourceRecord {
  const source: SourceRecord = {
    id: row.id,
    userId: row.user_id,
    workspaceId: row.workspace_id,
    componentId: row.component_id,
    name: row.name,
    nameSlug: row.name_slug,
    configuredProps: JSON.parse(row.configured_props),
    active: row.active === 1,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
  if (row.endpoint_key !== null) source.endpointKey = row.endpoint_key;
  if (row.timer !== null) source.timer = JSON.parse(row.timer) as TimerSpec;
  if (row.prop_definitions !== null) source.propDefinitions = JSON.parse(row.prop_definitions);
  if (row.workflow_id !== null) source.workflowId = row.workflow_id;
  if (row.deploying_since !== null) source.deployingSince = row.deploying_since;
  if (row.deploy_step !== null && isDeployStep(row.deploy_step)) source.deployStep = row.deploy_step;
  if (row.deploy_error !== null) source.deployError = row.deploy_error;
  if (row.update_from !== null) source.updateFrom = JSON.parse(row.update_from) as SourceSettings;
  return source;
}

const toRow = (source: SourceRecord) => ({
  id: source.id,
  userId: source.userId,
  workspaceId: source.workspaceId,
  componentId: source.componentId,
  name: source.name,
  nameSlug: source.nameSlug,
  configuredProps: JSON.stringify(source.configuredProps),
  active: source.active ? 1 : 0,
  endpointKey: source.endpointKey ?? null,
  timer: source.timer === undefined ? null : JSON.stringify(source.timer),
  propDefinitions: source.propDefinitions === undefined ? null : JSON.stringify(source.propDefinitions),
  workflowId: source.workflowId ?? null,
  deployingSince: source.deployingSince ?? null,
  deployStep: source.deployStep ?? null,
  deployError: source.deployError ?? null,
  updateFrom: source.updateFrom === undefined ? null : JSON.stringify(source.updateFrom),
  createdAt: source.createdAt,
  updatedAt: source.updatedAt,
});

const toClaimRow = (claim: DeployClaim): ClaimRow => ({
  user_id: claim.userId,
  key: claim.key,
  request_hash: claim.requestHash,
  source_id: claim.sourceId,
  created_at: claim.createdAt,
  expires_at: claim.expiresAt,
});

/**
 * `SourceStore` on the local SQLite file. Slugs are unique per user by a unique index; the free
 * one is chosen inside the same IMMEDIATE transaction as the write, so two writers (even in two
 * processes on the same file) cannot pick the same one.
 */
export class SqliteSourceStore implements SourceStore {
  private readonly statements;
  /**
   * Recently read sources by id and by endpoint key, and states by source id (see
   * `SqliteReadCache`): emptied by every write of this store, except that a state write drops
   * only that state. Hits are handed out as shallow copies of a frozen record.
   */
  private readonly cache;
  private readonly byId;
  private readonly byEndpointKey;
  /** Keys known to name no source (each request to a workflow's trigger asks here too, design W14). */
  private readonly noSourceAtKey;
  private readonly stateById;

  constructor(
    private readonly db: SqliteDatabase,
    options: { cacheSize?: number } = {},
  ) {
    this.cache = new SqliteReadCache(db, options.cacheSize);
    this.byId = this.cache.map<SourceRecord>();
    this.byEndpointKey = this.cache.map<SourceRecord>();
    this.noSourceAtKey = this.cache.map<true>();
    this.stateById = this.cache.map<SourceState>();
    this.statements = {
      insert: db.prepare(
        `INSERT INTO sources (id, user_id, workspace_id, component_id, name, name_slug, configured_props, active, endpoint_key, timer, prop_definitions, workflow_id, deploying_since, deploy_step, deploy_error, update_from, created_at, updated_at)
         VALUES (@id, @userId, @workspaceId, @componentId, @name, @nameSlug, @configuredProps, @active, @endpointKey, @timer, @propDefinitions, @workflowId, @deployingSince, @deployStep, @deployError, @updateFrom, @createdAt, @updatedAt)`,
      ),
      update: db.prepare(
        `UPDATE sources SET user_id = @userId, workspace_id = @workspaceId, component_id = @componentId, name = @name,
           name_slug = @nameSlug, configured_props = @configuredProps, active = @active, endpoint_key = @endpointKey,
           timer = @timer, prop_definitions = @propDefinitions, workflow_id = @workflowId, deploying_since = @deployingSince, deploy_step = @deployStep, deploy_error = @deployError, update_from = @updateFrom,
           created_at = @createdAt, updated_at = @updatedAt
         WHERE id = @id`,
      ),
      // Candidates for the slug counter: every slug of the user that starts with the wanted one.
      slugsLike: db.prepare<[string, number, string], { name_slug: string }>(
        "SELECT name_slug FROM sources WHERE user_id = ? AND substr(name_slug, 1, ?) = ?",
      ),
      byId: db.prepare<[string], SourceRow>("SELECT * FROM sources WHERE id = ?"),
      byEndpointKey: db.prepare<[string], SourceRow>("SELECT * FROM sources WHERE endpoint_key = ?"),
      activeTimers: db.prepare<[], SourceRow>(
        "SELECT * FROM sources WHERE active = 1 AND timer IS NOT NULL ORDER BY id ASC",
      ),
      deploying: db.prepare<[number], SourceRow>(
        "SELECT * FROM sources WHERE deploying_since IS NOT NULL AND deploying_since < ? ORDER BY id ASC",
      ),
      // A claim replaces only an expired one of the same user and key (no change: a live one).
      claim: db.prepare<[ClaimRow]>(
        `INSERT INTO deploy_claims (user_id, key, request_hash, source_id, created_at, expires_at)
         VALUES (@user_id, @key, @request_hash, @source_id, @created_at, @expires_at)
         ON CONFLICT (user_id, key) DO UPDATE SET request_hash = excluded.request_hash, source_id = excluded.source_id,
           created_at = excluded.created_at, expires_at = excluded.expires_at
         WHERE deploy_claims.expires_at <= excluded.created_at`,
      ),
      findClaim: db.prepare<[string, string, number], ClaimRow>(
        "SELECT * FROM deploy_claims WHERE user_id = ? AND key = ? AND expires_at > ?",
      ),
      deleteClaims: db.prepare<[string]>("DELETE FROM deploy_claims WHERE source_id = ?"),
      deleteSource: db.prepare<[string]>("DELETE FROM sources WHERE id = ?"),
      deleteState: db.prepare<[string]>("DELETE FROM source_states WHERE source_id = ?"),
      getState: db.prepare<[string], StateRow>("SELECT db, dedupe, version FROM source_states WHERE source_id = ?"),
      insertState: db.prepare<[string, string, string]>(
        "INSERT INTO source_states (source_id, db, dedupe, version) VALUES (?, ?, ?, 1) ON CONFLICT (source_id) DO NOTHING",
      ),
      updateState: db.prepare<[string, string, number, string, number]>(
        "UPDATE source_states SET db = ?, dedupe = ?, version = ? WHERE source_id = ? AND version = ?",
      ),
      ofUser: pageStatements<SourceRow>(db, "sources", "user_id"),
      ofWorkspace: pageStatements<SourceRow>(db, "sources", "workspace_id"),
    };
  }

  async createSource(source: SourceRecord, claim?: DeployClaim): Promise<SourceRecord> {
    const s = this.statements;
    this.cache.clear();
    try {
      return this.db
        .transaction(() => {
          const saved = { ...source, nameSlug: this.freeSlug(source.userId, source.nameSlug) };
          s.insert.run(toRow(saved));
          if (claim && s.claim.run(toClaimRow(claim)).changes === 0) {
            throw conflict(`${claim.key}: this idempotency key is held by another create`);
          }
          return saved;
        })
        .immediate();
    } catch (error) {
      const constraint = violatedConstraint(error);
      if (constraint?.includes("sources.id")) throw conflict(`source ${source.id} exists already`);
      if (constraint?.includes("sources.endpoint_key")) throw conflict("this endpoint key is in use already");
      throw error;
    }
  }

  async updateSource(source: SourceRecord): Promise<SourceRecord> {
    const s = this.statements;
    this.cache.clear();
    try {
      return this.db
        .transaction(() => {
          const stored = s.byId.get(source.id);
          if (!stored) throw notFound(`source ${source.id}`);
          const sameSlug = stored.name_slug === source.nameSlug && stored.user_id === source.userId;
          // The source's own current slug counts as free: it is released by this very update.
          const saved = sameSlug
            ? source
            : { ...source, nameSlug: this.freeSlug(source.userId, source.nameSlug, stored) };
          s.update.run(toRow(saved));
          return saved;
        })
        .immediate();
    } catch (error) {
      const constraint = violatedConstraint(error);
      if (constraint?.includes("sources.endpoint_key")) throw conflict("this endpoint key is in use already");
      throw error;
    }
  }

  async deleteSource(id: string): Promise<void> {
    this.cache.clear();
    this.db.transaction(() => {
      this.statements.deleteSource.run(id);
      this.statements.deleteState.run(id);
      this.statements.deleteClaims.run(id);
    })();
  }

  async getSource(id: string): Promise<SourceRecord | undefined> {
    const hit = this.cache.get(this.byId, id);
    if (hit) return { ...hit };
    const row = this.statements.byId.get(id);
    return row && { ...this.remember(toSource(row)) };
  }

  async findSourceByEndpointKey(endpointKey: string): Promise<SourceRecord | undefined> {
    const hit = this.cache.get(this.byEndpointKey, endpointKey);
    if (hit) return { ...hit };
    if (this.cache.get(this.noSourceAtKey, endpointKey)) return undefined;
    const row = this.statements.byEndpointKey.get(endpointKey);
    if (!row) {
      this.cache.set(this.noSourceAtKey, endpointKey, true);
      return undefined;
    }
    return { ...this.remember(toSource(row)) };
  }

  async listSourcesOfUser(userId: string, page: PageQuery): Promise<Page<SourceRecord>> {
    return readPage(this.statements.ofUser, userId, page, toSource);
  }

  async listSourcesOfWorkspace(workspaceId: string, page: PageQuery): Promise<Page<SourceRecord>> {
    return readPage(this.statements.ofWorkspace, workspaceId, page, toSource);
  }

  async findDeployClaim(userId: string, key: string, nowMs: number): Promise<DeployClaim | undefined> {
    const row = this.statements.findClaim.get(userId, key, nowMs);
    return (
      row && {
        userId: row.user_id,
        key: row.key,
        requestHash: row.request_hash,
        sourceId: row.source_id,
        createdAt: row.created_at,
        expiresAt: row.expires_at,
      }
    );
  }

  async listDeployingSources(startedBefore: number): Promise<SourceRecord[]> {
    return this.statements.deploying.all(startedBefore).map(toSource);
  }

  async listActiveTimerSources(): Promise<SourceRecord[]> {
    return this.statements.activeTimers.all().map(toSource);
  }

  async getSourceState(sourceId: string): Promise<SourceState> {
    const hit = this.cache.get(this.stateById, sourceId);
    if (hit) return { ...hit };
    const row = this.statements.getState.get(sourceId);
    const state: SourceState = row
      ? { db: JSON.parse(row.db), dedupe: JSON.parse(row.dedupe), version: row.version }
      : { db: {}, dedupe: {}, version: 0 };
    return { ...this.cache.set(this.stateById, sourceId, state) };
  }

  async putSourceState(sourceId: string, state: Omit<SourceState, "version">, expectedVersion: number): Promise<void> {
    // Whether it succeeds or conflicts, the next read of this state goes to the file.
    this.stateById.delete(sourceId);
    const db = JSON.stringify(state.db);
    const dedupe = JSON.stringify(state.dedupe);
    const { changes } =
      expectedVersion === 0
        ? this.statements.insertState.run(sourceId, db, dedupe)
        : this.statements.updateState.run(db, dedupe, expectedVersion + 1, sourceId, expectedVersion);
    if (changes === 0) throw conflict(`the state of source ${sourceId} was changed by another run`);
  }

  /** Caches `source` (frozen) by id and by its endpoint key; returns the frozen one. */
  private remember(source: SourceRecord): SourceRecord {
    const frozen = this.cache.set(this.byId, source.id, source);
    if (frozen.endpointKey !== undefined) this.cache.set(this.byEndpointKey, frozen.endpointKey, frozen);
    return frozen;
  }

  private freeSlug(userId: string, wanted: string, self?: SourceRow): string {
    const taken = new Set(this.statements.slugsLike.all(userId, wanted.length, wanted).map((row) => row.name_slug));
    if (self && self.user_id === userId) taken.delete(self.name_slug);
    return lowestFreeSlug(wanted, taken);
  }
}
