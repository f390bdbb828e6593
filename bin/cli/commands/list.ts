import { CLIENT_OPTIONS, CLIENT_OPTIONS_HELP } from "../args.ts";
import type { ApiClient, Component, Source, Subscription, Webhook, Workflow } from "../client.ts";
import type { Command } from "../command.ts";
import { endpointOf } from "../deploying.ts";
import { UsageError } from "../errors.ts";
import { isoTime, printJson, printTable } from "../output.ts";
import { connect } from "../session.ts";

interface Listing {
  fetch(api: ApiClient): Promise<unknown[]>;
  headers: string[];
  row(item: never): string[];
}

interface DataStore {
  id: string;
  name: string;
  workspace_id: string;
  created_at: string;
}

/** Data stores belong to workspaces: the stores of each of your workspaces (`/users/me` names them). */
async function dataStoresOfWorkspaces(api: ApiClient): Promise<DataStore[]> {
  const me = await api.call<{ data: { orgs: { id: string }[] } }>("GET", "/users/me");
  const lists = await Promise.all(
    me.data.orgs.map(
      async (org) => (await api.call<{ data: DataStore[] }>("GET", `/workspaces/${org.id}/data_stores`)).data,
    ),
  );
  return lists.flat();
}

/**
 * The API lists no saved components (spec: only POST and GET by id), so `list components` shows
 * the components behind your sources, each once (decision 317).
 */
async function componentsOfSources(api: ApiClient): Promise<Component[]> {
  const sources = await api.all<Source>("/users/me/sources");
  const ids = [...new Set(sources.map((source) => source.component_id))];
  return Promise.all(ids.map(async (id) => (await api.call<{ data: Component }>("GET", `/components/${id}`)).data));
}

const LISTINGS: Record<string, Listing> = {
  sources: {
    fetch: (api) => api.all<Source>("/users/me/sources"),
    headers: ["ID", "NAME", "ACTIVE", "CREATED", "ENDPOINT"],
    row: (source: Source) => [
      source.id,
      source.name,
      String(source.active),
      isoTime(source.created_at),
      endpointOf(source) ?? "",
    ],
  },
  components: {
    fetch: componentsOfSources,
    headers: ["ID", "NAME", "VERSION", "TYPE", "KEY"],
    row: (component: Component) => [
      component.id,
      component.name,
      component.version,
      component.type ?? "source",
      component.key ?? "",
    ],
  },
  webhooks: {
    fetch: (api) => api.all<Webhook>("/users/me/webhooks"),
    headers: ["ID", "URL", "NAME", "CREATED"],
    row: (webhook: Webhook) => [webhook.id, webhook.url, webhook.name ?? "", isoTime(webhook.created_at)],
  },
  subscriptions: {
    // Paged: without paging parameters the API answers at most 1,000 at once (a 400 past them).
    fetch: (api) => api.all<Subscription>("/users/me/subscriptions"),
    headers: ["ID", "EMITTER", "CHANNEL", "LISTENER", "CREATED"],
    row: (sub: Subscription) => [
      sub.id,
      sub.emitter_id,
      sub.event_name || "(default)",
      sub.listener_id,
      isoTime(sub.created_at),
    ],
  },
  "data-stores": {
    fetch: dataStoresOfWorkspaces,
    headers: ["ID", "NAME", "WORKSPACE", "CREATED"],
    row: (store: DataStore) => [store.id, store.name, store.workspace_id, store.created_at],
  },
  workflows: {
    fetch: (api) => api.all<Workflow>("/users/me/workflows"),
    headers: ["ID", "NAME", "ACTIVE", "STEPS", "CREATED"],
    row: (workflow: Workflow) => [
      workflow.id,
      workflow.name,
      String(workflow.active),
      String(workflow.steps.length),
      isoTime(workflow.created_at),
    ],
  },
};

const KINDS = Object.keys(LISTINGS).join("|");

export const list: Command = {
  name: "list",
  summary: `list your ${Object.keys(LISTINGS).join(", ")}`,
  usage: `Usage: sluice list ${KINDS}

Lists what your API key owns, newest first, every page of it. "components" lists the components
your sources run (the API has no list of saved components); "data-stores" lists the data stores
of every workspace you belong to (see \`sluice records\` for what one holds).

${CLIENT_OPTIONS_HELP.replace("print JSON", "print a JSON array")}`,
  options: { ...CLIENT_OPTIONS },
  positionals: { min: 1, max: 1 },
  async run(values, [kind = ""], io) {
    const listing = LISTINGS[kind];
    if (listing === undefined)
      throw new UsageError(`list: ${JSON.stringify(kind)} is not a kind of resource; one of ${KINDS}`);
    const items = await listing.fetch(await connect(values, io));
    if (values.json) printJson(io, items);
    else
      printTable(
        io,
        listing.headers,
        items.map((item) => listing.row(item as never)),
      );
  },
};
