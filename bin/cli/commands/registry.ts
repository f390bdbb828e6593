import type { Command } from "../command.ts";
import { UsageError } from "../errors.ts";
import { printJson, printText, withProgress } from "../output.ts";

const USAGE = `Usage: sluice registry add <package> [--dir <dir>] [--json]

Adds an npm package of the public registry (such as @pipedream/helper_functions, or
@pipedream/helper_functions@0.3.13) to a registry directory, as its app folder <dir>/<app>/,
replacing an earlier one of that name. Local mode serves every component of it with a \`key\`
by that key (GET /v1/components/registry/{key}, "key" on deploys), without a restart.

<package> is a name npm knows (downloaded with \`npm pack\`, from SLUICE_NPM_REGISTRY when set;
nothing is installed and no script runs) or the path of a package tarball (.tgz), read offline.

Options:
  --dir <dir>   the registry directory (default: $SLUICE_REGISTRY_DIR, else
                \${SLUICE_DATA_DIR:-./.sluice}/registry, which local mode serves by default)
  --json        print JSON for scripts instead of text`;

/** `sluice registry add <package>`: see {@link USAGE} and docs/cli.md. */
export const registry: Command = {
  name: "registry",
  summary: "add an npm package of the public registry (@pipedream/<app>) to the registry directory",
  usage: USAGE,
  options: { dir: { type: "string" }, json: { type: "boolean" } },
  positionals: { min: 2, max: 2 },
  async run(values, [action = "", spec = ""], io) {
    if (action !== "add") throw new UsageError(`registry: unknown action ${JSON.stringify(action)}\n\n${USAGE}`);
    if (values.dir === "") throw new UsageError(`registry add: --dir needs a folder\n\n${USAGE}`);
    const { loadLocalConfig } = await import("#config/env");
    const { nearPath } = await import("#config/near-path");
    const { addRegistryPackage, checkPackageSpec } = await import("../registry-install.ts");
    checkPackageSpec(spec);
    const config = loadLocalConfig(io.env);
    const dir = (values.dir as string | undefined) ?? nearPath(config.runtime.registryDir);
    const added = await withProgress(
      io,
      `adding ${spec}`,
      addRegistryPackage(spec, dir, { npmRegistry: config.runtime.npmRegistry, cwd: process.cwd() }),
    );
    if (values.json) {
      printJson(io, added);
      return;
    }
    const lines = [
      `${added.replaced ? "Replaced" : "Added"} ${added.package}${added.version ? ` ${added.version}` : ""} in ${added.dir}: ${added.components.length} component(s) with a key`,
      ...added.components.map((component) => `  ${component.key}`),
      ...added.shadowed.map(
        (shadow) => `warning: key ${shadow.key} is also in ${shadow.servedFrom}, which is served instead`,
      ),
    ];
    printText(io, `${lines.join("\n")}\n`);
  },
};
