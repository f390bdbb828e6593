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
 * it as they read Node's own; a minified function's name becomes its original one, as Node's
 * mapping does.
 *
 * Sluice's own Lambda functions use it too, in place of `--enable-source-maps`, which parsed their
 * bundle's map at every cold start (functions/adapters/aws/lambda-stack-traces.ts).
 */
import { readFileSync } from "node:fs";
import type { SourceMap } from "node:module";
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
      // `node:module` is taken when a map is first read: importing it builds its ES module facade,
      // which reads every export and loads Node's source map support, at every Lambda cold start.
      if (payload !== undefined) map = new (process.getBuiltinModule("node:module").SourceMap)(JSON.parse(payload));
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

/** The entry of a map at (1-based) `line`:`column` of its module, with the original place's parts. */
interface MapEntry {
  originalSource?: string;
  originalLine?: number;
  originalColumn?: number;
  name?: string;
}

const entryAt = (map: SourceMap, line: number | null, column: number | null): MapEntry | undefined =>
  line === null || column === null ? undefined : (map.findEntry(line - 1, column - 1) as MapEntry);

/** The original place of a frame at (1-based) `line`:`column` of the module at `url`, if mapped. */
function originalPlace(map: SourceMap, url: string, line: number, column: number): string | undefined {
  const entry = entryAt(map, line, column);
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

/**
 * The original name of a frame's function, as Node's `--enable-source-maps` finds it: the name
 * the map gives the start of the enclosing function, or else the name at the calling frame's place
 * when that is in the same module. A minified bundle's frames then read `runRequest`, not `z0`.
 */
function originalName(map: SourceMap, site: NodeJS.CallSite, caller: NodeJS.CallSite | undefined): string | undefined {
  const enclosing = entryAt(map, site.getEnclosingLineNumber?.() ?? null, site.getEnclosingColumnNumber?.() ?? null);
  if (enclosing?.name) return enclosing.name;
  if (caller === undefined || caller.getFileName() !== site.getFileName()) return undefined;
  return entryAt(map, caller.getLineNumber(), caller.getColumnNumber())?.name || undefined;
}

/**
 * One frame, as V8 prints it, at its original place when its module has a map, and under its
 * function's original name when the map has one (`caller`: the frame that called it, the next in
 * the trace, which Node's own mapping reads the name from when the function's start has none).
 */
export function formatFrame(site: NodeJS.CallSite, caller?: NodeJS.CallSite): string {
  const text = String(site);
  const url = site.getFileName();
  const line = site.getLineNumber();
  const column = site.getColumnNumber();
  if (!url || line === null || column === null) return text;
  const place = `${url}:${line}:${column}`;
  if (!text.includes(place)) return text;
  try {
    const map = mapOf(url);
    const original = map === null ? undefined : originalPlace(map, url, line, column);
    if (map === null || original === undefined) return text;
    const mapped = text.replace(place, original);
    const name = originalName(map, site, caller);
    if (name === undefined) return mapped;
    // `name (place)`, `async name (place)`, `new Name (place)`, or a bare place (an anonymous function).
    const suffix = ` (${original})`;
    if (mapped === original) return `${name}${suffix}`;
    if (!mapped.endsWith(suffix)) return mapped;
    return `${/^(?:async |new )/.exec(mapped)?.[0] ?? ""}${name}${suffix}`;
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
    for (let i = 0; i < trace.length; i++) stack += `\n    at ${formatFrame(trace[i]!, trace[i + 1])}`;
    return stack;
  };
}
