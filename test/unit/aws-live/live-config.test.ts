import { describe, expect, it } from "vitest";
import { deploymentOf } from "../../aws-live/deployment.ts";
import { DEFAULT_RECEIVER_PORT, LIVE_ENV, liveConfig } from "../../aws-live/live-config.ts";
import { runLive } from "../../aws-live/run.ts";

const READY = {
  AWS_PROFILE: "sluice-dev",
  [LIVE_ENV.stage]: "dev",
  [LIVE_ENV.receiverUrl]: "https://hooks.example.com/sluice",
};

/** What `npm run test:aws-live` prints and returns for `env`, and whether it started the suite. */
function live(env: Record<string, string | undefined>, suiteExit = 0) {
  const lines: string[] = [];
  let ran = false;
  const code = runLive({
    env,
    write: (line) => lines.push(line),
    runSuite: () => {
      ran = true;
      return suiteExit;
    },
  });
  return { code, output: lines.join("\n"), ran };
}

describe("npm run test:aws-live", () => {
  it("skips, saying why, and exits 0 without AWS credentials, whatever else is set", () => {
    for (const env of [{}, { [LIVE_ENV.stage]: "dev" }, { ...READY, AWS_PROFILE: " " }]) {
      const run = live(env);
      expect(run).toMatchObject({ code: 0, ran: false });
      expect(run.output).toMatch(/^test:aws-live skipped: no AWS credentials .*AWS_PROFILE or AWS_ACCESS_KEY_ID/);
    }
  });

  it("refuses to run with credentials but an incomplete configuration, naming every problem", () => {
    const run = live({ AWS_ACCESS_KEY_ID: "AKIA0000" });
    expect(run).toMatchObject({ code: 1, ran: false });
    expect(run.output).toContain("AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY");
    expect(run.output).toContain(`${LIVE_ENV.stage} is not set`);
    expect(run.output).toContain(`${LIVE_ENV.receiverUrl} is not set`);
  });

  it("runs the live suite once configured, and exits as it does", () => {
    expect(live(READY)).toMatchObject({ code: 0, ran: true });
    expect(live(READY, 1)).toMatchObject({ code: 1, ran: true });
    expect(live({ ...READY, AWS_PROFILE: undefined, AWS_ACCESS_KEY_ID: "A", AWS_SECRET_ACCESS_KEY: "S" }).ran).toBe(
      true,
    );
  });
});

describe("liveConfig", () => {
  it("names the service stack by the stage, with the default stage's stacks unprefixed", () => {
    const dev = liveConfig({ ...READY, AWS_REGION: "eu-west-1" });
    expect(dev).toEqual({
      kind: "ready",
      settings: {
        stage: "dev",
        serviceStack: "dev-SluiceService",
        receiverUrl: "https://hooks.example.com/sluice",
        receiverPort: DEFAULT_RECEIVER_PORT,
        region: "eu-west-1",
      },
    });
    const standard = liveConfig({ ...READY, [LIVE_ENV.stage]: "default", [LIVE_ENV.receiverPort]: "9000" });
    expect(standard).toMatchObject({
      settings: { serviceStack: "SluiceService", receiverPort: 9000, region: undefined },
    });
  });

  it.each([
    [{ [LIVE_ENV.stage]: "-dev" }, `${LIVE_ENV.stage} must be`],
    [{ [LIVE_ENV.stage]: "a".repeat(31) }, `${LIVE_ENV.stage} must be`],
    [{ [LIVE_ENV.receiverUrl]: "hooks.example.com" }, "is not a URL"],
    [{ [LIVE_ENV.receiverUrl]: "ftp://hooks.example.com/" }, "must be http or https"],
    [{ [LIVE_ENV.receiverUrl]: "http://127.0.0.1:8787/" }, "must be public"],
    [{ [LIVE_ENV.receiverUrl]: "http://localhost:8787/" }, "must be public"],
    [{ [LIVE_ENV.receiverUrl]: "http://[::1]:8787/" }, "must be public"],
    [{ [LIVE_ENV.receiverUrl]: "http://192.168.1.20/" }, "must be public"],
    [{ [LIVE_ENV.receiverUrl]: "http://169.254.169.254/" }, "must be public"],
    [{ [LIVE_ENV.receiverPort]: "0" }, "must be a TCP port"],
    [{ [LIVE_ENV.receiverPort]: "65536" }, "must be a TCP port"],
    [{ [LIVE_ENV.receiverPort]: "80a" }, "must be a TCP port"],
    [{ [LIVE_ENV.receiverPort]: "8.5" }, "must be a TCP port"],
  ])("refuses %j", (change, problem) => {
    const config = liveConfig({ ...READY, ...change });
    expect(config.kind).toBe("invalid");
    expect(config.kind === "invalid" && config.problems.join("\n")).toContain(problem);
  });
});

describe("deploymentOf", () => {
  const fn = (name: string, variables: Record<string, string> = {}) => ({
    FunctionName: name,
    Environment: { Variables: variables },
  });
  const route = (stack: string, url: string, table: string) =>
    fn(`${stack}-RouteGetMeFunctionAbc-x1y2`, { SLUICE_PUBLIC_URL: url, SLUICE_RESOURCES_TABLE: table });

  it("reads the API's URL and the table from the stack's own functions, not another stage's", () => {
    const functions = [
      route("SluiceService", "https://abc.execute-api.eu-west-1.amazonaws.com", "SluiceStateful-Resources-1"),
      route("dev-SluiceService", "https://dev.execute-api.eu-west-1.amazonaws.com", "dev-SluiceStateful-Resources-2"),
      fn("SluiceService-OpenApiFunction-z9"),
      fn("sluice-default-dc_abc"),
    ];
    expect(deploymentOf(functions, "SluiceService")).toEqual({
      apiUrl: "https://abc.execute-api.eu-west-1.amazonaws.com/v1",
      table: "SluiceStateful-Resources-1",
    });
    expect(deploymentOf(functions, "dev-SluiceService").apiUrl).toBe(
      "https://dev.execute-api.eu-west-1.amazonaws.com/v1",
    );
  });

  it("fails, saying why, when the stack is not deployed there or its functions disagree", () => {
    expect(() => deploymentOf([fn("other-Function")], "SluiceService")).toThrow(
      /no function of the stack SluiceService/,
    );
    expect(() =>
      deploymentOf(
        [route("SluiceService", "https://a", "t1"), route("SluiceService", "https://b", "t1")],
        "SluiceService",
      ),
    ).toThrow(/2 API URLs and 1 tables/);
  });
});
