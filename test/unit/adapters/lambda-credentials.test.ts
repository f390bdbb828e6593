import { afterEach, describe, expect, it } from "vitest";
import { defaultProvider } from "#adapters/aws/lambda-credentials";

const VARIABLES = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"] as const;
const saved = Object.fromEntries(VARIABLES.map((name) => [name, process.env[name]]));

afterEach(() => {
  for (const name of VARIABLES) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
});

// What the Lambda bundles use for `@aws-sdk/credential-provider-node` (docs/aws.md "Cold starts").
describe("the Lambda bundles' credentials", () => {
  it("are the role's credentials Lambda puts in the environment, read when a client asks", async () => {
    const provider = defaultProvider();
    process.env.AWS_ACCESS_KEY_ID = "ASIAEXAMPLE";
    process.env.AWS_SECRET_ACCESS_KEY = "secret";
    process.env.AWS_SESSION_TOKEN = "token";
    expect(await provider()).toMatchObject({
      accessKeyId: "ASIAEXAMPLE",
      secretAccessKey: "secret",
      sessionToken: "token",
    });
  });

  it("go no further than the environment: a profile is not read", async () => {
    for (const name of VARIABLES) delete process.env[name];
    process.env.AWS_PROFILE = "default";
    await expect(defaultProvider()()).rejects.toThrow(/environment variable credentials/i);
  });
});
