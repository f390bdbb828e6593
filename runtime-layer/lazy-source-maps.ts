/**
 * Stack frames of a bundle, mapped to the user's files and lines only when a stack is formatted.
 *
 * A component's bundle (with axios and the rest of `@pipedream/platform` inlined, 1 MB or so) has
 * its source map beside it as `<bundle>.map`, named by no comment in the bundle. Node's
 * `--enable-source-maps` would parse a named map, inline or not, as the module loads, and keep it:
 * about 2 MiB of heap per bundle for mappings only, 6 MiB for an inline map with its sources,
 * whether or not anything ever throws (docs/components.md, "Memory"). Here a map is read the first
 * time a stack has a frame in its bundle, and kept for the next stacks (a few at most). A module
 * without a map beside it may carry one inline (the AWS describer's bundles): that is read then too.
 *
 * A frame is formatted as V8 formats it, its `<file>:<line>:<column>` swapped for the original
 * place (`file:///.../component.ts:3:7`; relative sources are resolved against the map's URL, as
 * Node does), so the host's path redaction and the load-failure position (`toLoadFailure`) read
 * it as they read Node's own.
 */
import { readFileSync } from "node:fs";
import { SourceMap } from "node:module";
import { fileURLToPath } from "node:url";

/** Maps kept at once: a source's process loads one bundle, a workflow's one per step module. */
const KEPT_MAPS = 8;

/** The parsed map of each bundle URL recently seen in a stack; `null` when it has none. */
const maps = new Map<string, SourceMap | null>();

/** The map beside the module at `url` (`file:` only), parsed once; null when there is none. */
function mapOf(url: string): SourceMap | null {
  const known = maps.get(url);
  if (known !== undefined) {
    // Most recently used last: the oldest goes first when the cache is full.
    maps.delete(url);
    maps.set(url, known);
    return known;
  }
  let map: SourceMap | null = null;
  if (url.startsWith("file:")) {
    try {
      const payload = readMap(fileURLToPath(url));
      if (payload !== undefined) map = new SourceMap(JSON.parse(payload));
    } catch {
      // Not one this process may read (the permission model), or malformed: the frame stays as it is.
    }
  }
  maps.set(url, map);
  if (maps.size > KEPT_MAPS) maps.delete(maps.keys().next().value as string);
  return map;
}

/** The comment of an inline map, as esbuild writes it at the end of a bundle. */
const INLINE_MAP = "//# sourceMappingURL=data:application/json;base64,";

/**
 * The map of the module at `path`: `<path>.map`, or else an inline `data:` map at the end of the
 * module itself (a bundle the AWS describer hands to a child, or one of the earlier layout). A
 * map named by path is never followed: only a `data:` URL is read.
 */
function readMap(path: string): string | undefined {
  try {
    return readFileSync(`${path}.map`, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  const code = readFileSync(path, "utf8");
  const at = code.lastIndexOf(INLINE_MAP);
  if (at < 0) return undefined;
  return Buffer.from(code.slice(at + INLINE_MAP.length).trim(), "base64").toString("utf8");
}

/** The original place of a frame at (1-based) `line`:`column` of the module at `url`, if mapped. */
function originalPlace(url: string, line: number, column: number): string | undefined {
  const entry = mapOf(url)?.findEntry(line - 1, column - 1) as
    | { originalSource?: string; originalLine?: number; originalColumn?: number }
    | undefined;
  if (entry?.originalSource === undefined || entry.originalLine === undefined || entry.originalColumn === undefined) {
    return undefined;
  }
  let source: string;
  try {
    source = new URL(entry.originalSource, url).href;
  } catch {
    source = entry.originalSource;
  }
  return `${source}:${entry.originalLine + 1}:${entry.originalColumn + 1}`;
}

/** One frame, as V8 prints it, at its original place when its module has a map. */
export function formatFrame(site: NodeJS.CallSite): string {
  const text = String(site);
  const url = site.getFileName();
  const line = site.getLineNumber();
  const column = site.getColumnNumber();
  if (!url || line === null || column === null) return text;
  const place = `${url}:${line}:${column}`;
  if (!text.includes(place)) return text;
  try {
    const original = originalPlace(url, line, column);
    return original === undefined ? text : text.replace(place, original);
  } catch {
    return text;
  }
}

/** The header of a stack as V8 writes it (`Name: message`), whatever the error's getters do. */
function header(error: unknown): string {
  try {
    return Error.prototype.toString.call(error);
  } catch {
    return "<error>";
  }
}

/**
 * Formats every stack from now on with frames mapped lazily (see the file header). Code that sets
 * `Error.prepareStackTrace` itself replaces this, as it would replace Node's own mapping.
 */
export function installLazySourceMaps(): void {
  Error.prepareStackTrace = (error, trace) => {
    let stack = header(error);
    for (const site of trace) stack += `\n    at ${formatFrame(site)}`;
    return stack;
  };
}
