import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { availableParallelism, loadavg } from "node:os";
import { appFiles } from "../../test/support/registry-tree.ts";
import { monoMs, sleep } from "../lib/clock.ts";
import { type ProcSample, readTree, totalPss, totalRss } from "../lib/proc.ts";
import type { Row } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { sluiceApi } from "../lib/sluice-api.ts";
import { round } from "../lib/stats.ts";

const MIB = 1024 * 1024;
/**
 * The whole service's memory at most (issue 15): server, sandbox children, esbuild, as PSS (what
 * the machine spends: the Node binary every child maps counts once), as `scale` measures it.
 */
const LIMIT_MIB = 1536;

/** The polling sources of the fixture tree's `tasks` app; each imports `@pipedream/platform` (axios). */
const ENTRIES = [
  "sources/new-task/new-task.mjs",
  "sources/new-completed-task/new-completed-task.mjs",
  "sources/task-updated/task-updated.mjs",
];

const rows = (measured: { rssMiB?: number; pssMiB?: number; crashes?: number } = {}, sources = 50): Row[] => [
  {
    scenario: "footprint",
    figure: `memory (PSS) of server and children, ${sources} registry sources with timers (peak)`,
    measured: measured.pssMiB,
    unit: "MiB",
    target: { kind: "atMost", value: LIMIT_MIB },
  },
  {
    scenario: "footprint",
    figure: `RSS of server and children, ${sources} registry sources with timers (peak; counts the shared Node binary per process)`,
    measured: measured.rssMiB,
    unit: "MiB",
  },
  {
    scenario: "footprint",
    figure: "sandbox crashes (out of memory or other) while the timers ticked",
    measured: measured.crashes,
    unit: "count",
    target: { kind: "equals", value: 0 },
  },
];

/**
 * Source `n` of the fleet: one of the `tasks` app's polling sources, its name and key made its
 * own, so that every source has code (and a bundle) of its own, as 50 different registry
 * components would.
 */
function variant(n: number): { component_files: Record<string, string>; component_entry: string } {
  const entry = ENTRIES[n % ENTRIES.length] as string;
  const files = appFiles("tasks");
  files[entry] = (files[entry] as string)
    .replace(/key: "([^"]+)"/, `key: "$1-${n}"`)
    .replace(/name: "([^"]+)"/, `name: "$1 #${n}"`);
  return { component_files: files, component_entry: entry };
}

/**
 * A tasks API on 127.0.0.1 (`GET /tasks`): a new task every second, the last few of them, every
 * other one completed, so that each run of each source reads a page and emits what is new.
 */
async function startTasksApi(): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  let requests = 0;
  const server: Server = createServer((request, response) => {
    requests += 1;
    const now = Math.floor(Date.now() / 1000);
    const data = [0, 1, 2].map((back) => ({
      id: now - back,
      title: `Task ${now - back}`,
      completed: (now - back) % 2 === 0,
      updated_at: new Date((now - back) * 1000).toISOString(),
    }));
    response.writeHead(request.url?.startsWith("/tasks") ? 200 : 404, { "content-type": "application/json" });
    response.end(JSON.stringify({ data, has_more: false }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const describeTimedOut = (answer: { status: number; json: unknown }) =>
  answer.status === 400 && /loading the component took longer than/.test(JSON.stringify(answer.json));

interface ErrorEvent {
  event?: { error?: { name?: string; message?: string } };
}

export const footprint: Scenario = {
  name: "footprint",
  title: "50 distinct registry-shaped sources (@pipedream/platform inlined) with 2 s timers in one workspace",
  deadlineMs: 420_000,
  quickDeadlineMs: 150_000,
  emptyRows: () => rows(),
  async run(context) {
    const total = context.pick(50, 10);
    const intervalSeconds = 2;
    const tickMs = context.pick(60_000, 15_000);
    const tasks = await startTasksApi();
    context.defer(() => tasks.close());
    // Default settings: the sizes a user gets (heap cap, live-process bound, idle time).
    const server = await context.startServer();
    const api = sluiceApi(server);

    // Sampled from the first deploy on: bundling (esbuild) and describing (a child each) count too.
    const peak = { rss: 0, pss: 0, processes: 0, sandboxes: 0 };
    let last: ProcSample[] = [];
    const record = (tree: ProcSample[]) => {
      if (tree.length === 0) return;
      last = tree;
      peak.rss = Math.max(peak.rss, totalRss(tree));
      peak.pss = Math.max(peak.pss, totalPss(tree));
      peak.processes = Math.max(peak.processes, tree.length);
      peak.sandboxes = Math.max(peak.sandboxes, tree.filter((entry) => entry.role === "sandbox").length);
    };
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        record(await readTree(server.pid, { pss: true }).catch(() => []));
        await sleep(500);
      }
    })();
    const ids: string[] = [];
    let deployMs = 0;
    let slowDescribes = 0;
    let requestsBefore = 0;
    const load: number[][] = [];
    try {
      const started = monoMs();
      for (let n = 0; n < total; n++) {
        const body = { ...variant(n), configured_props: { apiUrl: tasks.url, timer: { intervalSeconds } } };
        let answer = await api.call("POST", "/sources", body);
        // On a loaded machine, describing a 1 MB bundle may outlast its 5 s: a user would try again.
        for (let attempt = 1; attempt < 3 && describeTimedOut(answer); attempt++) {
          slowDescribes += 1;
          answer = await api.call("POST", "/sources", body);
        }
        if (answer.status !== 200) {
          throw new Error(`POST /sources answered ${answer.status}: ${JSON.stringify(answer.json).slice(0, 400)}`);
        }
        ids.push(answer.json.data.id);
      }
      deployMs = monoMs() - started;
      context.log(`${total} sources deployed in ${(deployMs / 1000).toFixed(1)} s; timers tick for ${tickMs / 1000} s`);
      requestsBefore = tasks.requests();
      const until = monoMs() + tickMs;
      while (monoMs() < until) {
        load.push(loadavg());
        await sleep(Math.min(5_000, Math.max(0, until - monoMs())));
      }
    } finally {
      sampling = false;
      await sampler;
    }
    const runs = tasks.requests() - requestsBefore;

    // Every crash of a source's child ends a run with a SandboxCrashError on its `$errors` channel.
    const errors: { name: string; message: string }[] = [];
    for (const id of ids) {
      const page = await api.call("GET", `/sources/${id}/event_summaries?event_name=$errors&expand=event&limit=100`);
      for (const item of (page.json?.data ?? []) as ErrorEvent[]) {
        errors.push({ name: item.event?.error?.name ?? "?", message: item.event?.error?.message ?? "" });
      }
    }
    const crashes = errors.filter(
      (error) => error.name === "SandboxCrashError" || /out of memory/i.test(error.message),
    );
    const outOfMemory = crashes.filter((error) => /out of memory/i.test(error.message)).length;
    const sandboxes = last.filter((entry) => entry.role === "sandbox");
    const mib = (bytes: number) => Math.round(bytes / MIB);
    const averageLoad = load.length ? load.reduce((sum, sample) => sum + (sample[0] ?? 0), 0) / load.length : 0;
    context.log(
      `peak RSS ${mib(peak.rss)} MiB, PSS ${mib(peak.pss)} MiB, ${peak.sandboxes} sandbox children at most; ${runs} timer runs; ${crashes.length} crashes (${outOfMemory} out of memory), ${errors.length} errors; load ${averageLoad.toFixed(1)}`,
    );
    context.note(
      `${total} sources deployed one at a time through the API by \`component_files\` (the fixture tree's \`tasks\` app, test/fixtures/registry-tree/components/tasks/, whose polling sources import \`@pipedream/platform\`; each source's entry renamed so every code and bundle differs) in ${(deployMs / 1000).toFixed(1)} s, each with a ${intervalSeconds} s timer (${slowDescribes} deploys tried again after their describe outlasted its 5 s) polling a tasks API on 127.0.0.1; the timers then ticked for ${tickMs / 1000} s (${runs} API requests, about one per run). Default settings (heap cap, live-process bound, idle time).`,
    );
    context.note(
      `Memory summed over the server and every process below it (/proc), sampled every 500 ms from the first deploy: peak RSS ${mib(peak.rss)} MiB (a page shared by n processes counted n times), peak PSS ${mib(peak.pss)} MiB; ${peak.sandboxes} sandbox children at most. At the end: server RSS ${mib(last[0]?.rssBytes ?? 0)} MiB, ${sandboxes.length} children ${mib(totalRss(sandboxes))} MiB RSS, ${mib(totalPss(sandboxes))} MiB PSS (${sandboxes.length ? mib(totalRss(sandboxes) / sandboxes.length) : 0} MiB RSS each). Errors on the sources' $errors channels: ${errors.length}, of which ${crashes.length} sandbox crashes (${outOfMemory} out of memory). Load average (1 min) while the timers ticked: ${averageLoad.toFixed(1)} on ${availableParallelism()} cores.`,
    );
    return {
      rows: rows({ rssMiB: peak.rss / MIB, pssMiB: peak.pss / MIB, crashes: crashes.length }, total),
      details: {
        sources: total,
        intervalSeconds,
        tickMs,
        deployMs: round(deployMs),
        slowDescribes,
        timerRuns: runs,
        rssMiB: { peak: round(peak.rss / MIB), end: round(totalRss(last) / MIB) },
        pssMiB: { peak: round(peak.pss / MIB), end: round(totalPss(last) / MIB) },
        peakProcesses: peak.processes,
        peakSandboxes: peak.sandboxes,
        errors: errors.length,
        crashes: crashes.length,
        outOfMemory,
        firstErrors: errors.slice(0, 5),
        loadAverage: round(averageLoad),
        processes: last.map((entry) => ({
          pid: entry.pid,
          role: entry.role,
          rssMiB: round(entry.rssBytes / MIB),
          pssMiB: round((entry.pssBytes ?? 0) / MIB),
        })),
      },
    };
  },
};
