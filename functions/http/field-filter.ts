/**
 * The common `include` and `exclude` parameters: comma-separated field names of the returned
 * resource(s). They apply to the objects under `data`, whether one resource or a page of them;
 * envelope keys such as `page_info` are never filtered. `include` wins when both are given.
 */
export interface FieldFilter {
  include?: Set<string>;
  exclude?: Set<string>;
}

function fieldSet(value: unknown): Set<string> | undefined {
  if (typeof value !== "string") return undefined;
  const names = value
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "");
  return names.length > 0 ? new Set(names) : undefined;
}

/** Takes `include`/`exclude` out of the query (GET) or the JSON body (POST, PUT). */
export function readFieldFilter(query: Record<string, string | undefined>, body: unknown): FieldFilter | undefined {
  const source = (name: "include" | "exclude") => {
    const fromQuery = query[name];
    delete query[name];
    if (fromQuery !== undefined) return fieldSet(fromQuery);
    if (body && typeof body === "object" && !Array.isArray(body)) {
      const value = (body as Record<string, unknown>)[name];
      delete (body as Record<string, unknown>)[name];
      return fieldSet(value);
    }
    return undefined;
  };
  const include = source("include");
  const exclude = source("exclude");
  if (!include && !exclude) return undefined;
  return { include, exclude };
}

function filterObject(value: unknown, filter: FieldFilter): unknown {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const entries = Object.entries(value as Record<string, unknown>);
  const { include, exclude } = filter;
  const kept = include ? entries.filter(([key]) => include.has(key)) : entries.filter(([key]) => !exclude?.has(key));
  return Object.fromEntries(kept);
}

export function applyFieldFilter(body: unknown, filter: FieldFilter | undefined): unknown {
  if (!filter || body === null || typeof body !== "object" || !("data" in body)) return body;
  const data = (body as { data: unknown }).data;
  const filtered = Array.isArray(data) ? data.map((item) => filterObject(item, filter)) : filterObject(data, filter);
  return { ...body, data: filtered };
}
