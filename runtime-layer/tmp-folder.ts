/**
 * `/tmp` in a local sandbox process: a folder of its own under the data dir, the only one it may
 * write to (`--allow-fs-write`, decision 551). Component code names `/tmp/...` as it does on the
 * original and on Lambda (`fs.writeFileSync("/tmp/report.csv", ...)`, `os.tmpdir()`); the `fs`
 * functions are wrapped here so those paths reach the folder, and paths coming back (`mkdtemp`,
 * `realpath`, errors) name `/tmp` again.
 *
 * Not a boundary: the permission model is. Code that reaches the folder another way (its real path,
 * a `FileHandle`) writes to the same folder and nowhere else; links and symlinks need full read
 * and write rights and are refused. What the folder may hold is bounded by the host (one file by
 * RLIMIT_FSIZE, the whole by `sandbox-tmp.ts`), not here.
 *
 * On Lambda the runtime never calls this: `/tmp` is the function's own.
 */
import fs from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { posix } from "node:path";
import { fileURLToPath } from "node:url";

/** The path component code writes to. */
export const TMP = "/tmp";

/** Functions whose first argument is a path (each also as `<name>Sync` and in `fs.promises`, where they exist). */
const FIRST_IS_PATH = [
  "access",
  "appendFile",
  "chmod",
  "chown",
  "createReadStream",
  "createWriteStream",
  "exists",
  "lchmod",
  "lchown",
  "lstat",
  "lutimes",
  "mkdir",
  "mkdtemp",
  "open",
  "openAsBlob",
  "opendir",
  "readdir",
  "readFile",
  "readlink",
  "realpath",
  "rm",
  "rmdir",
  "stat",
  "statfs",
  "truncate",
  "unlink",
  "unwatchFile",
  "utimes",
  "watch",
  "watchFile",
  "writeFile",
];
/** Functions whose first two arguments are paths. */
const FIRST_TWO_ARE_PATHS = ["copyFile", "cp", "link", "rename", "symlink"];
/** Functions that answer a path, which is given back as `/tmp/...` (also `<name>Sync`, the promise's, `realpath.native`). */
const ANSWER_IS_PATH = new Set(["mkdtemp", "realpath"]);
/** Functions whose answer is neither a promise nor given to a callback: arguments are mapped, the answer kept. */
const PLAIN = new Set([
  "createReadStream",
  "createWriteStream",
  "watch",
  "watchFile",
  "unwatchFile",
  "openAsBlob",
  "exists",
]);
/** What a function's own properties other than these are, the wrapper has too (`realpath.native`, `promisify.custom`). */
const FUNCTION_KEYS: ReadonlySet<PropertyKey> = new Set(["length", "name", "prototype"]);

/** Maps paths between `/tmp` and `folder` (absolute, no trailing `/`). */
export interface TmpPaths {
  /** `path` as the process must name it: under `folder` when it names `/tmp` or below, else as given. */
  toReal(path: unknown): unknown;
  /** `text` with `folder` named `/tmp` again. */
  toShown(text: string): string;
}

/**
 * `own` are the folders the process reads its code from: when Sluice's data dir is itself under
 * `/tmp` (as in tests), their paths, and the folder's, are taken as they are.
 */
export function tmpPaths(folder: string, own: readonly string[] = []): TmpPaths {
  const real = folder.replace(/\/+$/, "");
  const kept = [real, ...own.map((dir) => dir.replace(/\/+$/, ""))].filter((dir) => dir.startsWith(`${TMP}/`));
  /**
   * The path `path` names, as `encode` spells its own folders (`latin1` for a Buffer's bytes, whose
   * names need not be UTF-8): its `/tmp` prefix swapped for the folder, or undefined when it is
   * not under `/tmp` (or under one of the process's own folders).
   */
  const mapped = (path: string, spell: (text: string) => string): string | undefined => {
    if (!path.startsWith("/")) return undefined;
    // `//tmp/x`, `/tmp/./x` and `/tmp/a/../x` name /tmp as well; `/tmp/../etc` is not under it.
    const normal = posix.normalize(path);
    if (normal !== TMP && !normal.startsWith(`${TMP}/`)) return undefined;
    if (kept.some((dir) => normal === spell(dir) || normal.startsWith(`${spell(dir)}/`))) return undefined;
    return spell(real) + normal.slice(TMP.length);
  };
  const asIs = (text: string) => text;
  const asLatin1 = (text: string) => Buffer.from(text, "utf8").toString("latin1");
  return {
    toReal(path) {
      if (typeof path === "string") return mapped(path, asIs) ?? path;
      if (path instanceof URL) {
        if (path.protocol !== "file:") return path;
        return mapped(fileURLToPath(path), asIs) ?? path;
      }
      if (Buffer.isBuffer(path)) {
        const bytes = mapped(path.toString("latin1"), asLatin1);
        return bytes === undefined ? path : Buffer.from(bytes, "latin1");
      }
      return path;
    },
    toShown: (text) => (text.includes(real) ? text.replaceAll(`${real}/`, `${TMP}/`).replaceAll(real, TMP) : text),
  };
}

type AnyFunction = (...args: unknown[]) => unknown;

/**
 * Wraps the `fs` (and `fs.promises`) functions so `/tmp` paths reach `folder`. Call once, before
 * any component code is loaded.
 */
export function mapTmpFolder(folder: string, own: readonly string[] = []): void {
  const paths = tmpPaths(folder, own);
  const shown = (error: unknown): unknown => {
    if (!(error instanceof Error)) return error;
    const fields = error as Error & { path?: unknown; dest?: unknown };
    error.message = paths.toShown(error.message);
    if (typeof fields.path === "string") fields.path = paths.toShown(fields.path);
    if (typeof fields.dest === "string") fields.dest = paths.toShown(fields.dest);
    if (typeof error.stack === "string") error.stack = paths.toShown(error.stack);
    return error;
  };
  const answer = (value: unknown, isPath: boolean): unknown =>
    isPath && typeof value === "string" ? paths.toShown(value) : value;

  const wrap = (
    target: Record<string, unknown>,
    name: string,
    pathCount: number,
    style: "sync" | "callback" | "promise",
    isPath: boolean,
  ) => {
    const original = target[name];
    if (typeof original !== "function") return;
    const mapArgs = (args: unknown[]) => {
      for (let i = 0; i < pathCount && i < args.length; i++) args[i] = paths.toReal(args[i]);
      return args;
    };
    let wrapped: AnyFunction;
    if (style === "sync") {
      wrapped = function (this: unknown, ...args: unknown[]) {
        try {
          return answer(Reflect.apply(original as AnyFunction, this, mapArgs(args)), isPath);
        } catch (error) {
          throw shown(error);
        }
      };
    } else if (style === "promise") {
      wrapped = function (this: unknown, ...args: unknown[]) {
        return (Reflect.apply(original as AnyFunction, this, mapArgs(args)) as Promise<unknown>).then(
          (value) => answer(value, isPath),
          (error: unknown) => {
            throw shown(error);
          },
        );
      };
    } else {
      wrapped = function (this: unknown, ...args: unknown[]) {
        const last = args.length - 1;
        const callback = args[last];
        if (typeof callback === "function" && last >= pathCount) {
          args[last] = (error: unknown, ...rest: unknown[]) =>
            error
              ? callback(shown(error))
              : callback(error, ...rest.map((value, i) => (i === 0 ? answer(value, isPath) : value)));
        }
        return Reflect.apply(original as AnyFunction, this, mapArgs(args));
      };
    }
    for (const key of Reflect.ownKeys(original)) {
      if (!FUNCTION_KEYS.has(key)) Reflect.set(wrapped, key, Reflect.get(original, key));
    }
    Object.defineProperty(wrapped, "name", { value: (original as AnyFunction).name });
    target[name] = wrapped;
  };

  const sync = fs as unknown as Record<string, unknown>;
  const promises = fs.promises as unknown as Record<string, unknown>;
  for (const [names, count] of [
    [FIRST_IS_PATH, 1],
    [FIRST_TWO_ARE_PATHS, 2],
  ] as const) {
    for (const name of names) {
      const isPath = ANSWER_IS_PATH.has(name);
      wrap(sync, name, count, PLAIN.has(name) ? "sync" : "callback", isPath);
      wrap(sync, `${name}Sync`, count, "sync", isPath);
      // `fs.promises.watch` answers an async iterator.
      wrap(promises, name, count, name === "watch" ? "sync" : "promise", isPath);
    }
  }
  // Copied onto the wrappers above, and wrapped in their turn.
  wrap(sync.realpath as Record<string, unknown>, "native", 1, "callback", true);
  wrap(sync.realpathSync as Record<string, unknown>, "native", 1, "sync", true);
  // `import { writeFileSync } from "node:fs"` reads the ES module's own copy.
  syncBuiltinESMExports();
}
