/**
 * The bench's results: rows with targets, the Markdown report and the JSON file. Pure: the
 * runner (bench/run.ts) collects, these functions render.
 */
import type { SelfTimeSummary } from "./cpu-profile.ts";

export type Target = { kind: "atLeast" | "atMost" | "equals"; value: number };

/** One figure of one scenario, as a line of the table. */
export interface Row {
  scenario: string;
  figure: string;
  /** Undefined when the scenario failed before measuring it. */
  measured: number | undefined;
  unit: Unit;
  target?: Target;
  /** The reference (bare server) figure of the same run, as text. */
  reference?: string;
}

export type Unit = "/s" | "ms" | "µs" | "%" | "MiB" | "count";

export interface ScenarioReport {
  name: string;
  title: string;
  /** `failed`: an error, or its deadline passed. */
  status: "ok" | "failed";
  /** Why it failed. */
  message?: string;
  elapsedMs: number;
  rows: Row[];
  /** Scenario-specific numbers (load results, counts, settings) for the JSON file. */
  details: Record<string, unknown>;
  /** CPU ms by process role (`server`, `sandbox`, ...) during the measured windows. */
  cpuMs?: Record<string, number>;
  /** Top self-time functions of the server in the measured windows (`--profile`). */
  profile?: SelfTimeSummary & { file: string };
}

export interface RunReport {
  startedAt: string;
  elapsedMs: number;
  options: { quick: boolean; profile: boolean; only: string[] };
  machine: { cpus: number; cpuModel: string; node: string; memoryMiB: number; loadAverage: number[] };
  scenarios: ScenarioReport[];
}

/** Whether a row meets its target; undefined when it has none or was not measured. */
export function isMet(row: Pick<Row, "measured" | "target">): boolean | undefined {
  const { measured, target } = row;
  if (!target || measured === undefined || Number.isNaN(measured)) return undefined;
  if (target.kind === "atLeast") return measured >= target.value;
  if (target.kind === "atMost") return measured <= target.value;
  return measured === target.value;
}

const grouped = (value: number, digits = 0) =>
  value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** A measured value with its unit: `5,123/s`, `3.42 ms`, `78 µs`, `41%`, `812 MiB`, `0`. */
export function formatValue(value: number | undefined, unit: Unit): string {
  if (value === undefined || Number.isNaN(value)) return "n/a";
  switch (unit) {
    case "/s":
      return `${grouped(value)}/s`;
    case "ms":
      return `${grouped(value, value < 10 ? 2 : value < 100 ? 1 : 0)} ms`;
    case "µs":
      return `${grouped(value, value < 10 ? 1 : 0)} µs`;
    case "%":
      return `${grouped(value, value < 10 ? 1 : 0)}%`;
    case "MiB":
      return `${grouped(value)} MiB`;
    case "count":
      return grouped(value);
  }
}

export function formatTarget(target: Target | undefined, unit: Unit): string {
  if (!target) return "-";
  const sign = target.kind === "atLeast" ? "≥" : target.kind === "atMost" ? "≤" : "=";
  return `${sign} ${formatValue(target.value, unit)}`;
}

const metText = (met: boolean | undefined) => (met === undefined ? "-" : met ? "yes" : "**no**");
const cell = (text: string) => text.replaceAll("|", "\\|").replaceAll("\n", " ");

/** The results table in Markdown: scenario, figure, measured, target, met, reference. */
export function renderTable(rows: readonly Row[]): string {
  const lines = [
    "| scenario | figure | measured | target | met | reference (bare server, same run) |",
    "|---|---|---:|---|---|---|",
  ];
  for (const row of rows) {
    lines.push(
      `| ${[
        row.scenario,
        row.figure,
        formatValue(row.measured, row.unit),
        formatTarget(row.target, row.unit),
        metText(isMet(row)),
        row.reference ?? "-",
      ]
        .map(cell)
        .join(" | ")} |`,
    );
  }
  return lines.join("\n");
}

/** The table as plain text for a terminal: aligned columns, no Markdown. */
export function renderConsoleTable(rows: readonly Row[]): string {
  const header = ["scenario", "figure", "measured", "target", "met", "reference"];
  const body = rows.map((row) => [
    row.scenario,
    row.figure,
    formatValue(row.measured, row.unit),
    formatTarget(row.target, row.unit),
    metText(isMet(row)).replaceAll("*", ""),
    row.reference ?? "-",
  ]);
  const widths = header.map((title, column) =>
    Math.max(title.length, ...body.map((line) => (line[column] ?? "").length)),
  );
  const format = (line: string[]) =>
    line
      .map((text, column) => text.padEnd(widths[column] ?? 0))
      .join("  ")
      .trimEnd();
  return [format(header), widths.map((width) => "-".repeat(width)).join("  "), ...body.map(format)].join("\n");
}

export const allRows = (report: RunReport) => report.scenarios.flatMap((scenario) => scenario.rows);

/** Shares of CPU by process role: `server 62%, sandbox 38%`. */
export function formatCpuShares(cpuMs: Record<string, number>): string {
  const total = Object.values(cpuMs).reduce((sum, ms) => sum + ms, 0);
  if (total <= 0) return "no CPU time recorded";
  return Object.entries(cpuMs)
    .filter(([, ms]) => ms > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([role, ms]) => `${role} ${grouped(ms / 1000, 1)} s (${Math.round((ms / total) * 100)}%)`)
    .join(", ");
}

/** Top self-time functions as a Markdown list. */
export function renderProfile(profile: SelfTimeSummary, limit = 10): string {
  const busy = profile.totalMs - profile.idleMs;
  const lines = [
    `Sampled ${grouped(profile.totalMs)} ms, busy ${grouped(busy)} ms (idle ${grouped(profile.idleMs)} ms).`,
    "",
    "| self ms | share | function |",
    "|---:|---:|---|",
    ...profile.top
      .slice(0, limit)
      .map((entry) => `| ${grouped(entry.selfMs)} | ${grouped(entry.share * 100, 1)}% | ${cell(entry.label)} |`),
    "",
    `By file: ${profile.byFile
      .slice(0, 8)
      .map((file) => `${file.file} ${grouped(file.share * 100, 1)}%`)
      .join(", ")}`,
  ];
  return lines.join("\n");
}

/** The whole Markdown report: the table, what is not met, then each scenario's notes. */
export function renderReport(report: RunReport): string {
  const rows = allRows(report);
  const unmet = rows.filter((row) => isMet(row) === false);
  const { machine, options } = report;
  const parts = [
    "# Sluice benchmark results",
    "",
    `Run ${report.startedAt}, ${grouped(report.elapsedMs / 1000)} s${options.quick ? ", **quick** (short durations: not comparable with full runs)" : ""}${options.only.length ? `, only ${options.only.join(", ")}` : ""}.`,
    `Machine: ${machine.cpus} × ${machine.cpuModel}, ${grouped(machine.memoryMiB)} MiB, Node ${machine.node}, load average at start ${machine.loadAverage.map((load) => load.toFixed(2)).join(" ")}.`,
    "",
    renderTable(rows),
    "",
    unmet.length === 0
      ? "Every measured target is met."
      : `Not met: ${unmet.map((row) => `${row.scenario} ${row.figure} (${formatValue(row.measured, row.unit)}, target ${formatTarget(row.target, row.unit)})`).join("; ")}.`,
  ];
  for (const scenario of report.scenarios) {
    parts.push("", `## ${scenario.name}: ${scenario.title}`, "");
    if (scenario.status !== "ok") parts.push(`**${scenario.status}**: ${scenario.message ?? ""}`, "");
    parts.push(`Took ${grouped(scenario.elapsedMs / 1000, 1)} s.`);
    if (scenario.cpuMs) parts.push(`CPU while measuring: ${formatCpuShares(scenario.cpuMs)}.`);
    const notes = scenario.details.notes;
    if (Array.isArray(notes)) for (const note of notes) parts.push(`- ${String(note)}`);
    if (scenario.profile)
      parts.push("", `Server profile (${scenario.profile.file}):`, "", renderProfile(scenario.profile));
  }
  return `${parts.join("\n")}\n`;
}
