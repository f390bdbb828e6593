/**
 * The app catalog of a process: Sluice's shipped `registry/apps.json`, then the operator's apps
 * file (`SLUICE_APPS_FILE` locally, `-c appsFile` on AWS), whose apps add to or replace the
 * shipped ones by `name_slug`. Read once, at start: a bad file stops the start with an error
 * naming the file and the field.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { APPS_ASSET, APPS_FILE_NAME, OPERATOR_APPS_FILE } from "#config/shared-names";
import { mergeApps, parseAppsFile } from "#core/app-catalog-file";
import { type AppCatalog, staticAppCatalog } from "#core/ports/app-catalog";

export { APPS_FILE_NAME };

/** Bytes of an apps file: 10,000 apps of a few hundred bytes fit; a wrong file (a dump, a log) does not. */
export const APPS_FILE_MAX_BYTES = 8 * 1024 * 1024;

function readApps(file: string, what: string) {
  let text: string;
  let size: number;
  try {
    size = statSync(file).size;
    // Checked before reading: a wrong path to a huge file stops the start with a reason, not out of memory.
    text = size > APPS_FILE_MAX_BYTES ? "" : readFileSync(file, "utf8");
  } catch (error) {
    throw new Error(
      `cannot read the ${what} ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
  if (size > APPS_FILE_MAX_BYTES) {
    throw new Error(`the ${what} ${file} is ${size} bytes, more than ${APPS_FILE_MAX_BYTES}: is it the right file?`);
  }
  return parseAppsFile(text, `the ${what} ${file}`);
}

/** The catalog of `registryDir`'s `apps.json` and, after it, the operator's `appsFile`. */
export function loadAppCatalog(registryDir: string, appsFile?: string): AppCatalog {
  const shipped = readApps(join(registryDir, APPS_FILE_NAME), "shipped apps file");
  if (appsFile === undefined) return staticAppCatalog(shipped);
  return staticAppCatalog(mergeApps(shipped, readApps(appsFile, "apps file"), `the apps file ${appsFile}`));
}

/**
 * The catalog a function's bundle carries (`<taskRoot>/apps/`, lib/constructs/apps-asset.ts): the
 * shipped apps and, when the stack was given `-c appsFile`, the operator's. Read on first use, so
 * a function without the folder (one that never reads apps) starts as before; used there, it fails
 * saying what is missing.
 */
export function bundledAppCatalog(taskRoot: string): AppCatalog {
  let catalog: AppCatalog | undefined;
  const load = () => {
    if (catalog) return catalog;
    const dir = join(taskRoot, APPS_ASSET);
    if (!existsSync(join(dir, APPS_FILE_NAME))) {
      throw new Error(`the app catalog is not in this function's bundle (${dir}): give it the apps asset`);
    }
    const operator = join(dir, OPERATOR_APPS_FILE);
    catalog = loadAppCatalog(dir, existsSync(operator) ? operator : undefined);
    return catalog;
  };
  return { list: () => load().list(), find: (idOrSlug) => load().find(idOrSlug) };
}
