/**
 * The components and workflow templates shipped with Sluice (see registry/README.md): a components
 * tree in the public registry's layout, `registry/components/<app>/sources/<name>/<name>.mjs` (and
 * `actions/`), served by key through the same code as `SLUICE_REGISTRY_DIR`
 * ({@link registryDirectory}), and one JSON file per template id, `registry/templates/<tch_id>.json`.
 * {@link DEFAULT_REGISTRY_DIR} is right when running from the checkout (local mode, tests); a
 * bundled Lambda has no checkout around it and must pass the folder it ships.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ComponentRegistry } from "#core/ports/component-registry";
import { registryDirectory } from "./registry-directory.ts";

/** Absolute path of the repository's `registry/` folder. */
export const DEFAULT_REGISTRY_DIR = fileURLToPath(new URL("../../registry/", import.meta.url));

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
 * The JSON text of workflow template `id` (`<registryDir>/templates/<id>.json`), or undefined when
 * the id is not a valid template id or no such file exists.
 */
export async function readRegistryTemplate(registryDir: string, id: string): Promise<string | undefined> {
  if (!TEMPLATE_ID.test(id)) return undefined;
  return readIfPresent(join(registryDir, "templates", `${id}.json`));
}

/**
 * The {@link ComponentRegistry} of the folder `registryDir`: its components tree by key, its
 * templates by id. `extraDir`, when given, is a registry directory served before it
 * (`SLUICE_REGISTRY_DIR`, `-c registryDir`): its keys win, the rest and every template are these.
 */
export function registryFiles(registryDir: string, extraDir?: string): ComponentRegistry {
  const shipped = registryDirectory(registryDir, {
    readCode: async () => undefined,
    readTemplate: (id) => readRegistryTemplate(registryDir, id),
  });
  return extraDir === undefined ? shipped : registryDirectory(extraDir, shipped);
}
