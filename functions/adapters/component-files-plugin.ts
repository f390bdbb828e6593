/**
 * esbuild plugins for what a component brings besides npm packages (issue 15):
 *
 * - {@link componentFilesPlugin}: the files of a multi-file component (`#core/component-files`),
 *   served from memory in a namespace of their own. A relative import resolves ONLY among those
 *   files: never against the server's disk, never above the files' root, never an absolute path
 *   or a `file:` URL. A missing one fails the build naming the importing file and the import.
 * - {@link pipedreamTypesPlugin}: `@pipedream/types` (`defineApp`, `defineSource`,
 *   `defineAction`, identities at run time; the rest of the package is types, which TypeScript
 *   drops) served offline, since the package itself is not shipped. An import with a version
 *   range still goes to npm.
 *
 * Each file is first printed by esbuild's `transform`, as the single-module path does with the
 * user's code (`component-build.ts`): that keeps no comment, so no `//# sourceMappingURL=` of a
 * file can make esbuild read a path on disk, and its inline map keeps stack frames on the
 * file's own lines and name.
 */
import type { Loader, Message, Plugin } from "esbuild";
import { type ComponentFiles, importCandidates } from "#core/component-files";
import type { EsbuildApi } from "./component-build.ts";

/** The esbuild namespace of a component's own files; messages name a file `<namespace>:<path>`. */
export const COMPONENT_FILES_NAMESPACE = "component";
const TYPES_NAMESPACE = "sluice-pipedream-types";

/** The relative import forms, and the absolute ones refused: `/x`, `\x`, `C:x`, `file:`. */
const PATH_IMPORT = /^(\.|\/|\\|[a-zA-Z]:|file:)/;

/** The file an import names among `paths` ({@link importCandidates}), or why there is none. */
export function resolveAmongFiles(
  paths: ReadonlySet<string>,
  importer: string,
  specifier: string,
): { path: string } | { refused: string } | undefined {
  const candidates = importCandidates(importer, specifier);
  if ("refused" in candidates) return candidates;
  const found = candidates.paths.find((candidate) => paths.has(candidate));
  return found === undefined ? undefined : { path: found };
}

const loaderOf = (path: string): Loader => (/\.[cm]?ts$/.test(path) ? "ts" : path.endsWith(".json") ? "json" : "js");

/**
 * Serves `component`'s files to esbuild (see the file header). The entry point esbuild is given
 * must be `component.entry`. `resolveDir` is where npm packages and Node built-ins are resolved
 * from (the bundle's folder): esbuild resolves nothing relative from it, this plugin does.
 */
export function componentFilesPlugin(
  esbuild: Pick<EsbuildApi, "transform">,
  component: ComponentFiles,
  resolveDir: string,
): Plugin {
  const paths = new Set(Object.keys(component.files));
  return {
    name: "sluice-component-files",
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) =>
        args.kind === "entry-point" && args.path === component.entry
          ? { path: component.entry, namespace: COMPONENT_FILES_NAMESPACE }
          : undefined,
      );
      build.onResolve({ filter: PATH_IMPORT, namespace: COMPONENT_FILES_NAMESPACE }, (args) => {
        const found = resolveAmongFiles(paths, args.importer, args.path);
        if (found === undefined) {
          return {
            errors: [{ text: missingImport(args.importer, args.path, "no such file among the component's files") }],
          };
        }
        if ("refused" in found) return { errors: [{ text: missingImport(args.importer, args.path, found.refused) }] };
        return { path: found.path, namespace: COMPONENT_FILES_NAMESPACE };
      });
      build.onLoad({ filter: /.*/, namespace: COMPONENT_FILES_NAMESPACE }, async (args) => {
        const text = component.files[args.path];
        if (text === undefined) return { errors: [{ text: `${args.path} is not one of the component's files` }] };
        const loader = loaderOf(args.path);
        // JSON has no comments to follow; esbuild parses it as data.
        if (loader === "json") return { contents: text, loader, resolveDir };
        try {
          const printed = await esbuild.transform(text, {
            loader,
            sourcefile: args.path,
            sourcemap: "inline",
            legalComments: "none",
          });
          return { contents: printed.code, loader: "js", resolveDir };
        } catch (error) {
          return { errors: [{ text: transformFailure(args.path, error) }] };
        }
      });
    },
  };
}

function missingImport(importer: string, specifier: string, why: string): string {
  return `${importer}: cannot import ${JSON.stringify(specifier)}: ${why}`;
}

/** A file's syntax error, with its own line and column: the file is the user's to see. */
function transformFailure(path: string, error: unknown): string {
  const first = (error as { errors?: Message[] }).errors?.[0];
  if (!first) return `${path} does not compile`;
  const at = first.location ? ` (line ${first.location.line}, column ${first.location.column + 1})` : "";
  return `${path}: ${first.text}${at}`;
}

/** The runtime part of `@pipedream/types`: helpers that return what they are given. */
const PIPEDREAM_TYPES_MODULE = [
  "const same = (definition) => definition;",
  "export const defineApp = same;",
  "export const defineSource = same;",
  "export const defineAction = same;",
  "export const defineComponent = same;",
  "",
].join("\n");

/** `@pipedream/types` without a version range, served offline (see the file header). */
export function pipedreamTypesPlugin(): Plugin {
  return {
    name: "sluice-pipedream-types",
    setup(build) {
      build.onResolve({ filter: /^@pipedream\/types$/ }, () => ({
        path: "@pipedream/types",
        namespace: TYPES_NAMESPACE,
      }));
      build.onLoad({ filter: /.*/, namespace: TYPES_NAMESPACE }, () => ({
        contents: PIPEDREAM_TYPES_MODULE,
        loader: "js",
      }));
    },
  };
}
