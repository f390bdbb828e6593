import { describe, expect, it } from "vitest";
import type { Row } from "../../../bench/lib/report.ts";
import { runScenario, type Scenario, selectScenarios } from "../../../bench/lib/scenario.ts";

const emptyRow: Row = { scenario: "t", figure: "f", measured: undefined, unit: "ms" };
const options = { quick: true, profile: false, resultsDir: "/nonexistent", log: () => {} };

const scenario = (run: Scenario["run"]): Scenario => ({
  name: "t",
  title: "a test scenario",
  deadlineMs: 60_000,
  quickDeadlineMs: 100,
  emptyRows: () => [emptyRow],
  run,
});

describe("runScenario", () => {
  it("reports the rows, details and notes of a scenario that finishes, after its cleanups", async () => {
    const cleaned: string[] = [];
    const report = await runScenario(
      scenario(async (context) => {
        context.defer(() => cleaned.push("first"));
        context.defer(() => cleaned.push("second"));
        context.note("a note");
        return { rows: [{ ...emptyRow, measured: context.pick(2, 1) }], details: { n: 1 } };
      }),
      options,
    );
    expect(report).toMatchObject({ status: "ok", rows: [{ measured: 1 }], details: { n: 1, notes: ["a note"] } });
    expect(cleaned).toEqual(["second", "first"]);
  });

  it("fails a scenario that passes its deadline, with its empty rows, and still runs its cleanups", async () => {
    let cleaned = false;
    const report = await runScenario(
      scenario(async (context) => {
        context.defer(() => {
          cleaned = true;
        });
        return new Promise(() => {});
      }),
      options,
    );
    expect(report.status).toBe("failed");
    expect(report.message).toMatch(/the t scenario did not finish within 0.1 s/);
    expect(report.rows).toEqual([emptyRow]);
    expect(cleaned).toBe(true);
  });

  it("fails a scenario that throws, keeping its message", async () => {
    const report = await runScenario(
      scenario(async () => {
        throw new Error("no server");
      }),
      options,
    );
    expect(report).toMatchObject({ status: "failed", message: "no server", rows: [emptyRow] });
  });
});

describe("selectScenarios", () => {
  const all = [{ name: "a" }, { name: "moto", optIn: "needs moto" }, { name: "b" }];

  it("runs every scenario but the opt-in ones when none is named", () => {
    expect(selectScenarios(all, []).map((scenario) => scenario.name)).toEqual(["a", "b"]);
  });

  it("runs the named ones, an opt-in one included", () => {
    expect(selectScenarios(all, ["moto", "b"]).map((scenario) => scenario.name)).toEqual(["moto", "b"]);
  });
});
