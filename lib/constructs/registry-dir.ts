/**
 * The operator's registry directory (`-c registryDir`) as deploying routes carry it: a copy made
 * at synth of the files a component can import, so that a checkout of the public registry (its
 * apps hold lock files, images, docs and `node_modules` beside the code) does not fill the
 * functions' bundles. The copy goes to `<bundle>/registry-dir/` (REGISTRY_DIR_ASSET), where
 * `registryFiles` of the AWS composition serves it by key before the shipped `registry/`.
 */
import { cpSync, existsSync, lstatSync, mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, extname, join, resolve } from "node:path";

/** Files a component imports: code and JSON (the extensions the component resolver tries). */
const COPIED_EXTENSIONS = new Set([".mjs", ".js", ".cjs", ".ts", ".mts", ".cts", ".json"]);
/** Large and never imported. */
const SKIPPED_FILES = new Set(["package-lock.json"]);
/**
 * Most bytes copied: a function's bundle is at most 250 MB unzipped, and a deploying route's
 * already holds esbuild-wasm, npm and the shipped packages.
 */
export const MAX_REGISTRY_DIR_BYTES = 100 * 1024 * 1024;

/** What {@link stageRegistryDir} copied. */
export interface StagedRegistryDir {
  /** The filtered copy, in a temporary folder of its own. */
  readonly dir: string;
  readonly files: number;
  readonly bytes: number;
}

/** One staged copy per source folder and synth, however many functions carry it. */
const staged = new Map<string, StagedRegistryDir>();

/**
 * A filtered copy of the registry directory `dir` (resolved from the working directory): files
 * with a code or JSON extension, without `node_modules`, dot files and folders, lock files and
 * symbolic links (a link could point anywhere on the deploying machine). Throws, failing the
 * synth, when `dir` is no folder or the copy would exceed {@link MAX_REGISTRY_DIR_BYTES}.
 */
export function stageRegistryDir(dir: string): StagedRegistryDir {
  const from = resolve(dir);
  const known = staged.get(from);
  if (known) return known;
  if (!existsSync(from) || !statSync(from).isDirectory()) {
    throw new Error(`registryDir ${JSON.stringify(dir)} is not a folder`);
  }
  const to = mkdtempSync(join(tmpdir(), "sluice-registry-dir-"));
  let files = 0;
  let bytes = 0;
  cpSync(from, to, {
    recursive: true,
    filter(source) {
      if (source === from) return true;
      const name = basename(source);
      const stats = lstatSync(source);
      if (stats.isSymbolicLink() || name.startsWith(".") || name === "node_modules") return false;
      if (stats.isDirectory()) return true;
      if (!stats.isFile() || SKIPPED_FILES.has(name) || !COPIED_EXTENSIONS.has(extname(name))) return false;
      files += 1;
      bytes += stats.size;
      if (bytes > MAX_REGISTRY_DIR_BYTES) {
        throw new Error(
          `registryDir ${JSON.stringify(dir)} holds over ${MAX_REGISTRY_DIR_BYTES / 1024 / 1024} MiB of component files, more than a function's bundle can carry: point it at the apps you use (sluice registry add)`,
        );
      }
      return true;
    },
  });
  const result = { dir: to, files, bytes };
  staged.set(from, result);
  return result;
}
