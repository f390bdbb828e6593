import type { ComponentRecord } from "#core/component-model";
import { conflict } from "#core/errors";
import type { ComponentStore } from "#core/ports/component-store";
import { type SqliteDatabase, violatedConstraint } from "./sqlite-database.ts";

interface ComponentRow {
  id: string;
  owner_id: string;
  key: string | null;
  name: string;
  version: string;
  code: string;
  code_hash: string;
  component_url: string | null;
  metadata: string;
  created_at: number;
  updated_at: number;
}

function toComponent(row: ComponentRow): ComponentRecord {
  const component: ComponentRecord = {
    id: row.id,
    ownerId: row.owner_id,
    name: row.name,
    version: row.version,
    code: row.code,
    codeHash: row.code_hash,
    metadata: JSON.parse(row.metadata),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
  if (row.key !== null) component.key = row.key;
  if (row.component_url !== null) component.componentUrl = row.component_url;
  return component;
}

/** `ComponentStore` on the local SQLite file; code is stored as plain text. */
export class SqliteComponentStore implements ComponentStore {
  private readonly statements;

  constructor(db: SqliteDatabase) {
    this.statements = {
      insert: db.prepare(
        `INSERT INTO components (id, owner_id, key, name, version, code, code_hash, component_url, metadata, created_at, updated_at)
         VALUES (@id, @ownerId, @key, @name, @version, @code, @codeHash, @componentUrl, @metadata, @createdAt, @updatedAt)`,
      ),
      byId: db.prepare<[string], ComponentRow>("SELECT * FROM components WHERE id = ?"),
      newestByKey: db.prepare<[string, string], ComponentRow>(
        "SELECT * FROM components WHERE owner_id = ? AND key = ? ORDER BY id DESC LIMIT 1",
      ),
    };
  }

  async putComponent(component: ComponentRecord): Promise<void> {
    try {
      this.statements.insert.run({
        ...component,
        key: component.key ?? null,
        componentUrl: component.componentUrl ?? null,
        metadata: JSON.stringify(component.metadata),
      });
    } catch (error) {
      if (violatedConstraint(error)) throw conflict(`component ${component.id} exists already`);
      throw error;
    }
  }

  async getComponent(id: string): Promise<ComponentRecord | undefined> {
    const row = this.statements.byId.get(id);
    return row && toComponent(row);
  }

  async findComponentByKey(ownerId: string, key: string): Promise<ComponentRecord | undefined> {
    const row = this.statements.newestByKey.get(ownerId, key);
    return row && toComponent(row);
  }
}
