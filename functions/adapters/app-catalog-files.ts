/**
 * The app catalog of a process: Sluice's shipped `registry/apps.json`, then the operator's apps
 * file (`SLUICE_APPS_FILE` locally, `-c appsFile` on AWS), whose apps add to or replace the
 * shipped ones by `name_slug`. Read once, at start: a bad file stops the start with an error
 * naming the file and the field.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAppsFile } from "#core/app-catalog-file";
import { type AppCatalog, staticAppCatalog } from "#core/ports/app-catalog";

/** The shipped catalog's name inside a registry directory. */
export const APPS_FILE_NAME = "apps.json";

function readApps(file: string, what: string) {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new Error(
      `cannot read the ${what} ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
  return parseAppsFile(text, `the ${what} ${file}`);
}

/** The catalog of `registryDir`'s `apps.json` and, after it, the operator's `appsFile`. */
export function loadAppCatalog(registryDir: string, appsFile?: string): AppCatalog {
  const shipped = readApps(join(registryDir, APPS_FILE_NAME), "shipped apps file");
  const extra = appsFile === undefined ? [] : readApps(appsFile, "apps file");
  return staticAppCatalog([...shipped, ...extra]);
}
