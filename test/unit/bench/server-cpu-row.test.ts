import { describe, expect, it } from "vitest";
import { serverCpuRow } from "../../../bench/lib/common.ts";
import { isMet, renderTable } from "../../../bench/lib/report.ts";

describe("serverCpuRow", () => {
  it("shows the server's CPU per event beside what the share target leaves each event of one core", () => {
    const row = serverCpuRow("ingest", "server CPU per stored event (c=50)", 78.2, 35, 80_000);
    // 35% of 80,000/s is 28,000 events a second: one core gives each 35.7 µs.
    expect(row).toEqual({
      scenario: "ingest",
      figure: "server CPU per stored event (c=50)",
      measured: 78.2,
      unit: "µs",
      reference: "35% of bare is 28,000/s: 36 µs of one core each",
    });
    // Information, not a target: it never counts as met or not met.
    expect(isMet(row)).toBeUndefined();
    expect(renderTable([row])).toContain(
      "| ingest | server CPU per stored event (c=50) | 78 µs | - | - | 35% of bare is 28,000/s: 36 µs of one core each |",
    );
  });

  it("has no reference before the bare server was measured", () => {
    expect(serverCpuRow("workflow", "server CPU per run (c=50)", undefined, 20, undefined)).toEqual({
      scenario: "workflow",
      figure: "server CPU per run (c=50)",
      measured: undefined,
      unit: "µs",
    });
  });
});
