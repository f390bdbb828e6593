import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { loadAwsComputeConfig } from "#config/aws-compute-env";
import { loadAwsConfig, loadLocalConfig } from "#config/env";

describe("configuration", () => {
  it("gives local mode its documented defaults", () => {
    expect(loadLocalConfig({})).toEqual({
      port: 4000,
      log: { level: "info", format: undefined },
      databaseMaxMb: 0,
      host: "127.0.0.1",
      // Absolute: esbuild and the sandbox children must not resolve it against their own dirs.
      dataDir: resolve(".sluice"),
      apiKey: undefined,
      username: "sluice",
      email: "sluice@localhost",
      quotas: {
        dailyInvocations: 0,
        dailyComputeTimeMs: 0,
        dailyCredits: 0,
        runsPerMinute: 0,
        storedEvents: 10_000_000,
        storedBytes: 10 * 1024 ** 3,
      },
      runtime: {
        publicUrl: undefined,
        registryDir: resolve(".sluice/registry"),
        secretKey: undefined,
        invocationTimeoutMs: 30_000,
        sandboxHeapMb: 128,
        sandboxTmpMb: 512,
        fileStoreMb: 1024,
        sandboxIdleMs: 60_000,
        sandboxProcesses: undefined,
        sandboxMaxProcesses: undefined,
        npmRegistry: undefined,
        componentUrlAllowPrivate: true,
        emitLimits: { maxEmits: 1_000, maxEmitBytes: 8 * 1024 * 1024 },
        workflowLimits: { maxSends: 100, maxSendBytes: 4 * 1024 * 1024, maxExportBytes: 8 * 1024 * 1024 },
      },
      events: { maxAgeMs: 30 * 86_400_000, keepPerChannel: 0 },
      webhooks: {
        maxAttempts: 8,
        baseDelayMs: 30_000,
        maxDelayMs: 1_800_000,
        timeoutMs: 10_000,
        concurrency: 8,
        inFlightPerWebhook: 16,
        allowPrivateAddresses: true,
      },
      s3Buckets: [],
    });
  });

  it("reads the buckets $.send.s3 may write to on both platforms, and refuses names that are not buckets", () => {
    const env = { SLUICE_RESOURCES_TABLE: "table", SLUICE_S3_BUCKETS: " orders, exports.acme,,orders " };
    expect(loadLocalConfig(env).s3Buckets).toEqual(["orders", "exports.acme"]);
    expect(loadAwsConfig(env).s3Buckets).toEqual(["orders", "exports.acme"]);
    expect(loadAwsConfig({ SLUICE_RESOURCES_TABLE: "table" }).s3Buckets).toEqual([]);
    expect(loadAwsConfig({ SLUICE_RESOURCES_TABLE: "table" }).s3ExpectedOwner).toBeUndefined();
    expect(
      loadAwsConfig({ SLUICE_RESOURCES_TABLE: "table", SLUICE_S3_EXPECTED_OWNER: "123456789012" }).s3ExpectedOwner,
    ).toBe("123456789012");
    expect(() => loadAwsConfig({ SLUICE_RESOURCES_TABLE: "table", SLUICE_S3_EXPECTED_OWNER: "me" })).toThrow(
      /SLUICE_S3_EXPECTED_OWNER/,
    );
    for (const bad of ["../etc", "Orders", "a/b", "x"]) {
      expect(() => loadLocalConfig({ SLUICE_S3_BUCKETS: bad }), bad).toThrow(/SLUICE_S3_BUCKETS: must be bucket names/);
    }
  });

  it("reads event retention and webhook delivery settings, and refuses bad ones by name", () => {
    const config = loadLocalConfig({
      SLUICE_EVENT_RETENTION_DAYS: "0",
      SLUICE_EVENT_RETENTION_PER_CHANNEL: "500",
      SLUICE_WEBHOOK_MAX_ATTEMPTS: "3",
      SLUICE_WEBHOOK_BASE_DELAY_MS: "10",
      SLUICE_WEBHOOK_ALLOW_PRIVATE: "false",
      SLUICE_COMPONENT_URL_ALLOW_PRIVATE: "false",
    });
    expect(config.events).toEqual({ maxAgeMs: 0, keepPerChannel: 500 });
    expect(config.runtime.componentUrlAllowPrivate).toBe(false);
    expect(() => loadLocalConfig({ SLUICE_COMPONENT_URL_ALLOW_PRIVATE: "no" })).toThrow(
      /SLUICE_COMPONENT_URL_ALLOW_PRIVATE: must be "true" or "false"/,
    );
    expect(config.webhooks).toMatchObject({ maxAttempts: 3, baseDelayMs: 10, allowPrivateAddresses: false });
    expect(() => loadLocalConfig({ SLUICE_WEBHOOK_ALLOW_PRIVATE: "yes", SLUICE_WEBHOOK_MAX_ATTEMPTS: "0" })).toThrow(
      /SLUICE_WEBHOOK_MAX_ATTEMPTS[\s\S]*SLUICE_WEBHOOK_ALLOW_PRIVATE|SLUICE_WEBHOOK_ALLOW_PRIVATE[\s\S]*SLUICE_WEBHOOK_MAX_ATTEMPTS/,
    );
  });

  it("reads the runtime settings of local mode and drops a trailing slash of the public URL", () => {
    const config = loadLocalConfig({
      SLUICE_PUBLIC_URL: "https://hooks.example.com/",
      SLUICE_INVOCATION_TIMEOUT_MS: "5000",
      SLUICE_SANDBOX_HEAP_MB: "64",
      SLUICE_SANDBOX_PROCESSES: "3",
      SLUICE_SANDBOX_MAX_PROCESSES: "40",
    });
    expect(config.runtime).toMatchObject({
      publicUrl: "https://hooks.example.com",
      invocationTimeoutMs: 5000,
      sandboxHeapMb: 64,
      sandboxProcesses: 3,
      sandboxMaxProcesses: 40,
    });
    expect(() => loadLocalConfig({ SLUICE_SANDBOX_PROCESSES: "0" })).toThrow(/SLUICE_SANDBOX_PROCESSES/);
    expect(() => loadLocalConfig({ SLUICE_SANDBOX_MAX_PROCESSES: "0" })).toThrow(/SLUICE_SANDBOX_MAX_PROCESSES/);
    expect(() => loadLocalConfig({ SLUICE_PUBLIC_URL: "not a url", SLUICE_INVOCATION_TIMEOUT_MS: "5" })).toThrow(
      /SLUICE_PUBLIC_URL: [^\n]+\n\s+SLUICE_INVOCATION_TIMEOUT_MS: /,
    );
  });

  it("reads the quotas and per-run limits on both platforms, and refuses bad ones by name", () => {
    const env = {
      SLUICE_RUNS_PER_MINUTE_QUOTA: "600",
      SLUICE_STORED_EVENTS_QUOTA: "5000",
      SLUICE_STORED_BYTES_QUOTA: "0",
      SLUICE_DAILY_INVOCATIONS_QUOTA: "100",
      SLUICE_MAX_EMITS_PER_RUN: "50",
      SLUICE_MAX_EMIT_BYTES_PER_RUN: "1048576",
    };
    const local = loadLocalConfig(env);
    expect(local.quotas).toEqual({
      dailyInvocations: 100,
      dailyComputeTimeMs: 0,
      dailyCredits: 0,
      runsPerMinute: 600,
      storedEvents: 5000,
      storedBytes: 0,
    });
    expect(local.runtime.emitLimits).toEqual({ maxEmits: 50, maxEmitBytes: 1_048_576 });
    expect(loadAwsConfig({ ...env, SLUICE_RESOURCES_TABLE: "resources" }).quotas).toEqual(local.quotas);
    // A run must be able to emit one event of the largest size (256 KiB).
    expect(() => loadLocalConfig({ SLUICE_MAX_EMITS_PER_RUN: "0", SLUICE_MAX_EMIT_BYTES_PER_RUN: "1000" })).toThrow(
      /SLUICE_MAX_EMITS_PER_RUN: [^\n]+\n\s+SLUICE_MAX_EMIT_BYTES_PER_RUN: /,
    );
  });

  it("reads the workflow run limits on both platforms, and refuses bad ones by name", () => {
    const env = {
      SLUICE_MAX_SENDS_PER_RUN: "7",
      SLUICE_MAX_SEND_BYTES_PER_RUN: "1048576",
      SLUICE_MAX_EXPORT_BYTES_PER_RUN: "65536",
    };
    const limits = { maxSends: 7, maxSendBytes: 1_048_576, maxExportBytes: 65_536 };
    expect(loadLocalConfig(env).runtime.workflowLimits).toEqual(limits);
    expect(loadAwsComputeConfig(env).runtime.workflowLimits).toEqual(limits);
    // A run must be able to send one payload of the largest size (256 KiB) with its fields.
    expect(() => loadLocalConfig({ SLUICE_MAX_SENDS_PER_RUN: "0", SLUICE_MAX_SEND_BYTES_PER_RUN: "1000" })).toThrow(
      /SLUICE_MAX_SENDS_PER_RUN: [^\n]+\n\s+SLUICE_MAX_SEND_BYTES_PER_RUN: /,
    );
  });

  it("reads the log level on both platforms and the log format in local mode, and refuses unknown ones by name", () => {
    expect(loadLocalConfig({ SLUICE_LOG_LEVEL: "debug", SLUICE_LOG_FORMAT: "text" }).log).toEqual({
      level: "debug",
      format: "text",
    });
    expect(loadLocalConfig({ SLUICE_LOG_LEVEL: "silent", SLUICE_LOG_FORMAT: "json" }).log).toEqual({
      level: "silent",
      format: "json",
    });
    expect(loadAwsConfig({ SLUICE_RESOURCES_TABLE: "table", SLUICE_LOG_LEVEL: "warn" }).logLevel).toBe("warn");
    expect(loadAwsConfig({ SLUICE_RESOURCES_TABLE: "table" }).logLevel).toBe("info");
    expect(() => loadLocalConfig({ SLUICE_LOG_LEVEL: "verbose", SLUICE_LOG_FORMAT: "pretty" })).toThrow(
      /SLUICE_LOG_LEVEL: must be one of debug, info, warn, error, silent[\s\S]*SLUICE_LOG_FORMAT: must be one of text, json/,
    );
    expect(() => loadAwsConfig({ SLUICE_RESOURCES_TABLE: "table", SLUICE_LOG_LEVEL: "INFO" })).toThrow(
      /SLUICE_LOG_LEVEL/,
    );
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
