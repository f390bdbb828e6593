import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT, SLUICE_NODE_OPTIONS } from "../../lib/constructs/sluice-function.ts";
import { bundleFunctions } from "../support/lambda-bundles.ts";
import { node22 } from "../support/node22.ts";

const FIXTURE = "test/fixtures/lambda/throwing-route.ts";
/** The line of the fixture's `throw`, 1-based. */
const THROW_LINE =
  readFileSync(join(PROJECT_ROOT, FIXTURE), "utf8")
    .split("\n")
    .findIndex((line) => line.includes("// the throw")) + 1;
const FIXTURE_URL = pathToFileURL(join(PROJECT_ROOT, FIXTURE)).href;

/**
 * The functions run without `--enable-source-maps` (SLUICE_NODE_OPTIONS): each bundle maps its
 * stack traces itself, when one is formatted (functions/adapters/aws/lambda-stack-traces.ts).
 */
describe("stack traces of a Sluice Lambda bundle", () => {
  let outdir: string;
  let bundle: string;

  beforeAll(async () => {
    // Inside the project (cdk.out is ignored by git), as `cdk synth` bundles: the map's sources are relative.
    mkdirSync(join(PROJECT_ROOT, "cdk.out"), { recursive: true });
    outdir = mkdtempSync(join(PROJECT_ROOT, "cdk.out", "stack-traces-"));
    const built = await bundleFunctions([{ entry: FIXTURE, external: [] }], outdir);
    bundle = join(built.get(FIXTURE)!.dir, "index.mjs");
  }, 60_000);

  afterAll(() => {
    if (outdir) rmSync(outdir, { recursive: true, force: true });
  });

  /**
   * Runs the bundle in a fresh process with the functions' Node options: a request to its route
   * (a 500, logged), then its failing entry (the stack Lambda's runtime would log). Also reports
   * which source maps the process read, and when: `fs.readFileSync` is watched from the start.
   */
  function run(node: string) {
    const script = `
      import fs from "node:fs";
      import { syncBuiltinESMExports } from "node:module";
      const mapsRead = [];
      const read = fs.readFileSync;
      fs.readFileSync = (path, ...rest) => {
        if (String(path).endsWith(".map")) mapsRead.push(String(path));
        return read(path, ...rest);
      };
      syncBuiltinESMExports();
      const bundle = await import(${JSON.stringify(pathToFileURL(bundle).href)});
      const mapsReadAtLoad = mapsRead.length;
      const event = { version: "2.0", routeKey: "$default", rawPath: "/v1/throws", rawQueryString: "", headers: {},
        requestContext: { http: { method: "GET", path: "/v1/throws" }, requestId: "stack-traces" }, isBase64Encoded: false };
      const result = await bundle.handler(event, { awsRequestId: "stack-traces", functionName: "stack-traces" });
      const thrown = await bundle.failing().catch((error) => error);
      process.stdout.write(JSON.stringify({ mapsReadAtLoad, mapsRead, status: result.statusCode, thrown: thrown.stack }) + "\\n");`;
    const output = execFileSync(node, ["--input-type=module", "-e", script], {
      env: {
        PATH: process.env.PATH,
        ...(SLUICE_NODE_OPTIONS.length > 0 ? { NODE_OPTIONS: SLUICE_NODE_OPTIONS.join(" ") } : {}),
      },
      encoding: "utf8",
    });
    const lines = output.trimEnd().split("\n");
    const report = JSON.parse(lines.at(-1)!) as {
      mapsReadAtLoad: number;
      mapsRead: string[];
      status: number;
      thrown: string;
    };
    const logged = lines.slice(0, -1).map((line) => JSON.parse(line) as Record<string, unknown>);
    return { ...report, logged };
  }

  /** The frame of the throw, as Node's own mapping prints it (here as a URL): the TypeScript function, file and line. */
  const throwFrame = new RegExp(
    `^    at failingUseCase \\(${FIXTURE_URL.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:${THROW_LINE}:\\d+\\)$`,
    "m",
  );

  for (const [runtime, node] of [
    ["Node 22, the functions' runtime", node22()],
    ["Node 20", process.execPath],
  ] as const) {
    it(`logs a route's error and an entry's thrown error with frames mapped to the TypeScript (${runtime})`, () => {
      const { mapsReadAtLoad, mapsRead, status, thrown, logged } = run(node);
      expect(status).toBe(500);
      const unhandled = logged.find((line) => line.message === "unhandled error");
      expect(unhandled?.error).toBe("the use case failed");
      for (const stack of [unhandled?.stack as string, thrown]) {
        expect(stack).toMatch(/^Error: the use case failed\n/);
        expect(stack).toMatch(throwFrame);
        // Every frame of the bundle is mapped: none is left at the bundle's minified place.
        expect(stack).not.toContain("index.mjs");
      }
      // The route's error passed through the pipeline and middy, whose frames name their own files.
      expect(unhandled?.stack).toContain(pathToFileURL(join(PROJECT_ROOT, "node_modules/@middy/core/")).href);
      // The map was read when the first stack was formatted, not when the bundle loaded, and once.
      expect(mapsReadAtLoad).toBe(0);
      // (The script's own frames, `[eval1]`, have no map to read.)
      expect(mapsRead.filter((path) => path.endsWith("index.mjs.map"))).toEqual([`${bundle}.map`]);
    });
  }
});
