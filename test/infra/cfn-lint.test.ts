import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { routes } from "#http/routes";
import { synthService } from "./service-template.ts";

/**
 * Warnings of cfn-lint left out, each for a reason (docs/aws.md, "Checking the templates"):
 * - W3005 (a `DependsOn` already implied by a `GetAtt`): CDK writes `DependsOn` on a function's
 *   role and its policy for every Lambda function, so that the role can act before the function
 *   first runs; redundant, and harmless.
 */
const IGNORED_CHECKS = ["W3005"] as const;

/**
 * One route of each kind of access (`access` of functions/http/route.ts): the service stack built
 * from them holds every kind of resource and grant the full stack has, at 40% of its size
 * (about 160 resources of 400): cfn-lint takes 13 s of CPU over the full stack.
 */
function oneRoutePerAccess() {
  const byAccess = new Map<string, (typeof routes)[number]>();
  for (const route of routes) {
    const key = JSON.stringify(Object.entries(route.access).sort());
    if (!byAccess.has(key)) byAccess.set(key, route);
  }
  return [...byAccess.values()];
}

interface Match {
  Level: string;
  Message: string;
  Rule: { Id: string };
  Filename: string;
  Location: { Path: (string | number)[] };
}

describe("cfn-lint over the synthesized templates", () => {
  const folder = mkdtempSync(join(tmpdir(), "sluice-cfn-lint-"));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));

  it("reports no error and no warning but the ignored ones, for both stacks", async () => {
    const kinds = oneRoutePerAccess();
    // Every kind of access is there, compute levels included.
    expect(kinds.length).toBeGreaterThanOrEqual(8);
    const { template, statefulTemplate } = synthService({
      stage: "dev",
      routes: kinds,
      // The optional grants too: an S3 bucket, an npm registry.
      s3Buckets: ["sluice-lint-example"],
      npmRegistry: "https://npm.example.com/",
    });
    const files = {
      service: join(folder, "SluiceService.template.json"),
      stateful: join(folder, "SluiceStateful.template.json"),
    };
    writeFileSync(files.service, JSON.stringify(template.toJSON()));
    writeFileSync(files.stateful, JSON.stringify(statefulTemplate.toJSON()));

    const matches = await cfnLint([
      "--format",
      "json",
      "--ignore-checks",
      ...IGNORED_CHECKS,
      "--",
      ...Object.values(files),
    ]);
    const found = matches.map(
      (match) => `${match.Level} ${match.Rule.Id} ${match.Location.Path.join("/")}: ${match.Message}`,
    );
    expect(found).toEqual([]);
    // cfn-lint needs about 10 s of CPU here (schema validation in Python), which takes two or three
    // times as long when the machine's two cores are shared: beyond the default 30 s.
  }, 120_000);
});

/** cfn-lint's findings; it exits non-zero when it has any (2 errors, 4 warnings, 8 informational). */
async function cfnLint(args: string[]): Promise<Match[]> {
  try {
    const { stdout } = await promisify(execFile)("cfn-lint", args, { maxBuffer: 64 * 1024 * 1024 });
    return stdout.trim() ? (JSON.parse(stdout) as Match[]) : [];
  } catch (error) {
    const failed = error as NodeJS.ErrnoException & { stdout?: string; stderr?: string; code?: unknown };
    if (failed.code === "ENOENT") {
      throw new Error("cfn-lint is not installed (the test lints the stacks' templates with it): pip install cfn-lint");
    }
    if (typeof failed.code === "number" && (failed.code & ~(2 | 4 | 8)) === 0 && failed.stdout?.trim()) {
      return JSON.parse(failed.stdout) as Match[];
    }
    throw new Error(`cfn-lint failed: ${failed.stderr || failed.message}`);
  }
}
