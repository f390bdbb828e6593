import { basename } from "node:path";
import { coerceProps } from "./args.ts";
import type { ApiClient, Component, Source } from "./client.ts";
import type { Io } from "./command.ts";
import { type ComponentBody, readComponent } from "./component-files.ts";
import { withProgress } from "./output.ts";

export type Deployed =
  | { kind: "action"; component: Component }
  | { kind: "source"; component: Component; source: Source };

/** What `sluice deploy` and `sluice dev` take besides the file. */
export interface DeployOptions {
  props: Record<string, string>;
  name?: string;
  root?: string;
}

/**
 * Deploys `file` (and the files it imports): saves it as a component, whose metadata the server
 * reads in its sandbox; an action (`type: "action"`) stays a saved component, anything else is
 * deployed as a source of that component with `props`, coerced by the types the component declares.
 */
/** Deploys `file` (and its imports); answers what was deployed with the files as they were read. */
export async function deployFile(
  api: ApiClient,
  io: Io,
  file: string,
  options: DeployOptions,
): Promise<Deployed & { read: ComponentBody }> {
  const read = await readComponent(file, { root: options.root });
  const deployed = await withProgress(
    io,
    `deploying ${basename(file)}${filesNote(read)}`,
    deployRead(api, read, options),
  );
  return { ...deployed, read };
}

async function deployRead(api: ApiClient, read: ComponentBody, options: DeployOptions): Promise<Deployed> {
  const component = (await api.call<{ data: Component }>("POST", "/components", { body: read.body })).data;
  if (component.type === "action") return { kind: "action", component };
  const source = (
    await api.call<{ data: Source }>("POST", "/sources", {
      body: {
        component_id: component.id,
        configured_props: coerceProps(options.props, component.configurable_props),
        ...(options.name ? { name: options.name } : {}),
      },
    })
  ).data;
  return { kind: "source", component, source };
}

/**
 * Puts the code of `file` (and its imports) on source `id`: the source keeps its id, and every
 * configured prop `props` does not name (the server merges them).
 */
export async function updateFile(
  api: ApiClient,
  io: Io,
  id: string,
  file: string,
  options: { props: Record<string, string>; root?: string; read?: ComponentBody },
): Promise<Source> {
  const read = options.read ?? (await readComponent(file, { root: options.root }));
  const update = async () => {
    let configured: Record<string, unknown> | undefined;
    if (Object.keys(options.props).length > 0) {
      const source = (await api.call<{ data: Source }>("GET", `/sources/${id}`)).data;
      const component = (await api.call<{ data: Component }>("GET", `/components/${source.component_id}`)).data;
      configured = coerceProps(options.props, component.configurable_props);
    }
    const body = { ...read.body, ...(configured ? { configured_props: configured } : {}) };
    return (await api.call<{ data: Source }>("PUT", `/sources/${id}`, { body })).data;
  };
  return withProgress(io, `updating ${id} from ${basename(file)}${filesNote(read)}`, update());
}

const filesNote = (read: ComponentBody) =>
  "component_files" in read.body ? ` (${Object.keys(read.body.component_files).length} files)` : "";

/** The endpoint of a source's HTTP interface, when it has one. */
export function endpointOf(source: Source): string | undefined {
  for (const value of Object.values(source.configured_props))
    if (value && typeof value === "object" && typeof (value as { endpoint_url?: unknown }).endpoint_url === "string")
      return (value as { endpoint_url: string }).endpoint_url;
  return undefined;
}

/** What a deploy prints: the new source (and its endpoint), or the saved action. */
export function deployedLines(deployed: Deployed): string {
  if (deployed.kind === "action")
    return `Saved action "${deployed.component.name}" as ${deployed.component.id} (an action is a saved component; use it as a workflow step)\n`;
  const endpoint = endpointOf(deployed.source);
  return `Deployed source "${deployed.source.name}" as ${deployed.source.id}\n${endpoint ? `  endpoint: ${endpoint}\n` : ""}`;
}
