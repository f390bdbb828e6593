import { CLIENT_OPTIONS, CLIENT_OPTIONS_HELP } from "../args.ts";
import type { ApiClient, Subscription } from "../client.ts";
import { ApiError } from "../client.ts";
import type { Command } from "../command.ts";
import { UsageError } from "../errors.ts";
import { isIdOf } from "../ids.ts";
import { printJson, printText } from "../output.ts";
import { connect } from "../session.ts";

/** The API deletes a subscription by what created it, not by its id: find it, then delete by those. */
async function deleteSubscription(api: ApiClient, id: string): Promise<unknown> {
  // Paged: without paging parameters the API answers at most 1,000 subscriptions at once.
  const found = (await api.all<Subscription>("/users/me/subscriptions")).find((sub) => sub.id === id);
  if (found === undefined) throw new ApiError(404, `subscription ${id} not found (404)`);
  const { emitter_id, listener_id, event_name } = found;
  await api.call("DELETE", "/subscriptions", { query: { emitter_id, listener_id, event_name } });
  return { id, deleted: true };
}

/** The route that deletes each kind of resource, by the prefix of its id. */
const DELETERS: Record<string, { what: string; remove(api: ApiClient, id: string): Promise<unknown> }> = {
  dc_: {
    what: "source",
    remove: async (api, id) => (await api.call<{ data: unknown }>("DELETE", `/sources/${id}`)).data,
  },
  p_: {
    what: "workflow",
    remove: async (api, id) => (await api.call<{ data: unknown }>("DELETE", `/workflows/${id}`)).data,
  },
  wh_: {
    what: "webhook",
    remove: async (api, id) => (await api.call<{ data: unknown }>("DELETE", `/webhooks/${id}`)).data,
  },
  sub_: { what: "subscription", remove: deleteSubscription },
  ds_: {
    what: "data store",
    remove: async (api, id) => (await api.call<{ data: unknown }>("DELETE", `/data_stores/${id}`)).data,
  },
};

export const remove: Command = {
  name: "delete",
  summary: "delete a source (dc_), workflow (p_), webhook (wh_), subscription (sub_) or data store (ds_)",
  usage: `Usage: sluice delete <id>

Deletes what the id names, by its prefix:
  dc_    a source: its deactivate() hook runs; its timer, events and endpoint go
  p_     a workflow: its runs, events and endpoints go
  wh_    a webhook, with its subscriptions
  sub_   a subscription
  ds_    a data store, with all its records (a component whose prop names it by id fails then)
Saved components (sc_) cannot be deleted: the API has no route for it.

${CLIENT_OPTIONS_HELP}`,
  options: { ...CLIENT_OPTIONS },
  positionals: { min: 1, max: 1 },
  async run(values, [id = ""], io) {
    const prefix = Object.keys(DELETERS).find((known) => isIdOf(id, known));
    if (prefix === undefined)
      throw new UsageError(
        `delete: ${JSON.stringify(id)} is not an id that can be deleted (${Object.keys(DELETERS).join(", ")}...)`,
      );
    const deleter = DELETERS[prefix] as (typeof DELETERS)[string];
    const deleted = await deleter.remove(await connect(values, io), id);
    if (values.json) printJson(io, deleted);
    else printText(io, `Deleted ${deleter.what} ${id}\n`);
  },
};
