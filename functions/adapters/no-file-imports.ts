import type { Plugin } from "esbuild";

/**
 * An esbuild plugin that refuses `./x`, `/x`, `C:\x` and `file:` imports written in the user's
 * module (`entry`) when it was given as one module (`component_code`): the bundler runs with
 * Sluice's rights (on AWS, in a function with credentials), so it must never read files on the
 * code's behalf. A component of several files brings them (`component_files`, or a
 * `component_url` whose imports were fetched) and its imports resolve among them only
 * (`component-files-plugin.ts`). Used by the local sandbox's bundler and by the AWS source bundler.
 */
export function noFileImports(entry: string): Plugin {
  return {
    name: "sluice-no-file-imports",
    setup(pluginBuild) {
      pluginBuild.onResolve({ filter: /^(\.|\/|\\|[a-zA-Z]:|file:)/ }, (args) =>
        args.importer === entry
          ? {
              errors: [
                { text: `cannot import "${args.path}": a component is a single module; import npm packages only` },
              ],
            }
          : undefined,
      );
    },
  };
}
