import * as z from "zod";
import { invalid } from "./errors.ts";

/**
 * Keyset pagination shared by every list endpoint.
 *
 * Lists are ordered newest first by a sort key that both stores index (a time-sortable id, or an
 * event id `<epoch_ms>-<n>`). A cursor is the sort key of an item, wrapped so clients treat it as
 * opaque. `after=c` returns the items that follow `c` in list order (older ones); `before=c` the
 * items that precede it (newer ones), the nearest `limit` of them. Because a cursor names a
 * position rather than an offset, pages stay consistent while new items arrive.
 */
export const PAGE_LIMIT_DEFAULT = 10;
export const PAGE_LIMIT_MAX = 100;

export interface PageQuery {
  limit: number;
  /** Sort key after which (older) to start. */
  after?: string;
  /** Sort key before which (newer) to start. */
  before?: string;
}

export interface Page<T> {
  items: T[];
  totalCount: number;
}

export interface PageInfo {
  total_count: number;
  count: number;
  start_cursor: string | null;
  end_cursor: string | null;
}

const CURSOR_VERSION = "1";

export function encodeCursor(sortKey: string): string {
  return Buffer.from(`${CURSOR_VERSION}:${sortKey}`, "utf8").toString("base64url");
}

/**
 * Decodes a cursor or throws a validation error naming the parameter. `maxKeyBytes`: the longest
 * sort key the list's cursors carry (ids by default); `allowEmpty`: whether `""` is a key of the
 * list (a data store's records: `''` is a key).
 */
export function decodeCursor(
  cursor: string,
  field: string,
  options: { maxKeyBytes?: number; allowEmpty?: boolean } = {},
): string {
  const maxChars = Math.ceil(((options.maxKeyBytes ?? 382) + CURSOR_VERSION.length + 1) / 3) * 4;
  if (cursor.length === 0 || cursor.length > maxChars || !/^[A-Za-z0-9_-]+$/.test(cursor)) {
    throw invalid(field, "is not a valid cursor");
  }
  const text = Buffer.from(cursor, "base64url").toString("utf8");
  const separator = text.indexOf(":");
  const empty = separator === text.length - 1;
  if (separator < 0 || text.slice(0, separator) !== CURSOR_VERSION || (empty && !options.allowEmpty)) {
    throw invalid(field, "is not a valid cursor");
  }
  return text.slice(separator + 1);
}

/** zod schema of the pagination query parameters; string inputs as they arrive in a query string. */
export const pageParamsSchema = z.object({
  limit: z.coerce
    .number({ error: "must be an integer" })
    .int("must be an integer")
    .min(1, "must be at least 1")
    .max(PAGE_LIMIT_MAX, `must be at most ${PAGE_LIMIT_MAX}`)
    .optional(),
  after: z.string().optional(),
  before: z.string().optional(),
});

export type PageParams = z.infer<typeof pageParamsSchema>;

/** Turns validated query parameters into a store query; cursors are decoded here. */
export function toPageQuery(params: PageParams, defaultLimit = PAGE_LIMIT_DEFAULT): PageQuery {
  if (params.after !== undefined && params.before !== undefined) {
    throw invalid("after", "cannot be combined with before");
  }
  const query: PageQuery = { limit: params.limit ?? defaultLimit };
  if (params.after !== undefined) query.after = decodeCursor(params.after, "after");
  if (params.before !== undefined) query.before = decodeCursor(params.before, "before");
  return query;
}

/**
 * Most items a list the spec shows unpaginated (`{data: [...]}`) answers at once. One request must
 * not build an unbounded answer: 1,000 subscriptions are about 200 KB of JSON, well inside a
 * Lambda response (6 MB). A longer list is refused with a 400 that says to page it.
 */
export const UNPAGINATED_LIST_MAX = 1000;

/** Whether the client asked for a page (`limit`, `after` or `before`), rather than the whole list. */
export function asksForPage(params: PageParams): boolean {
  return params.limit !== undefined || params.after !== undefined || params.before !== undefined;
}

/**
 * Every item of a list, newest first, read a page of {@link PAGE_LIMIT_MAX} at a time. A list of
 * more than `max` items is refused (400 naming `limit`) from its first page's count, before the
 * rest is read.
 */
export async function readWholeList<T>(
  readPage: (page: PageQuery) => Promise<Page<T>>,
  sortKeyOf: (item: T) => string,
  what: string,
  max = UNPAGINATED_LIST_MAX,
): Promise<T[]> {
  const items: T[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await readPage(after === undefined ? { limit: PAGE_LIMIT_MAX } : { limit: PAGE_LIMIT_MAX, after });
    if (page.totalCount > max) {
      throw invalid(
        "limit",
        `is required here: there are ${page.totalCount} ${what}, more than the ${max} answered at once; page through them with limit (1 to ${PAGE_LIMIT_MAX}) and after`,
      );
    }
    items.push(...page.items);
    const last = page.items.at(-1);
    if (last === undefined || page.items.length < PAGE_LIMIT_MAX || items.length >= max) return items.slice(0, max);
    after = sortKeyOf(last);
  }
}

/**
 * Most bytes of JSON the items of one page take together (a page holds at least one item, however
 * large). On AWS an answer must fit Lambda's 6 MB, with its body escaped once more inside Lambda's
 * own JSON, which at worst doubles it: 2 MiB leaves room for that and the envelope. 100 items of
 * the larger kinds (events with `expand=event`, dead letters, run records, workflows with their
 * code) can pass it many times over; small items never reach it.
 */
export const PAGE_MAX_BYTES = 2 * 1024 * 1024;

/**
 * The paginated envelope of the spec: `{ page_info, data }`. When the items' JSON passes
 * `maxBytes`, the page is cut to fewer items (`count` says how many), keeping those nearest the
 * cursor: the first ones, or with `before` the last ones. The cursors then name the kept items, so
 * the next page in either direction starts where this one ends.
 */
export function pageEnvelope<T, R>(
  page: Page<T>,
  sortKeyOf: (item: T) => string,
  present: (item: T) => R,
  query: Pick<PageQuery, "before">,
  maxBytes = PAGE_MAX_BYTES,
) {
  const { items, views } = fitPage(page.items, present, query.before !== undefined, maxBytes);
  const first = items[0];
  const last = items[items.length - 1];
  const pageInfo: PageInfo = {
    total_count: page.totalCount,
    count: items.length,
    start_cursor: first === undefined ? null : encodeCursor(sortKeyOf(first)),
    end_cursor: last === undefined ? null : encodeCursor(sortKeyOf(last)),
  };
  return { page_info: pageInfo, data: views };
}

/** The items (and their views) that fit `maxBytes`, taken from the start, or from the end when `fromEnd`. */
function fitPage<T, R>(items: readonly T[], present: (item: T) => R, fromEnd: boolean, maxBytes: number) {
  const kept: T[] = [];
  const views: R[] = [];
  let bytes = 0;
  for (let n = 0; n < items.length; n++) {
    const item = items[fromEnd ? items.length - 1 - n : n] as T;
    const view = present(item);
    bytes += Buffer.byteLength(JSON.stringify(view) ?? "");
    if (n > 0 && bytes > maxBytes) break;
    kept.push(item);
    views.push(view);
  }
  if (fromEnd) {
    kept.reverse();
    views.reverse();
  }
  return { items: kept, views };
}

/**
 * Reference semantics of a page over items already sorted newest first. Store adapters implement
 * the same with their indexes; the contract suite compares them against this function.
 */
export function slicePage<T>(
  sortedNewestFirst: readonly T[],
  sortKeyOf: (item: T) => string,
  query: PageQuery,
): Page<T> {
  let items: T[];
  if (query.after !== undefined) {
    const after = query.after;
    items = sortedNewestFirst.filter((item) => sortKeyOf(item) < after).slice(0, query.limit);
  } else if (query.before !== undefined) {
    const before = query.before;
    const newer = sortedNewestFirst.filter((item) => sortKeyOf(item) > before);
    items = newer.slice(Math.max(0, newer.length - query.limit));
  } else {
    items = sortedNewestFirst.slice(0, query.limit);
  }
  return { items, totalCount: sortedNewestFirst.length };
}
