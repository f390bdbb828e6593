import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { PROJECT_ROOT } from "../../lib/constructs/sluice-function.ts";
import { bundleFunctions } from "../../test/support/lambda-bundles.ts";
import { bareNodeCpuMs, bundleStartupCpuMs } from "../lib/cold-start.ts";
import type { Row } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { summarize } from "../lib/stats.ts";

/** Bundles measured, with what their first answer is: a plain route, a deploying route, internal functions. */
const BUNDLES = [
  { entry: "functions/http/get-me.ts", label: "plain route (get-me)", plain: true, aws: "parts" },
  { entry: "functions/http/create-source.ts", label: "deploying route (create-source)", aws: "parts" },
  { entry: "functions/http/get-openapi.ts", label: "OpenAPI route (builds the document)", aws: "composition" },
  // A malformed event: logged and dropped once the composition is built.
  { entry: "functions/internal/source-runner.ts", label: "source runner", event: {} },
  { entry: "functions/internal/event-dispatcher.ts", label: "event dispatcher", event: {} },
] as const;

const PLAIN_TARGET_MS = 150;

const rows = (figures: Record<string, number | undefined> = {}, bare?: number): Row[] =>
  BUNDLES.map((bundle) => ({
    scenario: "cold-start",
    figure: `start-up CPU, ${bundle.label}, median`,
    measured: figures[bundle.entry],
    unit: "ms" as const,
    ...("plain" in bundle ? { target: { kind: "atMost" as const, value: PLAIN_TARGET_MS } } : {}),
    ...(bare === undefined
      ? {}
      : {
          reference: `bare Node ${Math.round(bare)} ms; bundle's own ${Math.round((figures[bundle.entry] ?? 0) - bare)} ms`,
        }),
  }));

/**
 * Lambda cold starts, as far as this machine can tell: each bundle built as the stack builds it,
 * imported by a fresh Node process that answers one request (docs/aws.md "Cold starts").
 */
export const coldStart: Scenario = {
  name: "cold-start",
  title: "Lambda bundles' start-up CPU: import and first answer in a fresh process (no AWS call)",
  deadlineMs: 180_000,
  quickDeadlineMs: 90_000,
  emptyRows: () => rows(),
  async run(context) {
    const runs = context.pick(9, 3);
    // cdk.out is made by a synth; a fresh checkout has none.
    mkdirSync(join(PROJECT_ROOT, "cdk.out"), { recursive: true });
    const outdir = mkdtempSync(join(PROJECT_ROOT, "cdk.out", "bench-cold-start-"));
    context.defer(() => rmSync(outdir, { recursive: true, force: true }));
    const built = await bundleFunctions(
      // As the stack builds them (`SluiceFunctionProps.awsImports`).
      BUNDLES.map((bundle) => ({
        entry: bundle.entry,
        external: [],
        awsImports: "aws" in bundle ? bundle.aws : "none",
      })),
      outdir,
    );
    const bareRuns: number[] = [];
    for (let i = 0; i < runs; i++) bareRuns.push(await bareNodeCpuMs());
    const bare = summarize(bareRuns).p50;
    const figures: Record<string, number> = {};
    const details: Record<string, unknown> = { runs, bareNodeCpuMs: bareRuns };
    for (const bundle of BUNDLES) {
      const file = join(built.get(bundle.entry)!.dir, "index.mjs");
      const samples: number[] = [];
      for (let i = 0; i < runs; i++) {
        samples.push((await bundleStartupCpuMs(file, "event" in bundle ? bundle.event : undefined)).cpuMs);
      }
      figures[bundle.entry] = summarize(samples).p50;
      details[bundle.entry] = { cpuMs: samples, sdkPackages: built.get(bundle.entry)!.sdkPackages };
      context.log(`${bundle.label}: ${Math.round(figures[bundle.entry]!)} ms CPU (bare Node ${Math.round(bare)} ms)`);
    }
    context.note(
      "CPU of the whole process (Node's own start included) from start to the first answer; the AWS SDK clients are loaded, none is called.",
    );
    return { rows: rows(figures, bare), details };
  },
};
