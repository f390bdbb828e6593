/**
 * The app catalog as functions' bundles carry it (`<bundle>/apps/`, APPS_ASSET): a copy of the
 * shipped `registry/apps.json` and, with `-c appsFile=<path>`, the operator's apps file as
 * `operator-apps.json`, which the AWS composition reads after it (`loadAppCatalog`). The
 * operator's file is parsed at synth, so a bad one fails `cdk synth` naming the file and field
 * instead of every function at its first request. It may hold OAuth client secrets: it goes only
 * into the functions of trusted code (API routes with table access, the functions that run
 * sources and workflows), never into the describer or a source's function.
 */
import { copyFileSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { APPS_ASSET, APPS_FILE_NAME, OPERATOR_APPS_FILE } from "#config/shared-names";
import { parseAppsFile } from "#core/app-catalog-file";
import { type BundledTree, PROJECT_ROOT } from "./sluice-function.ts";

/** One staged copy per apps file and synth, however many functions carry it. */
const staged = new Map<string, BundledTree>();

/**
 * The folder to copy into a bundle as {@link APPS_ASSET}. Throws, failing the synth, when
 * `appsFile` cannot be read or is not a valid apps file.
 */
export function stageAppsAsset(appsFile?: string): BundledTree {
  const key = appsFile === undefined ? "" : resolve(appsFile);
  const known = staged.get(key);
  if (known) return known;
  const dir = mkdtempSync(join(tmpdir(), "sluice-apps-"));
  copyFileSync(join(PROJECT_ROOT, "registry", APPS_FILE_NAME), join(dir, APPS_FILE_NAME));
  if (appsFile !== undefined) {
    let text: string;
    try {
      text = readFileSync(key, "utf8");
    } catch (error) {
      throw new Error(
        `appsFile ${JSON.stringify(appsFile)} cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      );
    }
    parseAppsFile(text, `appsFile ${JSON.stringify(appsFile)}`);
    copyFileSync(key, join(dir, OPERATOR_APPS_FILE));
  }
  const tree = { from: dir, to: APPS_ASSET };
  staged.set(key, tree);
  return tree;
}
