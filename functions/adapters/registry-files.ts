/**
 * The components shipped with Sluice, one ES module per key: `registry/<key>.mjs` (see
 * registry/README.md). {@link DEFAULT_REGISTRY_DIR} is right when running from the checkout
 * (local mode, tests); a bundled Lambda has no checkout around it and must pass the folder it ships.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** Absolute path of the repository's `registry/` folder. */
export const DEFAULT_REGISTRY_DIR = fileURLToPath(new URL("../../registry/", import.meta.url));

/** Registry keys: lowercase, so a key is also a safe file name (no `/`, `.` or `..`). */
const REGISTRY_KEY = /^[a-z0-9][a-z0-9_-]{0,99}$/;

/**
 * The code of registry component `key` (`<registryDir>/<key>.mjs`), or undefined when the key is
 * not a valid registry key or no such file exists.
 */
export async function readRegistryComponent(registryDir: string, key: string): Promise<string | undefined> {
  if (!REGISTRY_KEY.test(key)) return undefined;
  try {
    return await readFile(join(registryDir, `${key}.mjs`), "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR" || code === "EISDIR") return undefined;
    throw error;
  }
}
