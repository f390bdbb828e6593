/**
 * The components and workflow templates shipped with Sluice: one ES module per component key,
 * `registry/<key>.mjs`, and one JSON file per template id, `registry/templates/<tch_id>.json` (see
 * registry/README.md). {@link DEFAULT_REGISTRY_DIR} is right when running from the checkout (local
 * mode, tests); a bundled Lambda has no checkout around it and must pass the folder it ships.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ComponentRegistry } from "#core/ports/component-registry";

/** Absolute path of the repository's `registry/` folder. */
export const DEFAULT_REGISTRY_DIR = fileURLToPath(new URL("../../registry/", import.meta.url));

/** Registry keys: lowercase, so a key is also a safe file name (no `/`, `.` or `..`). */
const REGISTRY_KEY = /^[a-z0-9][a-z0-9_-]{0,99}$/;

/** Template ids (design 1.5): `tch_` and lowercase, so an id is also a safe file name. */
export const TEMPLATE_ID = /^tch_[a-z0-9_]{1,60}$/;

/** A file's text, or undefined when there is no such file. */
async function readIfPresent(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR" || code === "EISDIR") return undefined;
    throw error;
  }
}

/**
 * The code of registry component `key` (`<registryDir>/<key>.mjs`), or undefined when the key is
 * not a valid registry key or no such file exists.
 */
export async function readRegistryComponent(registryDir: string, key: string): Promise<string | undefined> {
  if (!REGISTRY_KEY.test(key)) return undefined;
  return readIfPresent(join(registryDir, `${key}.mjs`));
}

/**
 * The JSON text of workflow template `id` (`<registryDir>/templates/<id>.json`), or undefined when
 * the id is not a valid template id or no such file exists.
 */
export async function readRegistryTemplate(registryDir: string, id: string): Promise<string | undefined> {
  if (!TEMPLATE_ID.test(id)) return undefined;
  return readIfPresent(join(registryDir, "templates", `${id}.json`));
}

/** The {@link ComponentRegistry} of the folder `registryDir`. */
export function registryFiles(registryDir: string): ComponentRegistry {
  return {
    readCode: (key) => readRegistryComponent(registryDir, key),
    readTemplate: (id) => readRegistryTemplate(registryDir, id),
  };
}
