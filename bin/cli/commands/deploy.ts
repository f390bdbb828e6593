import { CLIENT_OPTIONS, CLIENT_OPTIONS_HELP, propAssignments } from "../args.ts";
import type { Command } from "../command.ts";
import { deployedLines, deployFile, endpointOf, updateFile } from "../deploying.ts";
import { UsageError } from "../errors.ts";
import { isIdOf } from "../ids.ts";
import { printJson, printText } from "../output.ts";
import { connect } from "../session.ts";

const FILES_HELP = `The file is read with the files it imports relatively (import ... from "./common.mjs",
"../app.mjs", require("./x")), transitively, and sent together (component_files and
component_entry; a file that imports none is sent as component_code). Nothing outside the
component's folder tree is read: the nearest folder above the file holding .git or package.json
(else the file's own folder), or --root. A symbolic link out of it is refused. npm packages are
installed by the server.`;

const PROP_HELP = `  --prop <name>=<value>  a configured prop (repeatable). A string prop takes the value as written;
                         any other the JSON it spells: --prop count=3, --prop 'timer={"intervalSeconds":60}'
  --root <dir>           the folder tree the component's files are read from (see above)`;

export const deploy: Command = {
  name: "deploy",
  summary: "deploy a component file as a source (an action is saved as a component)",
  usage: `Usage: sluice deploy <file> [--prop <name>=<value> ...] [--name <name>]

Deploys <file> as an event source and prints its id (and its endpoint, when it has an HTTP
interface). A file whose default export is an action (type: "action") is saved as a component
instead, and its sc_ id printed.

${FILES_HELP}

${PROP_HELP}
  --name <name>          the source's name (default: the component's)
${CLIENT_OPTIONS_HELP}`,
  options: {
    ...CLIENT_OPTIONS,
    prop: { type: "string", multiple: true },
    name: { type: "string" },
    root: { type: "string" },
  },
  positionals: { min: 1, max: 1 },
  async run(values, [file = ""], io) {
    const props = propAssignments((values.prop as string[] | undefined) ?? []);
    const api = await connect(values, io);
    const deployed = await deployFile(api, io, file, {
      props,
      name: values.name as string | undefined,
      root: values.root as string | undefined,
    });
    if (values.json) printJson(io, deployed.kind === "action" ? deployed.component : deployed.source);
    else printText(io, deployedLines(deployed));
  },
};

export const update: Command = {
  name: "update",
  summary: "put a file's new code (and props) on a deployed source, keeping its id",
  usage: `Usage: sluice update <source id> <file> [--prop <name>=<value> ...]

Puts the code of <file> on the source (PUT /v1/sources/{id}): deactivate() runs, the code is
swapped, activate() runs. The source keeps its id, its endpoint and every configured prop that
no --prop names (secrets included).

${FILES_HELP}

${PROP_HELP}
${CLIENT_OPTIONS_HELP}`,
  options: { ...CLIENT_OPTIONS, prop: { type: "string", multiple: true }, root: { type: "string" } },
  positionals: { min: 2, max: 2 },
  async run(values, [id = "", file = ""], io) {
    if (!isIdOf(id, "dc_")) throw new UsageError(`update: ${JSON.stringify(id)} is not a source id (dc_...)`);
    const props = propAssignments((values.prop as string[] | undefined) ?? []);
    const api = await connect(values, io);
    const source = await updateFile(api, io, id, file, { props, root: values.root as string | undefined });
    if (values.json) printJson(io, source);
    else {
      const endpoint = endpointOf(source);
      printText(io, `Updated source "${source.name}" (${source.id})\n${endpoint ? `  endpoint: ${endpoint}\n` : ""}`);
    }
  },
};
