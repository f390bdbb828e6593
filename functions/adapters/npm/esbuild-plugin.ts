/**
 * npm packages for components (component-model.md: "use npm packages without an install step";
 * "a source may pin a version or a version range inside the require string"). An esbuild plugin
 * that resolves the bare imports of a component's own code, so the bundle carries its packages:
 *
 *   import { axios } from "@pipedream/platform";      // shipped with Sluice
 *   import get from "lodash@~4.17/get";                // pinned range, installed on first use
 *   const dayjs = require("dayjs");                    // no range: latest, installed on first use
 *
 * Resolution order for `name[@range][/subpath]` (`import-specifier.ts`):
 * 1. Packages Sluice ships (`shipped-packages.ts`), when the import gives no range or the shipped
 *    version satisfies it (`version-ranges.ts`). Offline.
 * 2. The content-addressed cache (`package-cache.ts`).
 * 3. `npm install` of `name@range` into that cache, with the npm Sluice depends on (`npm-cli.ts`).
 *
 * Imports made by packages themselves are left to esbuild's own resolution inside the package's
 * tree, confined to files of installed packages. Node built-ins stay external.
 */
import { realpathSync } from "node:fs";
import { isBuiltin } from "node:module";
import { homedir } from "node:os";
import { isAbsolute, relative, resolve } from "node:path";
import type { OnResolveArgs, OnResolveResult, Plugin, PluginBuild } from "esbuild";
import { redactPaths } from "#core/redact-paths";
import { type NpmSpecifier, npmInstallSpec, parseNpmSpecifier } from "./import-specifier.ts";
import type { InstalledTreeStore } from "./installed-trees.ts";
import { bundledNpmCli, type NpmRun } from "./npm-cli.ts";
import { CACHE_ENTRY_PATH, cachedOrInstalled, isCached } from "./package-cache.ts";
import { CHECKOUT_NODE_MODULES, shippedFolder } from "./shipped-packages.ts";

/** Options of {@link npmPackagesPlugin}. */
export interface NpmPackagesOptions {
  /** Root of the content-addressed package cache (created on first install). */
  readonly cacheDir: string;
  /**
   * npm registry URL passed to `npm install --registry`.
   * @default npm's own configuration (usually https://registry.npmjs.org/)
   */
  readonly registry?: string;
  /**
   * Time limit of one `npm install`; the process is killed when it is reached.
   * @default 120000
   */
  readonly installTimeoutMs?: number;
  /**
   * The `node_modules` folder that holds the packages Sluice ships (it must be named
   * `node_modules`: packages are resolved from its parent, as Node does).
   * @default the `node_modules` of the Sluice checkout
   */
  readonly shippedPackagesDir?: string;
  /**
   * The npm CLI's JavaScript entry (`bin/npm-cli.js` of an npm package), run with Sluice's own
   * Node (`process.execPath`). On AWS, `bundledNpmCli(<task root>/node_modules)`.
   * @default {@link bundledNpmCli}(): the npm of the Sluice checkout
   */
  readonly npmCli?: string;
  /**
   * A writable folder of npm's own, created on first install: npm runs with `HOME` set to it, its
   * cache (`npm_config_cache`) in `<npmHome>/cache` and its user configuration
   * (`npm_config_userconfig`) at `<npmHome>/.npmrc`, so it writes nothing elsewhere and no user's
   * `~/.npmrc` applies. Required on Lambda, where only /tmp is writable: `<cacheDir>/.npm-home`.
   * @default unset: the user's home, npm cache and `~/.npmrc`, as the user's own npm uses them
   */
  readonly npmHome?: string;
  /**
   * A store of installed trees shared between processes (AWS: `S3InstalledTrees`): an install is
   * fetched from it when the same resolved dependency set was installed before, and stored in it
   * otherwise (`installed-trees.ts`). @default none: every process installs for itself
   */
  readonly installedTrees?: InstalledTreeStore;
}

const DEFAULT_INSTALL_TIMEOUT_MS = 120_000;
/**
 * npm packages one bundle may install (packages shipped or installed before are not counted):
 * each is an npm run of seconds, and code of 1 MiB can name 70,000 (a probe's started hundreds).
 */
export const MAX_INSTALLS_PER_BUNDLE = 50;
/** Set on our own `build.resolve` calls so the plugin does not resolve its own lookups again. */
const OWN_LOOKUP = "sluice-npm-packages";
/** `node:`, `data:`, `https:`... (a `:` after an `@` is a range, and `parseNpmSpecifier` refuses it). */
const URL_SCHEME = /^[a-zA-Z][a-zA-Z0-9+.-]*:/;

/**
 * An esbuild plugin that bundles the npm packages a component imports (see the file header).
 * Pass it in `plugins` instead of `packages: "external"`.
 */
export function npmPackagesPlugin(options: NpmPackagesOptions): Plugin {
  const shippedDir = options.shippedPackagesDir ?? CHECKOUT_NODE_MODULES;
  const npm: NpmRun = {
    cli: options.npmCli ?? bundledNpmCli(),
    home: options.npmHome,
    registry: options.registry,
    timeoutMs: options.installTimeoutMs ?? DEFAULT_INSTALL_TIMEOUT_MS,
  };
  return {
    name: "sluice-npm-packages",
    setup(build) {
      // The specs this build has installed or is installing (each counted once).
      const installing = new Set<string>();
      build.onResolve({ filter: /^[^./]/ }, async (args): Promise<OnResolveResult | undefined> => {
        if ((args.pluginData as Record<string, unknown> | undefined)?.[OWN_LOOKUP]) return undefined;
        if (!isComponentImport(args)) return undefined;
        const spec = parseNpmSpecifier(args.path);
        if (!spec) return { errors: [{ text: `"${args.path}" is not a valid npm package name` }] };
        // `crypto/x`: a built-in's name with a subpath but no range stays Node's (and fails there).
        if (spec.range === undefined && isBuiltin(spec.name)) return { path: args.path, external: true };

        let folder = shippedFolder(shippedDir, spec);
        if (folder === undefined && !isCached(options.cacheDir, spec)) {
          installing.add(npmInstallSpec(spec.name, spec.range));
          if (installing.size > MAX_INSTALLS_PER_BUNDLE) {
            return {
              errors: [
                {
                  text: `cannot install npm package "${npmInstallSpec(spec.name, spec.range)}": a component may install at most ${MAX_INSTALLS_PER_BUNDLE} npm packages not installed before`,
                },
              ],
            };
          }
        }
        if (folder === undefined) {
          try {
            folder = await cachedOrInstalled(options.cacheDir, spec, npm, options.installedTrees);
          } catch (error) {
            // npm names its cache and home folders in its errors: none of the client's business.
            const reason = redactPaths(error instanceof Error ? error.message : String(error), [
              resolve(options.cacheDir),
              npm.home ?? homedir(),
            ]);
            return {
              errors: [{ text: `cannot install npm package "${npmInstallSpec(spec.name, spec.range)}": ${reason}` }],
            };
          }
        }
        return resolveInside(build, args, folder, spec);
      });
      // A package's own imports are esbuild's to resolve, and a package (anyone can publish one)
      // may name any path: `require("/home/me/.docker/config.json")` would put that file into
      // the bundle, for the component to read at run time. Every file loaded from disk must be
      // a file of an installed package.
      const isPackageFile = packageFiles(options.cacheDir, shippedDir);
      build.onLoad({ filter: /.*/, namespace: "file" }, (args) =>
        isPackageFile(args.path)
          ? undefined
          : { errors: [{ text: "an npm package may import only files of npm packages" }] },
      );
    },
  };
}

/**
 * Whether a path (as esbuild loads it: symlinks resolved) is a file of an installed package:
 * inside `<cacheDir>/<hash>/node_modules/` or the shipped `node_modules`.
 */
function packageFiles(cacheDir: string, shippedDir: string): (path: string) => boolean {
  const real = (path: string) => {
    try {
      return realpathSync.native(path);
    } catch {
      return resolve(path);
    }
  };
  const inside = (folder: string, path: string) => {
    const rest = relative(folder, path);
    return rest !== "" && !rest.startsWith("..") && !isAbsolute(rest) ? rest : undefined;
  };
  return (path) => {
    if (inside(real(shippedDir), path) !== undefined) return true;
    const inCache = inside(real(cacheDir), path);
    return inCache !== undefined && CACHE_ENTRY_PATH.test(inCache);
  };
}

/**
 * True for an import written in the component's own code. Imports made by a package (a file under
 * some `node_modules`) resolve inside that package's tree; `#imports`, URLs and `data:` imports,
 * and Node built-ins are esbuild's to handle.
 */
function isComponentImport(args: OnResolveArgs): boolean {
  if (args.path.startsWith("#") || URL_SCHEME.test(args.path) || isBuiltin(args.path)) return false;
  return !args.importer.split(/[\\/]/).includes("node_modules");
}

async function resolveInside(
  build: PluginBuild,
  args: OnResolveArgs,
  folder: string,
  spec: NpmSpecifier,
): Promise<OnResolveResult> {
  const result = await build.resolve(spec.subpath === undefined ? spec.name : `${spec.name}/${spec.subpath}`, {
    resolveDir: folder,
    kind: args.kind,
    importer: args.importer,
    pluginData: { [OWN_LOOKUP]: true },
  });
  if (result.errors.length > 0) return { errors: result.errors };
  return {
    path: result.path,
    namespace: result.namespace,
    external: result.external,
    sideEffects: result.sideEffects,
    suffix: result.suffix,
    warnings: result.warnings,
  };
}
