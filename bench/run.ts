/**
 * `npm run bench`: every scenario of issue 6 against freshly started local mode, each next to a
 * bare Node.js reference server in the same run. Writes bench/results/latest.{md,json} and a
 * dated copy, then prints the table. See docs/benchmarks.md.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../test/support/local-process.ts";
import { parseArgs, USAGE } from "./lib/args.ts";
import { monoMs } from "./lib/clock.ts";
import { terminateAll } from "./lib/processes.ts";
import {
  allRows,
  formatCpuShares,
  isMet,
  type RunReport,
  renderConsoleTable,
  renderProfile,
  renderReport,
} from "./lib/report.ts";
import { runScenario, selectScenarios } from "./lib/scenario.ts";
import { SCENARIOS } from "./scenarios/index.ts";

const names = SCENARIOS.map((scenario) => scenario.name);
let args: ReturnType<typeof parseArgs>;
try {
  args = parseArgs(process.argv.slice(2), names);
} catch (error) {
  process.stderr.write(`${(error as Error).message}\n\n${USAGE}`);
  process.exit(2);
}
if (args.help) {
  const optIn = SCENARIOS.filter((scenario) => scenario.optIn !== undefined);
  process.stdout.write(
    `${USAGE}\nScenarios: ${names.join(", ")}\n${optIn.map((scenario) => `Only with --only: ${scenario.name} (${scenario.optIn})\n`).join("")}`,
  );
  process.exit(0);
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    const stopped = terminateAll();
    process.stderr.write(`\ninterrupted: sent SIGTERM to ${stopped} child process(es)\n`);
    setTimeout(() => process.exit(130), 1000).unref();
  });
}

const resultsDir = args.out ?? join(REPO_ROOT, "bench", "results");
const selected = selectScenarios(SCENARIOS, args.only);
const log = (line: string) => process.stderr.write(`${line}\n`);
const startedAt = new Date();
const started = monoMs();
const cpuList = cpus();
const report: RunReport = {
  startedAt: startedAt.toISOString(),
  elapsedMs: 0,
  options: { quick: args.quick, profile: args.profile, only: args.only },
  machine: {
    cpus: cpuList.length,
    cpuModel: cpuList[0]?.model.trim() ?? "unknown",
    node: process.version,
    memoryMiB: Math.round(totalmem() / 1024 / 1024),
    loadAverage: loadavg(),
  },
  scenarios: [],
};

log(
  `bench: ${selected.map((scenario) => scenario.name).join(", ")}${args.quick ? " (quick)" : ""}${args.profile ? " (profiling)" : ""}`,
);
for (const scenario of selected) {
  log(`[${scenario.name}] ${scenario.title}`);
  const result = await runScenario(scenario, { quick: args.quick, profile: args.profile, resultsDir, log });
  report.scenarios.push(result);
  log(`[${scenario.name}] ${result.status} in ${(result.elapsedMs / 1000).toFixed(1)} s`);
  if (result.cpuMs) log(`[${scenario.name}] CPU while measuring: ${formatCpuShares(result.cpuMs)}`);
  if (result.profile) log(`[${scenario.name}] server profile, top self time:\n${renderProfile(result.profile)}`);
}
report.elapsedMs = monoMs() - started;

mkdirSync(join(resultsDir, "runs"), { recursive: true });
const markdown = renderReport(report);
const json = `${JSON.stringify(report, null, 2)}\n`;
const stamp = report.startedAt.replace(/[:.]/g, "-");
writeFileSync(join(resultsDir, "latest.md"), markdown);
writeFileSync(join(resultsDir, "latest.json"), json);
writeFileSync(join(resultsDir, "runs", `${stamp}.md`), markdown);
writeFileSync(join(resultsDir, "runs", `${stamp}.json`), json);

const rows = allRows(report);
process.stdout.write(`\n${renderConsoleTable(rows)}\n\n`);
const met = rows.filter((row) => isMet(row) === true).length;
const unmet = rows.filter((row) => isMet(row) === false).length;
const failed = report.scenarios.filter((scenario) => scenario.status === "failed");
for (const scenario of failed) process.stdout.write(`${scenario.name} ${scenario.status}: ${scenario.message}\n`);
process.stdout.write(
  `${met} of ${rows.filter((row) => row.target).length} targets met${unmet ? `, ${unmet} not met` : ""}; ${(report.elapsedMs / 1000).toFixed(0)} s. Report: ${join(resultsDir, "latest.md")}\n`,
);
process.exit(failed.length > 0 ? 1 : 0);
