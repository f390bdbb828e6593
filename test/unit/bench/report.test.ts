import { describe, expect, it } from "vitest";
import {
  formatCpuShares,
  formatTarget,
  formatValue,
  isMet,
  type Row,
  type RunReport,
  renderConsoleTable,
  renderReport,
  renderTable,
} from "../../../bench/lib/report.ts";

const rows: Row[] = [
  {
    scenario: "ingest",
    figure: "events/s",
    measured: 6123.4,
    unit: "/s",
    target: { kind: "atLeast", value: 5000 },
    reference: "bare 20,000/s",
  },
  { scenario: "respond", figure: "p99", measured: 12.345, unit: "ms", target: { kind: "atMost", value: 10 } },
  { scenario: "respond", figure: "p50", measured: 3.2, unit: "ms" },
  { scenario: "webhook", figure: "lost | dropped", measured: 0, unit: "count", target: { kind: "equals", value: 0 } },
  { scenario: "scale", figure: "RSS", measured: undefined, unit: "MiB", target: { kind: "atMost", value: 1536 } },
];

describe("isMet", () => {
  it("compares against at-least, at-most and equals targets", () => {
    expect(isMet({ measured: 5000, target: { kind: "atLeast", value: 5000 } })).toBe(true);
    expect(isMet({ measured: 4999, target: { kind: "atLeast", value: 5000 } })).toBe(false);
    expect(isMet({ measured: 10, target: { kind: "atMost", value: 10 } })).toBe(true);
    expect(isMet({ measured: 10.01, target: { kind: "atMost", value: 10 } })).toBe(false);
    expect(isMet({ measured: 1, target: { kind: "equals", value: 0 } })).toBe(false);
  });

  it("has no verdict without a target or a measurement", () => {
    expect(isMet({ measured: 3 })).toBeUndefined();
    expect(isMet({ measured: undefined, target: { kind: "equals", value: 0 } })).toBeUndefined();
    expect(isMet({ measured: Number.NaN, target: { kind: "equals", value: 0 } })).toBeUndefined();
  });
});

describe("formatting", () => {
  it("writes values with their unit and sensible precision", () => {
    expect(formatValue(6123.4, "/s")).toBe("6,123/s");
    expect(formatValue(3.456, "ms")).toBe("3.46 ms");
    expect(formatValue(34.56, "ms")).toBe("34.6 ms");
    expect(formatValue(1234.5, "ms")).toBe("1,235 ms");
    expect(formatValue(78.4, "µs")).toBe("78 µs");
    expect(formatValue(3.04, "µs")).toBe("3.0 µs");
    expect(formatValue(35.4, "%")).toBe("35%");
    expect(formatValue(812.2, "MiB")).toBe("812 MiB");
    expect(formatValue(0, "count")).toBe("0");
    expect(formatValue(undefined, "ms")).toBe("n/a");
  });

  it("writes targets with a comparison sign", () => {
    expect(formatTarget({ kind: "atLeast", value: 5000 }, "/s")).toBe("≥ 5,000/s");
    expect(formatTarget({ kind: "atMost", value: 25 }, "ms")).toBe("≤ 25.0 ms");
    expect(formatTarget({ kind: "equals", value: 0 }, "count")).toBe("= 0");
    expect(formatTarget(undefined, "ms")).toBe("-");
  });

  it("shares CPU by role, largest first", () => {
    expect(formatCpuShares({ sandbox: 1000, server: 3000 })).toBe("server 3.0 s (75%), sandbox 1.0 s (25%)");
    expect(formatCpuShares({})).toBe("no CPU time recorded");
  });
});

describe("renderTable", () => {
  it("has one Markdown line per row with the verdict, escaping pipes", () => {
    const lines = renderTable(rows).split("\n");
    expect(lines).toHaveLength(2 + rows.length);
    expect(lines[0]).toBe("| scenario | figure | measured | target | met | reference (bare server, same run) |");
    expect(lines[2]).toBe("| ingest | events/s | 6,123/s | ≥ 5,000/s | yes | bare 20,000/s |");
    expect(lines[3]).toBe("| respond | p99 | 12.3 ms | ≤ 10.0 ms | **no** | - |");
    expect(lines[4]).toBe("| respond | p50 | 3.20 ms | - | - | - |");
    expect(lines[5]).toContain("lost \\| dropped");
    expect(lines[6]).toBe("| scale | RSS | n/a | ≤ 1,536 MiB | - | - |");
  });

  it("aligns the console table in columns", () => {
    const lines = renderConsoleTable(rows).split("\n");
    expect(lines).toHaveLength(2 + rows.length);
    const column = lines[0]!.indexOf("measured");
    for (const line of lines.slice(2)) expect(line.length).toBeGreaterThan(column);
    expect(lines[3]).toMatch(/12\.3 ms\s+≤ 10\.0 ms\s+no\s+-$/);
  });
});

describe("renderReport", () => {
  const report: RunReport = {
    startedAt: "2026-11-21T00:00:00.000Z",
    elapsedMs: 61_000,
    options: { quick: true, profile: false, only: ["ingest"] },
    machine: { cpus: 2, cpuModel: "Test CPU", node: "v20.0.0", memoryMiB: 4096, loadAverage: [1, 0.5, 0.25] },
    scenarios: [
      {
        name: "ingest",
        title: "ingest things",
        status: "ok",
        elapsedMs: 12_300,
        rows: rows.slice(0, 2),
        details: { notes: ["measured carefully"] },
        cpuMs: { server: 3000, sandbox: 1000 },
      },
      {
        name: "bad-input",
        title: "bad input",
        status: "failed",
        message: "deadline passed",
        elapsedMs: 0,
        rows: [],
        details: {},
      },
    ],
  };

  it("has the table, names every unmet target, and each scenario's notes and status", () => {
    const text = renderReport(report);
    expect(text).toContain("| ingest | events/s | 6,123/s |");
    expect(text).toContain("Not met: respond p99 (12.3 ms, target ≤ 10.0 ms).");
    expect(text).toContain("**quick**");
    expect(text).toContain("## ingest: ingest things");
    expect(text).toContain("CPU while measuring: server 3.0 s (75%), sandbox 1.0 s (25%).");
    expect(text).toContain("- measured carefully");
    expect(text).toContain("**failed**: deadline passed");
  });

  it("says so when every target is met", () => {
    const met = { ...report, scenarios: [{ ...report.scenarios[0]!, rows: rows.slice(0, 1) }] };
    expect(renderReport(met)).toContain("Every measured target is met.");
  });
});
