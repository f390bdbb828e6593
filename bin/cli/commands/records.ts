import { CLIENT_OPTIONS, CLIENT_OPTIONS_HELP } from "../args.ts";
import type { Command } from "../command.ts";
import { UsageError } from "../errors.ts";
import { isIdOf } from "../ids.ts";
import { printJson, printTable, printText } from "../output.ts";
import { connect } from "../session.ts";

interface DataStoreRecord {
  key: string;
  value: unknown;
  expires_at: string | null;
}

/** `sluice records <ds_id>`: what a data store holds, or `--clear` to empty it (docs/data-stores.md). */
export const records: Command = {
  name: "records",
  summary: "print the records of a data store (ds_), or empty it with --clear",
  usage: `Usage: sluice records <ds_id> [--clear]

Prints every live record of the data store, in key order: its key, its value as JSON and when it
expires. \`sluice list data-stores\` lists your stores.

Options:
  --clear        delete every record of the store instead (the store itself stays)
${CLIENT_OPTIONS_HELP}`,
  options: { ...CLIENT_OPTIONS, clear: { type: "boolean" } },
  positionals: { min: 1, max: 1 },
  async run(values, [id = ""], io) {
    if (!isIdOf(id, "ds_")) throw new UsageError(`records: ${JSON.stringify(id)} is not a data store id (ds_...)`);
    const api = await connect(values, io);
    if (values.clear) {
      const cleared = (await api.call<{ data: unknown }>("DELETE", `/data_stores/${id}/records`)).data;
      if (values.json) printJson(io, cleared);
      else printText(io, `Cleared data store ${id}\n`);
      return;
    }
    const found = await api.all<DataStoreRecord>(`/data_stores/${id}/records`);
    if (values.json) printJson(io, found);
    else
      printTable(
        io,
        ["KEY", "VALUE", "EXPIRES"],
        found.map((record) => [record.key, JSON.stringify(record.value), record.expires_at ?? ""]),
      );
  },
};
