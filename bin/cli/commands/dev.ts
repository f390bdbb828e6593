import { type FSWatcher, watch } from "node:fs";
import { basename, dirname } from "node:path";
import { ACTION_STEP, type ActionDev, startActionDev } from "../action-dev.ts";
import { CLIENT_OPTIONS, CLIENT_OPTIONS_HELP, propAssignments } from "../args.ts";
import type { ApiClient, EventSummary } from "../client.ts";
import type { Command, Io } from "../command.ts";
import { readComponent } from "../component-files.ts";
import { deployedLines, deployFile, updateFile } from "../deploying.ts";
import { CliError, UsageError } from "../errors.ts";
import { isoTime, printJson, printText } from "../output.ts";
import { connect } from "../session.ts";
import { logLine } from "./events.ts";

/** Editors write a file in several steps (truncate, write, rename): one redeploy after they settle. */
const SETTLE_MS = 200;

/**
 * Watches the folders of `files` (not the files: an editor that saves by renaming a new file over
 * the old one would end a watch on the file) and calls `changed` when one of `files` changes.
 */
function watchFiles(files: () => ReadonlySet<string>, changed: () => void): { close(): void; refresh(): void } {
  const watchers = new Map<string, FSWatcher>();
  let timer: NodeJS.Timeout | undefined;
  const refresh = () => {
    const dirs = new Set([...files()].map((file) => dirname(file)));
    for (const [dir, watcher] of watchers)
      if (!dirs.has(dir)) {
        watcher.close();
        watchers.delete(dir);
      }
    for (const dir of dirs)
      if (!watchers.has(dir))
        watchers.set(
          dir,
          watch(dir, (_event, name) => {
            if (name !== null && !files().has(`${dir}/${name}`)) return;
            clearTimeout(timer);
            timer = setTimeout(changed, SETTLE_MS);
          }),
        );
  };
  refresh();
  return {
    close() {
      clearTimeout(timer);
      for (const watcher of watchers.values()) watcher.close();
    },
    refresh,
  };
}

/** The trigger event of an action's runs: `--event` as JSON, `{}` without it. */
function eventOption(text: string | undefined): unknown {
  if (text === undefined) return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`dev: --event must be JSON (such as '{"name":"Ada"}'), got ${text}`);
  }
}

/** Streams the source's events, logs and errors as they come, until `signal` aborts. */
function streamAll(api: ApiClient, io: Io, id: string, json: boolean, signal: AbortSignal): Promise<unknown> {
  const print = (event: EventSummary) => {
    if (json) return printJson(io, event);
    const name = event.metadata.name;
    if (name === "$logs" || name === "$errors") return printText(io, `${logLine(event)}\n`);
    printText(io, `${isoTime(event.indexed_at_ms)}  event ${name || "default"}  ${JSON.stringify(event.event)}\n`);
  };
  return Promise.all(
    [undefined, "$logs", "$errors"].map((channel) =>
      api
        .follow(`/sources/${id}/sse`, { event_name: channel }, { signal }, (message) => print(JSON.parse(message.data)))
        .catch((error: Error) => io.err.write(`sluice: following ${channel ?? "events"}: ${error.message}\n`)),
    ),
  );
}

export const dev: Command = {
  name: "dev",
  summary:
    "deploy a file, redeploy it on every save (same source id and props), stream its logs and events; an action runs on every save",
  usage: `Usage: sluice dev <file> [--prop <name>=<value> ...] [--name <name>] [--delete-on-exit] [--event <json>]

Deploys <file> as a source (as \`sluice deploy\` does), then watches it and every file it imports:
on each save it puts the new code on the same source (\`sluice update\`), which keeps its id, its
endpoint and its configured props. Meanwhile it prints the source's events, logs and errors as
they come. A save whose code does not load prints the error and keeps the source as it was.

Ctrl-C stops it. The source is left deployed (its endpoint keeps answering, its timer keeps
ticking), and the last line says how to delete it; with --delete-on-exit it is deleted instead.

An action (\`type: "action"\`) is saved, then run as the step of a workflow made for the session:
once at the start and after every save, with the --event JSON as the trigger's event
(\`steps.trigger.event.body\`; default {}). Each run prints its status, the return value, the
exports, the $summary, the logs and the error. Ctrl-C deletes that workflow; the action stays saved.

  --prop <name>=<value>  a configured prop, as for \`sluice deploy\` (kept across redeploys)
  --name <name>          the source's (or the session workflow's) name
  --root <dir>           the folder tree the component's files are read from (see \`sluice deploy --help\`)
  --delete-on-exit       delete the source on Ctrl-C
  --event <json>         an action's trigger event body (default {})
${CLIENT_OPTIONS_HELP.replace("print JSON for scripts instead of text", "print each event, log, error or run as one line of JSON")}`,
  options: {
    ...CLIENT_OPTIONS,
    prop: { type: "string", multiple: true },
    name: { type: "string" },
    root: { type: "string" },
    "delete-on-exit": { type: "boolean" },
    event: { type: "string" },
  },
  positionals: { min: 1, max: 1 },
  async run(values, [file = ""], io) {
    const props = propAssignments((values.prop as string[] | undefined) ?? []);
    const root = values.root as string | undefined;
    const event = eventOption(values.event as string | undefined);
    const api = await connect(values, io);
    const deployed = await deployFile(api, io, file, { props, name: values.name as string | undefined, root });
    const json = values.json === true;
    /** A run that cannot happen (its endpoint unreachable) is said; the session goes on. */
    const runAction = (session: ActionDev) =>
      session.run().catch((error: unknown) => {
        if (!(error instanceof CliError)) throw error;
        io.err.write(`sluice: ${error.message}\n`);
      });
    let action: ActionDev | undefined;
    let id: string;
    if (deployed.kind === "action") {
      action = await startActionDev(api, io, file, deployed.component, {
        props,
        event,
        json,
        name: values.name as string | undefined,
      });
      id = action.workflow.id;
      io.err.write(
        `Saved action "${deployed.component.name}" as ${deployed.component.id}; it runs as step "${ACTION_STEP}" of workflow ${id}, once now and after every save\n`,
      );
    } else {
      id = deployed.source.id;
      io.err.write(deployedLines(deployed));
    }
    const what = action ? "the action" : "the source";

    // What was deployed: a save from here on differs from it, even one made before the watch began.
    let read = deployed.read;
    const watched = () => new Set(read.read);
    let running: Promise<void> | undefined;
    let again = false;
    const redeploy = async (): Promise<void> => {
      try {
        const next = await readComponent(file, { root });
        if (JSON.stringify(next.body) === JSON.stringify(read.body)) return;
        if (action) await action.update(next);
        else await updateFile(api, io, id, file, { props: {}, read: next });
        read = next;
        stop.refresh();
        io.err.write(`Redeployed ${basename(file)} to ${id}\n`);
      } catch (error) {
        if (!(error instanceof CliError)) throw error;
        io.err.write(`sluice: ${error.message}\n(${what} keeps its last code; fix the file and save again)\n`);
        return;
      }
      // After the new code is on the step: a run that fails says so, not that the code was kept.
      if (action) await runAction(action);
    };
    /** Runs `task` as the one thing under way; a save meanwhile redeploys once it is done. */
    const runAlone = (task: () => Promise<void>) => {
      running = task().finally(() => {
        running = undefined;
        if (again) {
          again = false;
          changed();
        }
      });
    };
    const changed = () => {
      if (running) {
        again = true;
        return;
      }
      runAlone(redeploy);
    };
    // Watching before the action's first run: a save while it runs is redeployed after it, not missed.
    const stop = watchFiles(watched, changed);
    io.err.write(`Watching ${read.read.length} file(s) for changes; Ctrl-C to stop\n`);
    if (action) {
      const first = action;
      runAlone(() => runAction(first));
    }

    const streams = action ? Promise.resolve() : streamAll(api, io, id, json, io.signal);
    await new Promise<void>((resolve) => {
      if (io.signal.aborted) resolve();
      io.signal.addEventListener("abort", () => resolve(), { once: true });
    });
    stop.close();
    await running;
    await streams;
    if (action) {
      await action.close();
      io.err.write(`Deleted the session's workflow ${id}; the action stays saved as ${deployed.component.id}\n`);
    } else if (values["delete-on-exit"]) {
      await api.call("DELETE", `/sources/${id}`);
      io.err.write(`Deleted source ${id}\n`);
    } else io.err.write(`Left source ${id} deployed; delete it with: sluice delete ${id}\n`);
  },
};
