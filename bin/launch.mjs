/*
 * How `sluice` starts fast (decision 568): the TypeScript of bin/sluice.ts and all it imports is
 * built by esbuild into plain JavaScript under node_modules/.cache/sluice/, split so that a
 * command loads only its own modules, and Node runs that. A build is used only while every file
 * it was built from is as it was (same modification time and size), so an edit is never run
 * stale: the next command builds again (about half a second) and runs the new code. Where the
 * build cannot be made or used (no esbuild, a read-only checkout, code that does not build,
 * SLUICE_TSX=1), the caller runs the TypeScript through tsx as before.
 *
 * Plain JavaScript, run by Node before any loader: this file must not import TypeScript.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { basename, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** The checkout: this file is bin/launch.mjs. */
export const ROOT = fileURLToPath(new URL("../", import.meta.url));
/** Where builds are kept. */
export const CACHE_DIR = join(ROOT, "node_modules", ".cache", "sluice");
/** Builds not in use are removed once this old. */
const PRUNE_AFTER_MS = 7 * 24 * 60 * 60 * 1000;
/** Files that change how the build is made, though no module imports them. */
const BUILD_INPUTS = ["bin/launch.mjs", "package.json", "tsconfig.json"];

/** The name of the module-level constant that stands for `import.meta.url` in the build. */
const MODULE_URL = "__sluiceModuleUrl";

/**
 * `{path: [mtimeMs, size]}` of `paths` (relative to `root`) as they are now; a missing file is
 * `null`, so that its coming back counts as a change too.
 */
export function fileStamps(root, paths) {
  const stamps = {};
  for (const path of paths) {
    try {
      const stat = statSync(join(root, path));
      stamps[path] = [stat.mtimeMs, stat.size];
    } catch {
      stamps[path] = null;
    }
  }
  return stamps;
}

/** Whether every file a build was made from is as it was then. */
export function isFresh(root, stamps) {
  const now = fileStamps(root, Object.keys(stamps));
  for (const [path, stamp] of Object.entries(stamps)) {
    const current = now[path];
    if (stamp === null || current === null || current[0] !== stamp[0] || current[1] !== stamp[1]) return false;
  }
  return true;
}

/** The build `current.json` names, when it was made from the files as they are now. */
export function currentBuild(cacheDir = CACHE_DIR, root = ROOT) {
  let current;
  try {
    current = JSON.parse(readFileSync(join(cacheDir, "current.json"), "utf8"));
  } catch {
    return undefined;
  }
  const { dir, entry, stamps } = current ?? {};
  if (typeof dir !== "string" || typeof entry !== "string" || typeof stamps !== "object" || stamps === null) {
    return undefined;
  }
  // Names inside the cache only.
  if (![dir, entry].every((name) => /^[A-Za-z0-9_-][A-Za-z0-9_.-]*$/.test(name))) return undefined;
  if (!isFresh(root, stamps)) return undefined;
  try {
    // In use: not pruned for another week (prune goes by the folder's time).
    const now = new Date();
    utimesSync(join(cacheDir, dir), now, now);
  } catch {
    return undefined;
  }
  return join(cacheDir, dir, entry);
}

/**
 * Builds `entry` (relative to `root`) into a new folder of `cacheDir`, then names it in
 * `current.json` (written whole, then renamed: a process starting meanwhile reads the old one or
 * the new one). Resolves with the built entry's path.
 */
export async function build({ root = ROOT, cacheDir = CACHE_DIR, entry = "bin/sluice.ts" } = {}) {
  const esbuild = await import("esbuild");
  mkdirSync(cacheDir, { recursive: true });
  const dir = `build-${Date.now()}-${process.pid}`;
  const outdir = join(cacheDir, dir);
  const startedMs = Date.now();
  const stampsBefore = fileStamps(root, BUILD_INPUTS);
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [entry],
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    packages: "external",
    outdir,
    outExtension: { ".js": ".mjs" },
    sourcemap: "linked",
    metafile: true,
    logLevel: "silent",
    // Each module keeps its own URL: code finds files next to its source (runtime-layer/,
    // registry/, package.json), not next to the build.
    define: { "import.meta.url": MODULE_URL },
    plugins: [moduleUrlPlugin(root)],
  });
  const inputs = Object.keys(result.metafile.inputs).filter((path) => !path.includes("node_modules/"));
  const stamps = { ...stampsBefore, ...fileStamps(root, inputs) };
  // A file saved while the build read it may be newer than what was built: never fresh.
  for (const [path, stamp] of Object.entries(stamps)) if (stamp && stamp[0] >= startedMs) stamps[path] = [-1, -1];
  const pointer = join(cacheDir, `current.json.${process.pid}.tmp`);
  const built = basename(entry).replace(/\.ts$/, ".mjs");
  writeFileSync(pointer, JSON.stringify({ dir, entry: built, stamps }));
  renameSync(pointer, join(cacheDir, "current.json"));
  prune(cacheDir, dir);
  return join(outdir, built);
}

/** An esbuild plugin that gives each of the checkout's modules (TypeScript or JavaScript) its own `import.meta.url`. */
function moduleUrlPlugin(root) {
  return {
    name: "sluice-module-url",
    setup(builder) {
      builder.onLoad({ filter: /\.(m?ts|m?js)$/ }, async (args) => {
        if (relative(root, args.path).startsWith("..") || args.path.includes("/node_modules/")) return undefined;
        const text = await readFile(args.path, "utf8");
        // A shebang must stay the first line.
        const body = text.startsWith("#!") ? text.slice(text.indexOf("\n") + 1) : text;
        const url = JSON.stringify(pathToFileURL(args.path).href);
        return { contents: `const ${MODULE_URL} = ${url};\n${body}`, loader: /ts$/.test(args.path) ? "ts" : "js" };
      });
    },
  };
}

/**
 * Removes builds other than `keep` last used more than a week ago (each start touches the folder of
 * the build it runs; a server may still run from a recent one and load its chunks lazily).
 */
function prune(cacheDir, keep) {
  const cutoff = Date.now() - PRUNE_AFTER_MS;
  for (const name of readdirSync(cacheDir)) {
    if (name === keep || !name.startsWith("build-")) continue;
    try {
      if (statSync(join(cacheDir, name)).mtimeMs < cutoff)
        rmSync(join(cacheDir, name), { recursive: true, force: true });
    } catch {
      // Gone already (another process pruned it).
    }
  }
}

/**
 * The built entry to run, fresh or just built; undefined when the TypeScript must run through tsx
 * instead (SLUICE_TSX=1, or the build failed: tsx then reports the code's error as it is).
 */
export async function builtEntry(env = process.env) {
  if (env.SLUICE_TSX === "1") return undefined;
  const fresh = currentBuild();
  if (fresh) return fresh;
  try {
    return await build();
  } catch {
    return undefined;
  }
}
