import { sleep } from "../lib/clock.ts";
import { loadDetails, numberedBody, perSec, referenceLoad, warmUp } from "../lib/common.ts";
import { buildFleet } from "../lib/fleet.ts";
import { type IngestMeasurement, measureIngest } from "../lib/ingest-rate.ts";
import { readTree, totalPss, totalRss } from "../lib/proc.ts";
import type { Row } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { sluiceApi } from "../lib/sluice-api.ts";
import { round } from "../lib/stats.ts";

const MIB = 1024 * 1024;

interface Memory {
  /** Peak sums over the tree, in MiB. */
  pssMiB?: number;
  rssMiB?: number;
}

const rows = (memory: Memory = {}, share?: number, single?: number, spread?: number, sources = 1000): Row[] => [
  {
    scenario: "scale",
    figure: `memory (PSS) of server and children, ${sources.toLocaleString("en-US")} sources (peak)`,
    measured: memory.pssMiB,
    unit: "MiB",
    target: { kind: "atMost", value: 1536 },
  },
  {
    scenario: "scale",
    figure: `RSS of server and children, ${sources.toLocaleString("en-US")} sources (peak; counts shared pages per process)`,
    measured: memory.rssMiB,
    unit: "MiB",
  },
  {
    scenario: "scale",
    figure: "throughput over 100 sources vs one source",
    measured: share,
    unit: "%",
    target: { kind: "atLeast", value: 70 },
    ...(single === undefined || spread === undefined ? {} : { reference: `${perSec(spread)} vs ${perSec(single)}` }),
  },
];

const ingestDetails = (result: IngestMeasurement) => ({
  rate: round(result.rate),
  stored: result.stored,
  storedSeconds: round(result.storedSeconds),
  lost: result.lost,
  complete: result.complete,
  load: loadDetails(result.load),
});

export const scale: Scenario = {
  name: "scale",
  title: "1,000 deployed HTTP sources, traffic spread over 100 of them (concurrency 50)",
  deadlineMs: 180_000,
  quickDeadlineMs: 60_000,
  emptyRows: () => rows(),
  async run(context) {
    const total = context.pick(1000, 100);
    const busy = context.pick(100, 10);
    const durationMs = context.pick(8_000, 1_500);
    const reference = await referenceLoad(context, {
      concurrency: 50,
      durationMs: context.pick(4_000, 1_000),
      body: numberedBody,
    });

    const fleet = await buildFleet(context, { sources: total, eventsPerSource: 0 });
    context.log(`${total} sources ready in ${(fleet.seedMs / 1000).toFixed(1)} s`);
    const { server } = fleet;
    const api = sluiceApi(server);
    const targets = fleet.sources.slice(0, busy);
    for (const source of targets) await warmUp(source.endpoint, numberedBody, 1);
    await measureIngest(context, server, api, targets, {
      concurrency: 50,
      durationMs: context.pick(2_000, 300),
      warmUp: true,
    });
    const idleTree = await readTree(server.pid, { pss: true });
    const idle = { pss: totalPss(idleTree), rss: totalRss(idleTree), processes: idleTree.length };

    const peak = { ...idle };
    const record = (tree: Awaited<ReturnType<typeof readTree>>) => {
      peak.pss = Math.max(peak.pss, totalPss(tree));
      peak.rss = Math.max(peak.rss, totalRss(tree));
      peak.processes = Math.max(peak.processes, tree.length);
    };
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        record(await readTree(server.pid, { pss: true }).catch(() => []));
        await sleep(250);
      }
    })();
    let single: IngestMeasurement;
    let spread: IngestMeasurement;
    try {
      single = await measureIngest(context, server, api, targets.slice(0, 1), { concurrency: 50, durationMs });
      spread = await measureIngest(context, server, api, targets, { concurrency: 50, durationMs });
    } finally {
      sampling = false;
      await sampler;
    }
    const finalTree = await readTree(server.pid, { pss: true });
    record(finalTree);
    const share = (spread.rate / single.rate) * 100;
    const sandboxes = finalTree.filter((entry) => entry.role === "sandbox");
    const mib = (bytes: number) => Math.round(bytes / MIB);
    context.log(
      `single ${perSec(single.rate)}, spread ${perSec(spread.rate)}, peak PSS ${mib(peak.pss)} MiB, RSS ${mib(peak.rss)} MiB, ${peak.processes} processes`,
    );
    context.note(
      `The fleet: one source deployed through the API, ${total - 1} copies written through the SQLite adapters before the measured server started (bench/lib/fleet.ts; ${(fleet.seedMs / 1000).toFixed(1)} s). Traffic goes round robin over ${busy} of them, after a 2 s warm-up over the same ${busy}; the single-source phase runs first.`,
    );
    context.note(
      `Memory summed over the server and every process below it (/proc), sampled every 250 ms: PSS (smaps_rollup; a page shared by n processes counts 1/n in each, so the Node binary every sandbox child maps counts once) ${mib(idle.pss)} MiB after the warm-up with ${total} sources and ${idle.processes} processes, ${mib(peak.pss)} MiB peak under load (${peak.processes} processes at most); RSS ${mib(idle.rss)} and ${mib(peak.rss)} MiB. At the end: server PSS ${mib(finalTree[0]?.pssBytes ?? 0)} MiB, ${sandboxes.length} sandbox children ${mib(totalPss(sandboxes))} MiB PSS (${mib(totalRss(sandboxes))} MiB RSS). Bare server rate in this run: ${perSec(reference.okPerSec)}.`,
    );
    return {
      rows: rows({ pssMiB: peak.pss / MIB, rssMiB: peak.rss / MIB }, share, single.rate, spread.rate, total),
      details: {
        sources: total,
        busySources: busy,
        seedMs: round(fleet.seedMs),
        pssMiB: { afterWarmUp: round(idle.pss / MIB), peak: round(peak.pss / MIB) },
        rssMiB: { afterWarmUp: round(idle.rss / MIB), peak: round(peak.rss / MIB) },
        peakProcesses: peak.processes,
        processes: finalTree.map((entry) => ({
          pid: entry.pid,
          role: entry.role,
          pssMiB: round((entry.pssBytes ?? 0) / MIB),
          rssMiB: round(entry.rssBytes / MIB),
        })),
        single: ingestDetails(single),
        spread: ingestDetails(spread),
        reference: loadDetails(reference),
      },
    };
  },
};
