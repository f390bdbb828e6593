import { describe, expect, it } from "vitest";
import { loadAwsConfig, loadLocalConfig } from "#config/env";

describe("configuration", () => {
  it("gives local mode its documented defaults", () => {
    expect(loadLocalConfig({})).toEqual({
      port: 4000,
      host: "127.0.0.1",
      dataDir: "./.sluice",
      apiKey: undefined,
      username: "sluice",
      email: "sluice@localhost",
      quotas: { dailyInvocations: 0, dailyComputeTimeMs: 0, dailyCredits: 0 },
    });
  });

  it("reports every invalid variable at once", () => {
    expect(() => loadLocalConfig({ PORT: "http", SLUICE_DAILY_CREDITS_QUOTA: "-1" })).toThrow(
      /PORT: [^\n]+\n\s+SLUICE_DAILY_CREDITS_QUOTA: /,
    );
  });

  it("requires the table name on AWS and names the variable", () => {
    expect(() => loadAwsConfig({})).toThrow(/SLUICE_RESOURCES_TABLE/);
    expect(loadAwsConfig({ SLUICE_RESOURCES_TABLE: "res" }).resourcesTable).toBe("res");
    expect(loadAwsConfig({}, { resources: false }).resourcesTable).toBeUndefined();
  });
});
