import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { RunReport } from "../../bench/lib/report.ts";
import { REPO_ROOT } from "../support/local-process.ts";

/**
 * `npm run bench` end to end, once, bounded: the quickest scenario in quick mode, written to a
 * temporary results folder. Asserts what the run produced, never how fast anything was.
 */
describe("npm run bench -- --only respond --quick", () => {
  const out = mkdtempSync(join(tmpdir(), "sluice-bench-smoke-"));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("runs the scenario against local mode and its reference, and writes the report and JSON", async () => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "bench/run.ts", "--only", "respond", "--quick", "--out", out],
      {
        cwd: REPO_ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    const timer = setTimeout(() => child.kill("SIGTERM"), 40_000);
    const code = await new Promise<number | null>((resolve) => child.once("exit", (exitCode) => resolve(exitCode)));
    clearTimeout(timer);
    expect(code, output).toBe(0);

    const report = JSON.parse(readFileSync(join(out, "latest.json"), "utf8")) as RunReport;
    expect(report.options).toEqual({ quick: true, profile: false, only: ["respond"] });
    expect(report.scenarios.map((scenario) => [scenario.name, scenario.status])).toEqual([["respond", "ok"]]);
    const [scenario] = report.scenarios;
    expect(scenario!.rows.map((row) => row.figure)).toEqual([
      "custom response round trip p50 (c=1)",
      "custom response round trip p99 (c=1)",
    ]);
    for (const row of scenario!.rows) expect(row.measured).toBeGreaterThan(0);
    expect(scenario!.rows[1]!.reference).toMatch(/^bare \d/);
    expect(Object.keys(scenario!.cpuMs ?? {})).toContain("server");
    const details = scenario!.details as { load: { ok: number; sent: number }; reference: { ok: number } };
    expect(details.load.ok).toBe(details.load.sent);
    expect(details.reference.ok).toBeGreaterThan(0);

    const markdown = readFileSync(join(out, "latest.md"), "utf8");
    expect(markdown).toContain("| respond | custom response round trip p99 (c=1) |");
    expect(output).toMatch(/respond\s+custom response round trip p99 \(c=1\)/);
  }, 60_000);
});
