/**
 * The files of a component found from its entry: every file the entry imports by relative path,
 * transitively, read through `read` (over HTTP for a `component_url`, from a registry directory
 * on disk). Where an import may be is tried in the bundler's order (`importCandidates`), so the
 * files found are the ones the bundler will take. Each file is read once; bounded in files,
 * bytes, depth of the import chain, reads (misses included) and time.
 */
import { type ComponentFiles, importCandidates } from "#core/component-files";
import { importSpecifiers } from "#core/import-specifiers";

export interface TreeBounds {
  /** Most files in the component, the entry included. */
  readonly maxFiles: number;
  /** Most bytes of all files together. */
  readonly maxBytes: number;
  /** Longest chain of imports from the entry (the entry's own imports are depth 1). */
  readonly maxDepth: number;
  /** Most reads, the ones that found nothing included. */
  readonly maxRequests: number;
  /** Longest time for the whole tree. */
  readonly deadlineMs: number;
}

export interface TreeReader {
  /** A file's text by its path below the tree's root; undefined when there is none. */
  read(path: string, maxBytes: number): Promise<string | undefined>;
  /** The error to throw, with a message naming the file, the import and why. */
  refused(message: string): Error;
  /** Where files are looked for, for the message of an import found nowhere (`below http://h/x/`). */
  nowhere: string;
}

/** `./x` and `../x`: the imports that name a sibling file. */
export const isRelativeImport = (specifier: string) => specifier.startsWith("./") || specifier.startsWith("../");

/** The component whose entry is `entryPath` (text `entryText`) with every file it imports (see the file header). */
export async function collectComponentFiles(
  entryPath: string,
  entryText: string,
  bounds: TreeBounds,
  reader: TreeReader,
): Promise<ComponentFiles> {
  const deadline = Date.now() + bounds.deadlineMs;
  const files: Record<string, string> = { [entryPath]: entryText };
  let bytes = Buffer.byteLength(entryText, "utf8");
  let reads = 1;
  const missing = new Set<string>();
  const queue: { path: string; depth: number }[] = [{ path: entryPath, depth: 0 }];

  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    const { path, depth } = next;
    // JSON imports nothing.
    if (path.endsWith(".json")) continue;
    for (const specifier of importSpecifiers(files[path] as string).filter(isRelativeImport)) {
      const cannot = (why: string) => reader.refused(`${path}: cannot import ${JSON.stringify(specifier)}: ${why}`);
      const candidates = importCandidates(path, specifier);
      if ("refused" in candidates) throw cannot(candidates.refused);
      if (candidates.paths.some((candidate) => Object.hasOwn(files, candidate))) continue;
      let found = false;
      for (const candidate of candidates.paths) {
        if (missing.has(candidate)) continue;
        if (depth + 1 > bounds.maxDepth) throw cannot(`imports are more than ${bounds.maxDepth} deep`);
        if (++reads > bounds.maxRequests)
          throw cannot(`finding the files took more than ${bounds.maxRequests} requests`);
        if (Date.now() > deadline) throw cannot(`fetching the files took more than ${bounds.deadlineMs / 1000}s`);
        const text = await reader.read(candidate, bounds.maxBytes - bytes);
        if (text === undefined) {
          missing.add(candidate);
          continue;
        }
        bytes += Buffer.byteLength(text, "utf8");
        if (bytes > bounds.maxBytes) throw cannot(`the files hold more than ${bounds.maxBytes} bytes in all`);
        files[candidate] = text;
        if (Object.keys(files).length > bounds.maxFiles)
          throw cannot(`the component has more than ${bounds.maxFiles} files`);
        queue.push({ path: candidate, depth: depth + 1 });
        found = true;
        break;
      }
      if (!found) throw cannot(`no file found for it ${reader.nowhere}`);
    }
  }
  return { entry: entryPath, files };
}
