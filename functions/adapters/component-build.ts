/**
 * The esbuild steps every component bundle goes through, shared by the local sandbox's bundler
 * (`local/sandbox-bundle.ts`, native esbuild) and the AWS source bundler (`aws/source-bundle.ts`,
 * esbuild-wasm on Lambda). esbuild is passed in and only its types are imported, so a Lambda
 * bundling this file pulls esbuild in only where it asks for it.
 *
 * The bundler runs with the server's rights (on AWS in a function with credentials), and it must
 * read nothing but the component and the npm packages it imports. Whenever it writes a source map,
 * esbuild follows the `//# sourceMappingURL=<path or file: URL>` comment of each input it parses
 * (also `//@ `, `/*# ... *\/`), reads that file, and quotes its first token in its error. So:
 *
 * - the user's code is first run through esbuild's `transform`, which has no file system and
 *   keeps no comment (`legalComments: "none"`); its source map is inlined as a `data:` URL, which
 *   esbuild chains into the bundle's map, so stack frames still name the user's own lines;
 * - a file loaded from disk (an npm package) whose text has such a comment goes through the same
 *   `transform` before esbuild parses it ({@link ignoreInputSourceMaps});
 * - errors quote esbuild's text only at a place in the user's own code (`component-compile-error.ts`).
 *
 * Confining what packages import to the package cache is the npm plugin's part (`npm/esbuild-plugin.ts`).
 */
import { readFile } from "node:fs/promises";
import { SourceMap } from "node:module";
import { basename, extname, join, resolve } from "node:path";
import type { BuildOptions, BuildResult, build, Loader, Plugin, stop, transform } from "esbuild";
import { compileError, SOURCE_FILE } from "#adapters/component-compile-error";
import { componentFilesPlugin, pipedreamTypesPlugin } from "#adapters/component-files-plugin";
import { noFileImports } from "#adapters/no-file-imports";
import { type ComponentFiles, unpackComponentFiles } from "#core/component-files";

/** The esbuild JS API; `esbuild` and `esbuild-wasm` both provide it. */
export interface EsbuildApi {
  build: typeof build;
  transform: typeof transform;
  stop: typeof stop;
}

/** Everything about a component's bundle but its input: format, target, banner, outfile, ... */
export type ComponentOutputOptions = Omit<
  BuildOptions,
  | "stdin"
  | "entryPoints"
  | "plugins"
  | "sourcemap"
  | "sourcesContent"
  | "bundle"
  | "platform"
  | "logLevel"
  | "absWorkingDir"
>;

export interface ComponentBuildOptions {
  /** Folder the component's imports are resolved from; its entry is `<resolveDir>/component.ts`. */
  readonly resolveDir: string;
  /** Plugins that resolve npm packages. @default none */
  readonly plugins?: readonly Plugin[];
  /**
   * Where the bundle's source map goes: `inline` (a `data:` URL at the end of the bundle), or
   * `beside` (`<outfile>.map`, with no comment naming it: Node then never reads it when the bundle
   * loads, and the sandbox child reads it only to map a stack, `runtime-layer/lazy-source-maps.ts`).
   * Either way the map holds mappings only, no copy of the sources.
   * @default "inline"
   */
  readonly sourceMap?: "inline" | "beside";
  readonly output: ComponentOutputOptions;
}

/**
 * Bundles a component module (ESM or CommonJS, JavaScript or TypeScript) for Node with a source
 * map (`options.sourceMap`), reading no file but its npm packages (see the file header). Packed multi-file code
 * (`#core/component-files`) is bundled from its entry, its relative imports resolved among its
 * own files only.
 *
 * @throws DomainError `validation` on `component_code` when it does not compile or an import
 * cannot be resolved; a plugin's own DomainError as it is.
 */
export async function buildComponent(
  esbuild: EsbuildApi,
  code: string,
  options: ComponentBuildOptions,
): Promise<BuildResult> {
  const files = unpackComponentFiles(code);
  if (files) return buildComponentFiles(esbuild, files, options);
  const entry = await withLiveService(esbuild, () =>
    esbuild.transform(code, { loader: "ts", sourcefile: SOURCE_FILE, sourcemap: "external", legalComments: "none" }),
  ).catch((error: unknown) => {
    throw compileError(error);
  });
  const map = entry.map;
  const positions = new SourceMap(JSON.parse(map));
  try {
    return await withLiveService(esbuild, () =>
      esbuild.build({
        ...options.output,
        stdin: {
          contents: `${entry.code}//# sourceMappingURL=data:application/json;base64,${Buffer.from(map).toString("base64")}\n`,
          loader: "js",
          resolveDir: options.resolveDir,
          sourcefile: SOURCE_FILE,
        },
        ...bundleOptions(esbuild, options, noFileImports(join(options.resolveDir, SOURCE_FILE))),
      }),
    );
  } catch (error) {
    // esbuild reports places in what it parsed, the transformed code: back to the user's lines.
    throw compileError(error, (line, column) => {
      const found = positions.findEntry(line - 1, column) as { originalLine?: number; originalColumn?: number };
      return found.originalLine === undefined
        ? undefined
        : { line: found.originalLine + 1, column: found.originalColumn ?? 0 };
    });
  }
}

/**
 * The options every component bundle is built with. `files` resolves (or refuses) the imports of
 * files by path, first: they are never esbuild's to resolve on disk.
 */
function bundleOptions(esbuild: EsbuildApi, options: ComponentBuildOptions, files: Plugin): BuildOptions {
  return {
    // Paths in esbuild's messages, the bundle's comments and its source map are relative to
    // this: the user's code is then exactly `component.ts` in messages, which is how
    // `compileError` tells it from any package file.
    absWorkingDir: resolve(options.resolveDir),
    bundle: true,
    platform: "node",
    // A map names the user's lines; the sources themselves would only make it (and, inline, the
    // loaded code) three times as large.
    sourcemap: options.sourceMap === "beside" ? "external" : "inline",
    sourcesContent: false,
    logLevel: "silent",
    plugins: [
      files,
      pipedreamTypesPlugin(),
      ...(options.plugins ?? []),
      // Last: plugins before it may refuse a load (the npm plugin confines packages to the cache).
      ignoreInputSourceMaps(esbuild),
    ],
  };
}

/** {@link buildComponent} of a multi-file component: its entry, its files served by a plugin. */
async function buildComponentFiles(
  esbuild: EsbuildApi,
  component: ComponentFiles,
  options: ComponentBuildOptions,
): Promise<BuildResult> {
  try {
    return await withLiveService(esbuild, () =>
      esbuild.build({
        ...options.output,
        entryPoints: [component.entry],
        ...bundleOptions(esbuild, options, componentFilesPlugin(esbuild, component, options.resolveDir)),
      }),
    );
  } catch (error) {
    throw compileError(error);
  }
}

/**
 * Text that makes esbuild read a source map: `//# sourceMappingURL=`, `//@`, `/*#`. esbuild
 * honours only `#` or `@` as the comment's third character followed by exactly
 * ` sourceMappingURL=`; this is looser on purpose (any spacing, any case), so nothing esbuild
 * might honour slips through.
 */
const SOURCE_MAP_COMMENT = /[#@]\s*sourceMappingURL/i;

/** The loaders esbuild picks by extension for the files it parses (others take no comments). */
const PARSED_LOADERS: Readonly<Record<string, Loader>> = {
  ".js": "js",
  ".mjs": "js",
  ".cjs": "js",
  ".jsx": "jsx",
  ".ts": "ts",
  ".mts": "ts",
  ".cts": "ts",
  ".tsx": "tsx",
  ".css": "css",
  ".json": "json",
};

/**
 * `require(__dirname + "/x.js")` and `require(path.join(__dirname, "x.js"))` in a package's
 * CommonJS file: the file beside it, loaded by a path computed at run time (`pg-format` loads its
 * word list so). A bundle has no such files beside it, and esbuild's ESM output no `__dirname`,
 * so the call is rewritten to `require("./x.js")`, which esbuild bundles like any relative
 * require. Only string literals after `__dirname` are rewritten; other uses of `__dirname` stay.
 */
const DIRNAME_REQUIRE =
  /\brequire\(\s*(?:__dirname\s*\+\s*(["'])\/((?:(?!\1)[^\\\n])+)\1|(?:path\s*\.\s*)?join\(\s*__dirname\s*,\s*(["'])(?:\.\/)?((?:(?!\3)[^\\\n])+)\3\s*\))\s*\)/g;

/** `text` with each {@link DIRNAME_REQUIRE} call made a relative require; `text` itself when it has none. */
export function relativeDirnameRequires(text: string): string {
  if (!text.includes("__dirname")) return text;
  return text.replace(DIRNAME_REQUIRE, (_call, _q1, concatenated?: string, _q2?: string, joined?: string) => {
    const target = concatenated ?? joined ?? "";
    return `require(${JSON.stringify(target.startsWith("../") ? target : `./${target}`)})`;
  });
}

/**
 * An esbuild plugin for the files it reads from disk:
 * - a package's `require(__dirname + "/x.js")` becomes `require("./x.js")` ({@link relativeDirnameRequires});
 * - a file whose text names a source map is handed to esbuild as `transform` printed it (comments
 *   gone, lines mapped by an inline `data:` map). Packages carry such comments often
 *   (`//# sourceMappingURL=index.js.map`); their own maps are not followed, so their frames name
 *   the package's JavaScript.
 * Other files load as esbuild loads them.
 */
export function ignoreInputSourceMaps(esbuild: Pick<EsbuildApi, "transform">): Plugin {
  return {
    name: "sluice-input-source-maps",
    setup(pluginBuild) {
      pluginBuild.onLoad({ filter: /\.(?:[cm]?[jt]s|[jt]sx|css|json)$/, namespace: "file" }, async (args) => {
        const loader = PARSED_LOADERS[extname(args.path).toLowerCase()];
        const read = await readFile(args.path, "utf8");
        const text = loader === "js" && /[\\/]node_modules[\\/]/.test(args.path) ? relativeDirnameRequires(read) : read;
        if (loader === undefined) return undefined;
        if (!SOURCE_MAP_COMMENT.test(text)) return text === read ? undefined : { contents: text, loader };
        try {
          const printed = await esbuild.transform(text, {
            loader,
            sourcefile: basename(args.path),
            sourcemap: "inline",
            legalComments: "none",
          });
          return { contents: printed.code, loader: loader === "css" ? "css" : "js" };
        } catch {
          // esbuild's message would quote the file; the place of the import says which file it is.
          return { errors: [{ text: "this file does not compile" }] };
        }
      });
    },
  };
}

/** Builds in flight on each esbuild API remember the service they started on. */
const serviceGenerations = new WeakMap<object, number>();

/**
 * Runs one esbuild call so that a dead esbuild service does not fail every later call. esbuild's
 * JS API starts one long-lived service process and, once it has died, answers every call with
 * "The service is no longer running"; `stop()` forgets it, and the next call starts a new one.
 * A call sent to a service that was already dead did not kill it, so it runs once more on a new
 * one; a call during which the service died ("The service was stopped") fails, since it may be
 * what killed it. Only the first call to notice a death stops the service: a later `stop()`
 * would kill the new one.
 */
export async function withLiveService<T>(esbuild: Pick<EsbuildApi, "stop">, call: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const generation = serviceGenerations.get(esbuild) ?? 0;
    try {
      return await call();
    } catch (error) {
      const message = error instanceof Error ? error.message : "";
      const gone = message.startsWith("The service is no longer running");
      if (!gone && !message.startsWith("The service was stopped")) throw error;
      if ((serviceGenerations.get(esbuild) ?? 0) === generation) {
        serviceGenerations.set(esbuild, generation + 1);
        await esbuild.stop();
      }
      if (!gone || attempt > 1) throw error;
    }
  }
}
