import { CLIENT_OPTIONS, CLIENT_OPTIONS_HELP } from "../args.ts";
import type { ApiClient, EventSummary, Page, WorkflowRun } from "../client.ts";
import type { Command, Io, Values } from "../command.ts";
import { UsageError } from "../errors.ts";
import { isIdOf } from "../ids.ts";
import { isoTime, printJson, printText } from "../output.ts";
import { connect } from "../session.ts";

/** Most events `-n` asks for (the API pages 100 at a time; this many is ten pages). */
const MAX_COUNT = 1_000;
const DEFAULT_COUNT = 10;

/** Event ids (`<epoch ms>-<n>`) in the order they were emitted. */
export function compareEventIds(a: string, b: string): number {
  const [msA = 0, nA = 0] = a.split("-").map(Number);
  const [msB = 0, nB = 0] = b.split("-").map(Number);
  return msA - msB || nA - nB;
}

function countOf(values: Values): number {
  const text = (values.n as string | undefined) ?? String(DEFAULT_COUNT);
  const count = Number(text);
  if (!/^\d+$/.test(text) || count > MAX_COUNT)
    throw new UsageError(`-n must be a whole number from 0 to ${MAX_COUNT}`);
  return count;
}

/** The newest `count` events of a channel (or of every channel but `$logs` and `$errors`), oldest first. */
async function newest(api: ApiClient, path: string, count: number, channel?: string): Promise<EventSummary[]> {
  const events: EventSummary[] = [];
  let after: string | undefined;
  while (events.length < count) {
    const page = await api.call<Page<EventSummary>>("GET", path, {
      query: { limit: Math.min(100, count - events.length), expand: "event", event_name: channel, after },
    });
    events.push(...page.data);
    after = page.page_info.end_cursor ?? undefined;
    if (page.data.length === 0 || after === undefined) break;
  }
  return events.reverse();
}

const parseMessage = (data: string) => JSON.parse(data) as EventSummary;

/** Follows `channels` of source `id` on the live stream until Ctrl-C, each after its newest event shown. */
async function followSource(
  api: ApiClient,
  io: Io,
  id: string,
  channels: { name: string | undefined; after: string | undefined }[],
  print: (event: EventSummary) => void,
): Promise<void> {
  await Promise.all(
    channels.map((channel) =>
      api.follow(
        `/sources/${id}/sse`,
        { event_name: channel.name },
        { after: channel.after, signal: io.signal },
        (message) => print(parseMessage(message.data)),
      ),
    ),
  );
}

function channelOf(event: EventSummary): string {
  return event.metadata.name || "default";
}

export const events: Command = {
  name: "events",
  summary: "show a source's (or workflow's) newest events; -f follows them live",
  usage: `Usage: sluice events <source or workflow id> [-n <count>] [-f] [--channel <name>]

Prints the newest events, oldest first, one a line: time, channel, the event as JSON. Without
--channel every channel but $logs and $errors (see \`sluice logs\`).

  -n <count>          how many of the newest (default ${DEFAULT_COUNT}, at most ${MAX_COUNT}; 0: none, with -f only what comes)
  -f, --follow        then follow the live stream (a source's) until Ctrl-C
  --channel <name>    one channel only (default for the default channel)
  --json              print each event as one line of JSON (an event summary with its full event)
${CLIENT_OPTIONS_HELP.split("\n")[1]}`,
  options: {
    ...CLIENT_OPTIONS,
    n: { type: "string", short: "n" },
    follow: { type: "boolean", short: "f" },
    channel: { type: "string" },
  },
  positionals: { min: 1, max: 1 },
  async run(values, [id = ""], io) {
    const count = countOf(values);
    const channel = values.channel as string | undefined;
    const isWorkflow = isIdOf(id, "p_");
    if (!isIdOf(id, "dc_") && !isWorkflow)
      throw new UsageError(`events: ${JSON.stringify(id)} is not a source (dc_) or workflow (p_) id`);
    if (isWorkflow && (values.follow || channel !== undefined))
      throw new UsageError("events: -f and --channel take a source (dc_); a workflow's events are listed only");
    const api = await connect(values, io);
    const print = (event: EventSummary) =>
      values.json
        ? printJson(io, event)
        : printText(io, `${isoTime(event.indexed_at_ms)}  ${channelOf(event)}  ${JSON.stringify(event.event)}\n`);
    const path = isWorkflow ? `/workflows/${id}/event_summaries` : `/sources/${id}/event_summaries`;
    const shown = await newest(api, path, count, channel);
    for (const event of shown) print(event);
    if (values.follow)
      await followSource(api, io, id, [{ name: channel, after: shown.at(-1)?.id }], (event) => print(event));
  },
};

interface LogEvent {
  ts?: number;
  level?: string;
  message?: string;
}
interface ErrorEvent {
  error?: { code?: string; message?: string; stack?: string; cellId?: string };
}

/** A `$logs` or `$errors` event as text: time, level, message; an error's stack below it, indented. */
export function logLine(event: EventSummary): string {
  const time = isoTime(event.indexed_at_ms);
  if (event.metadata.name === "$errors") {
    const { error = {} } = event.event as ErrorEvent;
    const stack = (error.stack ?? "")
      .split("\n")
      .slice(1)
      .map((line) => `    ${line.trim()}`);
    const where = error.cellId ? ` (in ${error.cellId})` : "";
    return [`${time}  ERROR  ${error.code ?? "Error"}: ${error.message ?? ""}${where}`, ...stack].join("\n");
  }
  const log = event.event as LogEvent;
  return `${time}  ${(log.level ?? "log").padEnd(5)}  ${log.message ?? JSON.stringify(event.event)}`;
}

/** Why a paused run was cancelled, as `sluice logs` says it. */
const CANCEL_REASONS = {
  cancel_url: "by its cancel URL",
  timeout: "its suspension timed out",
  inactive: "its workflow was made inactive",
} as const;

/** What a run's line adds about a pause: where and until when it paused, what it went on from, why it was cancelled. */
function pauseNote(run: WorkflowRun, step: (id: string) => string): string {
  const parts: string[] = [];
  if (run.resumed_from) parts.push(`resumed from ${run.resumed_from}`);
  if (run.pause)
    parts.push(`by $.flow.${run.pause.kind} in ${step(run.pause.step_id)} until ${isoTime(run.pause.until_ms)}`);
  if (run.cancel_reason) parts.push(CANCEL_REASONS[run.cancel_reason]);
  return parts.length > 0 ? `  (${parts.join("; ")})` : "";
}

/** A workflow run as text: a line for the run, one per log line (with its step), one for its error. */
export function runLines(run: WorkflowRun): string {
  const took = run.duration_ms === null ? "" : ` in ${run.duration_ms} ms`;
  // Logs and errors name a step by its id (c_); people know it by its namespace.
  const steps = new Map(run.steps.map((step) => [step.id, step.namespace]));
  const step = (id: string) => steps.get(id) ?? id;
  const lines = [`${isoTime(run.started_at_ms)}  run ${run.id}  ${run.status}${took}${pauseNote(run, step)}`];
  for (const log of run.logs)
    lines.push(`${isoTime(log.ts)}  ${log.level.padEnd(5)}  [${step(log.step)}] ${log.message}`);
  if (run.error) {
    const { code, message, cell_id } = run.error;
    lines.push(`${isoTime(run.ended_at_ms ?? run.started_at_ms)}  ERROR  ${code}: ${message} (in ${step(cell_id)})`);
  }
  return lines.join("\n");
}

/** Most runs `logs <p_id>` shows: one page of the runs route. */
const MAX_RUNS = 100;

export const logs: Command = {
  name: "logs",
  summary: "show a source's console output and errors ($logs, $errors); -f follows them",
  usage: `Usage: sluice logs <source or workflow id> [-n <count>] [-f]

For a source (dc_): prints what its runs and hooks printed (its $logs channel: console.log, warn,
error...) and the errors they threw (its $errors channel, with the stack), oldest first.
For a workflow (p_): its newest runs (-n of them, at most ${MAX_RUNS}), oldest first, each with its
status, its log lines by step and its error; -f does not apply.

  -n <count>      how many of the newest, of both together (default ${DEFAULT_COUNT}, at most ${MAX_COUNT})
  -f, --follow    then follow both live until Ctrl-C
  --json          print each as one line of JSON (the event summary)
${CLIENT_OPTIONS_HELP.split("\n")[1]}`,
  options: { ...CLIENT_OPTIONS, n: { type: "string", short: "n" }, follow: { type: "boolean", short: "f" } },
  positionals: { min: 1, max: 1 },
  async run(values, [id = ""], io) {
    const count = countOf(values);
    if (isIdOf(id, "p_")) return workflowLogs(values, id, count, io);
    if (!isIdOf(id, "dc_"))
      throw new UsageError(`logs: ${JSON.stringify(id)} is not a source (dc_) or workflow (p_) id`);
    const api = await connect(values, io);
    const print = (event: EventSummary) => (values.json ? printJson(io, event) : printText(io, `${logLine(event)}\n`));
    const path = `/sources/${id}/event_summaries`;
    const [logged, errors] = await Promise.all([
      newest(api, path, count, "$logs"),
      newest(api, path, count, "$errors"),
    ]);
    // Each channel gave its newest `count`; of both together, the newest `count` (none for 0).
    const shown = [...logged, ...errors].sort((a, b) => compareEventIds(a.id, b.id)).slice(-count);
    for (const event of shown) print(event);
    if (values.follow)
      await followSource(
        api,
        io,
        id,
        [
          { name: "$logs", after: logged.at(-1)?.id },
          { name: "$errors", after: errors.at(-1)?.id },
        ],
        print,
      );
  },
};

async function workflowLogs(values: Values, id: string, count: number, io: Io): Promise<void> {
  if (values.follow) throw new UsageError("logs: -f takes a source (dc_); a workflow's runs are listed only");
  if (count > MAX_RUNS) throw new UsageError(`logs: -n is at most ${MAX_RUNS} for a workflow`);
  if (count === 0) return;
  const api = await connect(values, io);
  const page = await api.call<Page<WorkflowRun>>("GET", `/workflows/${id}/runs`, { query: { limit: count } });
  for (const run of page.data.reverse()) {
    if (values.json) printJson(io, run);
    else printText(io, `${runLines(run)}\n`);
  }
}
