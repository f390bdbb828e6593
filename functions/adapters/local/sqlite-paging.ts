import type { Page, PageQuery } from "#core/pagination";
import type { SqliteDatabase } from "./sqlite-database.ts";

/**
 * The statements of one newest-first list of `table` by the owning `column`, on an index of
 * (`column`, id). `table` and `column` are trusted identifiers, never request input.
 */
export function pageStatements<Row>(db: SqliteDatabase, table: string, column: string) {
  return {
    first: db.prepare<[string, number], Row>(`SELECT * FROM ${table} WHERE ${column} = ? ORDER BY id DESC LIMIT ?`),
    after: db.prepare<[string, string, number], Row>(
      `SELECT * FROM ${table} WHERE ${column} = ? AND id < ? ORDER BY id DESC LIMIT ?`,
    ),
    before: db.prepare<[string, string, number], Row>(
      `SELECT * FROM ${table} WHERE ${column} = ? AND id > ? ORDER BY id ASC LIMIT ?`,
    ),
    count: db.prepare<[string], { total: number }>(`SELECT count(*) AS total FROM ${table} WHERE ${column} = ?`),
  };
}

type PageStatements<Row> = ReturnType<typeof pageStatements<Row>>;

/**
 * One page (`slicePage` semantics) read with statements from `pageStatements`. `countOf` replaces
 * the `count(*)` of the owner's rows where a store keeps the count itself (a list that grows with a
 * tenant's history, counted on every read, would hold the event loop for as long).
 */
export function readPage<Row, T>(
  statements: PageStatements<Row>,
  owner: string,
  page: PageQuery,
  map: (row: Row) => T,
  countOf: (owner: string) => number = (id) => statements.count.get(id)?.total ?? 0,
): Page<T> {
  let rows: Row[];
  if (page.after !== undefined) rows = statements.after.all(owner, page.after, page.limit);
  else if (page.before !== undefined) rows = statements.before.all(owner, page.before, page.limit).reverse();
  else rows = statements.first.all(owner, page.limit);
  return { items: rows.map(map), totalCount: countOf(owner) };
}
