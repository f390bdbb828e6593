import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

/** `test/fixtures/registry-tree/`: components written afresh in the public registry's layout. */
export const REGISTRY_TREE = fileURLToPath(new URL("../fixtures/registry-tree/", import.meta.url));

/**
 * The files of one app folder of the fixture tree (`components/<app>/`), by path relative to it,
 * as a client sends them in `component_files` (README files left out).
 */
export function appFiles(app: string): Record<string, string> {
  const root = join(REGISTRY_TREE, "components", app);
  const files: Record<string, string> = {};
  const walk = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (!entry.name.endsWith(".md"))
        files[relative(root, path).split("\\").join("/")] = readFileSync(path, "utf8");
    }
  };
  walk(root);
  return files;
}
