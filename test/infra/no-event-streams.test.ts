import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../lib/constructs/sluice-function.ts";
import { type BuiltBundle, bundleFunctions } from "../support/lambda-bundles.ts";
import { node22 } from "../support/node22.ts";

const FIXTURE = "test/fixtures/lambda/event-stream-clients.ts";

/**
 * The bundles' stand-in for the SDK's event stream support (functions/adapters/aws/no-event-streams.ts):
 * the clients that set it up when they are made still are, and using it fails, naming the stand-in.
 */
describe("AWS event streams in a Sluice Lambda bundle", () => {
  let outdir: string;
  let bundle: BuiltBundle;

  beforeAll(async () => {
    mkdirSync(join(PROJECT_ROOT, "cdk.out"), { recursive: true });
    outdir = mkdtempSync(join(PROJECT_ROOT, "cdk.out", "event-streams-"));
    bundle = (await bundleFunctions([{ entry: FIXTURE, external: [] }], outdir)).get(FIXTURE)!;
  }, 60_000);

  afterAll(() => {
    if (outdir) rmSync(outdir, { recursive: true, force: true });
  });

  it("makes the Lambda and S3 clients, whose event stream marshaller refuses to be used", () => {
    expect(bundle.sdkPackages).toEqual(expect.arrayContaining(["@aws-sdk/client-lambda", "@aws-sdk/client-s3"]));
    expect(bundle.inputs).toContain("functions/adapters/aws/no-event-streams.ts");
    expect(bundle.inputs.filter((input) => input.includes("/@smithy/core/dist-es/submodules/event-streams/"))).toEqual(
      [],
    );
    const script = `
      const { handler } = await import(${JSON.stringify(pathToFileURL(join(bundle.dir, "index.mjs")).href)});
      process.stdout.write(JSON.stringify(await handler()));`;
    const outcome = JSON.parse(
      execFileSync(node22(), ["--input-type=module", "-e", script], {
        env: { PATH: process.env.PATH },
        encoding: "utf8",
      }),
    );
    const refused = expect.stringMatching(/^AWS event streams are not bundled .*no-event-streams\.ts/);
    expect(outcome).toEqual({ lambda: refused, s3: refused });
  });
});
