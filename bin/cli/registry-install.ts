/**
 * `sluice registry add`: puts an npm package of the public registry (`@pipedream/<app>`, in the
 * registry's own layout: `<app>.app.mjs`, `sources/<name>/<name>.mjs`, `actions/...`) into a
 * registry directory as its app folder `<dir>/<app>/` (`<dir>/components/<app>/` when the
 * directory is a checkout holding `components/`), where `SLUICE_REGISTRY_DIR` serves its
 * components by key. The package comes as a tarball: `npm pack` downloads a named one without
 * installing it (no scripts, no dependencies: a component's npm imports are installed when it is
 * bundled), and a local `.tgz` is read as is, so it works offline.
 */
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { bundledNpmCli, runNpmPack } from "#adapters/npm/npm-cli";
import { PackageTarballError, unpackPackageTarball } from "#adapters/npm/package-tarball";
import { appsFolderOf, indexTree } from "#adapters/registry-directory";
import { CliError, UsageError } from "./errors.ts";

/** An npm package name, optionally scoped, optionally with `@<version or tag>`. */
const PACKAGE_SPEC =
  /^(?<name>(?:@[a-z0-9][a-z0-9._-]*\/)?[a-z0-9][a-z0-9._-]*)(?:@(?<version>[A-Za-z0-9._^~<>=|+ -]+))?$/;
/** An app folder's name: the registry's app slugs (`helper_functions`, `google_sheets`); never `.` or `..`. */
const APP_NAME = /^[a-z0-9][a-z0-9_-]{0,99}$/;
/** How long `npm pack` may take to download a package. */
const PACK_TIMEOUT_MS = 120_000;

export interface AddedPackage {
  package: string;
  version: string;
  /** The app folder written. */
  dir: string;
  /** Whether an app folder of that name was there before (and is now replaced). */
  replaced: boolean;
  components: { key: string; path: string }[];
  /** Keys of this package that another app folder of the directory serves instead (the first folder wins). */
  shadowed: { key: string; servedFrom: string }[];
}

/** Whether `spec` names a tarball file rather than a package in the npm registry. */
export const isTarballPath = (spec: string) => /\.(tgz|tar\.gz)$/.test(spec) || /^(\.{1,2}\/|\/|~|file:)/.test(spec);

/**
 * `spec`'s package name and version when it names a package in the npm registry, undefined when
 * it is a tarball's path; a {@link UsageError} when it is neither.
 */
export function checkPackageSpec(spec: string): { name: string; version: string | undefined } | undefined {
  if (isTarballPath(spec)) return undefined;
  const groups = PACKAGE_SPEC.exec(spec)?.groups;
  if (groups?.name === undefined) {
    throw new UsageError(
      `registry add: ${JSON.stringify(spec)} is not an npm package name (such as @pipedream/helper_functions) or a .tgz file`,
    );
  }
  return { name: groups.name, version: groups.version };
}

/**
 * Adds the package `spec` (a name as npm knows it, or a tarball's path) to the registry directory
 * `dir` (created when missing); an app folder of the same name is replaced whole.
 */
export async function addRegistryPackage(
  spec: string,
  dir: string,
  options: { npmRegistry?: string; cwd: string },
): Promise<AddedPackage> {
  const wanted = checkPackageSpec(spec);
  const files = unpack(await readTarball(spec, wanted === undefined, options));
  const manifest = manifestOf(files);
  if (wanted !== undefined && manifest.name !== wanted.name) {
    throw new CliError(`registry add: npm gave ${manifest.name}, not ${wanted.name}`);
  }
  const app = manifest.name.split("/").pop() ?? "";
  // An app named `components` would be read as the folder holding the apps.
  if (!APP_NAME.test(app) || app === "components") {
    throw new CliError(
      `registry add: the package name ${JSON.stringify(manifest.name)} cannot name an app folder (lowercase letters, digits, _ and -)`,
    );
  }

  await mkdir(dir, { recursive: true });
  const apps = await appsFolderOf(dir);
  // Staged beside the app folders, so the move in is one rename; the index skips dot folders.
  const staging = join(apps, `.add-${randomBytes(6).toString("hex")}`);
  try {
    for (const [path, data] of files) {
      const to = join(staging, app, ...path.split("/"));
      await mkdir(dirname(to), { recursive: true });
      await writeFile(to, data, { flag: "wx" });
    }
    const found = await indexTree(staging);
    if (found.entries.size === 0) {
      throw new CliError(
        `registry add: ${manifest.name} holds no component with a key (the registry's layout: sources/<name>/<name>.mjs or actions/<name>/<name>.mjs declaring key: "...")`,
      );
    }
    const target = join(apps, app);
    const replaced = await exists(target);
    if (replaced) await rename(target, join(staging, ".replaced"));
    await rename(join(staging, app), target);
    const served = (await indexTree(dir)).entries;
    const components = [...found.entries].map(([key, path]) => ({ key, path: join(apps, ...path.split("/")) }));
    const shadowed = [...found.entries.keys()].flatMap((key) => {
      const servedFrom = served.get(key);
      return servedFrom === undefined || servedFrom.startsWith(`${app}/`)
        ? []
        : [{ key, servedFrom: join(apps, ...servedFrom.split("/")) }];
    });
    return { package: manifest.name, version: manifest.version, dir: target, replaced, components, shadowed };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** The tarball's bytes: the file at `spec`, or what `npm pack` downloads. */
async function readTarball(
  spec: string,
  fromFile: boolean,
  options: { npmRegistry?: string; cwd: string },
): Promise<Uint8Array> {
  if (fromFile) {
    const path = resolve(options.cwd, spec.replace(/^file:/, ""));
    try {
      if (!(await stat(path)).isFile()) throw new CliError(`registry add: ${spec} is not a file`);
      return await readFile(path);
    } catch (error) {
      if (error instanceof CliError) throw error;
      throw new CliError(`registry add: cannot read ${spec} (${(error as NodeJS.ErrnoException).code ?? error})`);
    }
  }
  const destination = await mkdtemp(join(tmpdir(), "sluice-registry-add-"));
  try {
    const tarball = await runNpmPack(spec, destination, {
      cli: bundledNpmCli(),
      home: undefined,
      registry: options.npmRegistry,
      timeoutMs: PACK_TIMEOUT_MS,
    }).catch((error: unknown) => {
      throw new CliError(`registry add: npm could not fetch ${spec}: ${(error as Error).message}`);
    });
    return await readFile(tarball);
  } finally {
    await rm(destination, { recursive: true, force: true });
  }
}

function unpack(tarball: Uint8Array): Map<string, Buffer> {
  try {
    return unpackPackageTarball(tarball);
  } catch (error) {
    if (error instanceof PackageTarballError) throw new CliError(`registry add: ${error.message}`);
    throw error;
  }
}

function manifestOf(files: Map<string, Buffer>): { name: string; version: string } {
  const text = files.get("package.json")?.toString("utf8");
  let manifest: { name?: unknown; version?: unknown } | undefined;
  try {
    manifest = text === undefined ? undefined : JSON.parse(text);
  } catch {
    manifest = undefined;
  }
  const name = manifest?.name;
  if (typeof name !== "string" || PACKAGE_SPEC.exec(name)?.groups?.version !== undefined || !PACKAGE_SPEC.test(name)) {
    throw new CliError("registry add: the package has no package.json naming it");
  }
  return { name, version: typeof manifest?.version === "string" ? manifest.version : "" };
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
