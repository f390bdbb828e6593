/**
 * Packages Sluice ships ({@link SHIPPED_NPM_PACKAGES}: `@pipedream/platform` and its
 * dependencies), read from Sluice's own `node_modules`: a component's import of one needs no
 * install and no network, and runs the same code as Sluice's own tests.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { SHIPPED_NPM_PACKAGES } from "#config/shared-names";
import type { NpmSpecifier } from "./import-specifier.ts";
import { satisfiesRange } from "./version-ranges.ts";

/** The `node_modules` of the Sluice checkout (or of a bundle laid out like it). */
export const CHECKOUT_NODE_MODULES = fileURLToPath(new URL("../../../node_modules/", import.meta.url));

/**
 * The folder whose `node_modules` holds the shipped package, when it may serve this import: it
 * is shipped, and the import gives no range or the shipped version satisfies it.
 */
export function shippedFolder(shippedDir: string, spec: NpmSpecifier): string | undefined {
  if (!SHIPPED_NPM_PACKAGES.includes(spec.name)) return undefined;
  const version = packageVersion(join(shippedDir, spec.name));
  if (version === undefined) return undefined;
  if (spec.range !== undefined && !satisfiesRange(version, spec.range)) return undefined;
  return dirname(shippedDir.replace(/[\\/]+$/, ""));
}

function packageVersion(packageDir: string): string | undefined {
  try {
    const manifest = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as { version?: unknown };
    return typeof manifest.version === "string" ? manifest.version : undefined;
  } catch {
    return undefined;
  }
}
