import { join, resolve } from "node:path";
import * as z from "zod";
import type { Quotas, WorkflowRunLimits } from "#core/ports/deps";
import type { EventRetention } from "#core/ports/event-store";
import { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from "#core/ports/logger";
import { bucketList, isBucketName } from "#core/ports/object-sink";
import type { DeliverySettings } from "#core/webhook-delivery";
import type { EmitLimits } from "#runtime/protocol";
import { ENV } from "./env-names.ts";

export { ENV };

type Env = Record<string, string | undefined>;

const count = z.coerce.number().int().min(0);
/** A switch that is on unless set to `false`. */
const trueOrFalse = z.enum(["true", "false"], { error: 'must be "true" or "false"' }).default("true");

/** `SLUICE_LOG_LEVEL`, on both platforms. */
const logLevelRule = z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(", ")}` }).default("info");

/** `SLUICE_INVOCATION_TIMEOUT_MS`, on both platforms: up to Lambda's 15 minutes. */
export const invocationTimeoutRule = z.coerce.number().int().min(100).max(900_000).default(30_000);

/**
 * The variables of `shape`, each parsed by its own rule, with `VARIABLE: message` for every
 * problem. One rule at a time rather than `z.object(shape)`: zod compiles an object's parser
 * (`new Function`) at its first parse, which settings read once per process pay for nothing
 * (about 3 ms of a Lambda cold start, docs/aws.md "Cold starts").
 */
export function parseVariables<T extends z.ZodRawShape>(
  shape: T,
  env: Env,
): { data: z.infer<z.ZodObject<T>>; problems: string[] } {
  const data: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, rule] of Object.entries(shape)) {
    const parsed = (rule as z.ZodType).safeParse(env[name]);
    if (!parsed.success) problems.push(...parsed.error.issues.map((issue) => `${name}: ${issue.message}`));
    else if (parsed.data !== undefined) data[name] = parsed.data;
  }
  return { data: data as z.infer<z.ZodObject<T>>, problems };
}

function parse<T extends z.ZodRawShape>(shape: T, env: Env, what: string): z.infer<z.ZodObject<T>> {
  const { data, problems } = parseVariables(shape, env);
  if (problems.length === 0) return data;
  // Report every bad or missing variable at once, not the first one.
  throw new Error(`${what} configuration is invalid:\n  ${problems.join("\n  ")}`);
}

/** `SLUICE_S3_BUCKETS`, on both platforms: a list of bucket names, each checked. */
const s3BucketsRule = z
  .string()
  .default("")
  .transform((setting) => bucketList(setting))
  .refine((names) => names.every(isBucketName), {
    error: "must be bucket names (3 to 63 of a-z, 0-9, . and -), comma-separated",
  });

/** Defaults of the storage quotas and per-run limits (docs/components.md "Limits" says why). */
export const DEFAULT_STORED_EVENTS_QUOTA = 10_000_000;
export const DEFAULT_STORED_BYTES_QUOTA = 10 * 1024 ** 3;
export const DEFAULT_MAX_EMITS_PER_RUN = 1_000;
export const DEFAULT_MAX_EMIT_BYTES_PER_RUN = 8 * 1024 * 1024;
export const DEFAULT_MAX_SENDS_PER_RUN = 100;
/** With emits, this keeps a workflow run's result under Lambda's 6 MB answer. */
export const DEFAULT_MAX_SEND_BYTES_PER_RUN = 4 * 1024 * 1024;
/** Within the sandbox's 128 MiB heap. */
export const DEFAULT_MAX_EXPORT_BYTES_PER_RUN = 8 * 1024 * 1024;

const quotaShape = {
  [ENV.dailyInvocationsQuota]: count.default(0),
  [ENV.dailyComputeTimeQuotaMs]: count.default(0),
  [ENV.dailyCreditsQuota]: count.default(0),
  // Unlimited by default: any figure that does not throttle one busy source (8,000 runs/s) protects nothing.
  [ENV.runsPerMinuteQuota]: count.default(0),
  [ENV.storedEventsQuota]: count.default(DEFAULT_STORED_EVENTS_QUOTA),
  [ENV.storedBytesQuota]: count.default(DEFAULT_STORED_BYTES_QUOTA),
};

function quotasFrom(parsed: Record<string, unknown>): Quotas {
  return {
    dailyInvocations: parsed[ENV.dailyInvocationsQuota] as number,
    dailyComputeTimeMs: parsed[ENV.dailyComputeTimeQuotaMs] as number,
    dailyCredits: parsed[ENV.dailyCreditsQuota] as number,
    runsPerMinute: parsed[ENV.runsPerMinuteQuota] as number,
    storedEvents: parsed[ENV.storedEventsQuota] as number,
    storedBytes: parsed[ENV.storedBytesQuota] as number,
  };
}

/** `SLUICE_MAX_EMITS_PER_RUN` and `SLUICE_MAX_EMIT_BYTES_PER_RUN`, on both platforms. */
export const emitLimitsShape = {
  [ENV.maxEmitsPerRun]: z.coerce.number().int().min(1).max(1_000_000).default(DEFAULT_MAX_EMITS_PER_RUN),
  // At least one event of the largest size (256 KiB).
  [ENV.maxEmitBytesPerRun]: z.coerce
    .number()
    .int()
    .min(256 * 1024)
    .max(1024 ** 3)
    .default(DEFAULT_MAX_EMIT_BYTES_PER_RUN),
};

export function emitLimitsFrom(parsed: Record<string, unknown>): EmitLimits {
  return {
    maxEmits: parsed[ENV.maxEmitsPerRun] as number,
    maxEmitBytes: parsed[ENV.maxEmitBytesPerRun] as number,
  };
}

/** `SLUICE_MAX_SENDS_PER_RUN`, `SLUICE_MAX_SEND_BYTES_PER_RUN`, `SLUICE_MAX_EXPORT_BYTES_PER_RUN`, on both platforms. */
export const workflowLimitsShape = {
  [ENV.maxSendsPerRun]: z.coerce.number().int().min(1).max(100_000).default(DEFAULT_MAX_SENDS_PER_RUN),
  // At least one send of the largest payload (256 KiB) with its fields.
  [ENV.maxSendBytesPerRun]: z.coerce
    .number()
    .int()
    .min(512 * 1024)
    .max(1024 ** 3)
    .default(DEFAULT_MAX_SEND_BYTES_PER_RUN),
  [ENV.maxExportBytesPerRun]: z.coerce
    .number()
    .int()
    .min(1024)
    .max(1024 ** 3)
    .default(DEFAULT_MAX_EXPORT_BYTES_PER_RUN),
};

export function workflowLimitsFrom(parsed: Record<string, unknown>): WorkflowRunLimits {
  return {
    maxSends: parsed[ENV.maxSendsPerRun] as number,
    maxSendBytes: parsed[ENV.maxSendBytesPerRun] as number,
    maxExportBytes: parsed[ENV.maxExportBytesPerRun] as number,
  };
}

/** Settings of the component runtime in local mode. */
export interface LocalRuntimeConfig {
  publicUrl: string | undefined;
  secretKey: string | undefined;
  invocationTimeoutMs: number;
  sandboxHeapMb: number;
  /** What each sandbox process's `/tmp` may hold, in MiB; 0: no writes. */
  sandboxTmpMb: number;
  /** What each project's File Store may hold, in MiB; 0: no files. */
  fileStoreMb: number;
  sandboxIdleMs: number;
  /** Per source; undefined: the host's default (1). */
  sandboxProcesses: number | undefined;
  /** Of all sources; undefined: the host's default (one per 64 MiB of memory, 8 to 256). */
  sandboxMaxProcesses: number | undefined;
  npmRegistry: string | undefined;
  /** Whether `component_url` may be fetched from loopback and private addresses. */
  componentUrlAllowPrivate: boolean;
  /**
   * A registry-layout components tree served by key before the shipped `registry/` (default
   * `<dataDir>/registry`, where `sluice registry add` puts packages; nothing while it does not exist).
   */
  registryDir: string;
  /** The operator's apps file (`SLUICE_APPS_FILE`); undefined: the shipped apps only. */
  appsFile: string | undefined;
  emitLimits: EmitLimits;
  workflowLimits: WorkflowRunLimits;
}

/** Webhook delivery in local mode (docs/webhooks.md): the retry policy plus the worker's own settings. */
export interface WebhookDeliveryConfig extends Omit<DeliverySettings, "random"> {
  concurrency: number;
  inFlightPerWebhook: number;
  allowPrivateAddresses: boolean;
}

/** What the server logs, and how (docs/operations.md). */
export interface LogConfig {
  level: LogLevel;
  /** Undefined: `text` when the output is a terminal, else `json`. */
  format: LogFormat | undefined;
}

export interface LocalConfig {
  port: number;
  log: LogConfig;
  /** Largest size of the data file in MiB; 0: no cap but the disk's. */
  databaseMaxMb: number;
  events: EventRetention;
  webhooks: WebhookDeliveryConfig;
  host: string;
  dataDir: string;
  runtime: LocalRuntimeConfig;
  apiKey: string | undefined;
  username: string;
  email: string;
  quotas: Quotas;
  /** Buckets `$.send.s3` may write to (files under `<dataDir>/s3/`); empty: none. */
  s3Buckets: string[];
}

export function loadLocalConfig(env: Env = process.env): LocalConfig {
  const parsed = parse(
    {
      [ENV.port]: z.coerce.number().int().min(0).max(65535).default(4000),
      [ENV.host]: z.string().min(1).default("127.0.0.1"),
      [ENV.dataDir]: z.string().min(1).default("./.sluice"),
      [ENV.apiKey]: z.string().min(1).optional(),
      [ENV.username]: z.string().min(1).default("sluice"),
      [ENV.email]: z.string().min(3).default("sluice@localhost"),
      [ENV.publicUrl]: z.url({ error: "must be a URL" }).optional(),
      [ENV.secretKey]: z.string().min(1).optional(),
      [ENV.invocationTimeoutMs]: invocationTimeoutRule,
      [ENV.sandboxHeapMb]: z.coerce.number().int().min(16).max(16_384).default(128),
      [ENV.sandboxTmpMb]: z.coerce.number().int().min(0).max(1_048_576).default(512),
      [ENV.fileStoreMb]: z.coerce.number().int().min(0).max(1_048_576).default(1024),
      [ENV.sandboxIdleMs]: z.coerce.number().int().min(100).default(60_000),
      [ENV.sandboxProcesses]: z.coerce.number().int().min(1).max(64).optional(),
      [ENV.sandboxMaxProcesses]: z.coerce.number().int().min(1).max(4096).optional(),
      [ENV.npmRegistry]: z.url({ error: "must be a URL" }).optional(),
      [ENV.eventRetentionDays]: count.default(30),
      [ENV.eventRetentionPerChannel]: count.default(0),
      [ENV.webhookMaxAttempts]: z.coerce.number().int().min(1).max(100).default(8),
      [ENV.webhookBaseDelayMs]: z.coerce.number().int().min(1).default(30_000),
      [ENV.webhookMaxDelayMs]: z.coerce.number().int().min(1).default(1_800_000),
      [ENV.webhookTimeoutMs]: z.coerce.number().int().min(100).max(60_000).default(10_000),
      [ENV.webhookConcurrency]: z.coerce.number().int().min(1).max(256).default(8),
      [ENV.webhookInFlight]: z.coerce.number().int().min(1).max(32).default(16),
      [ENV.webhookAllowPrivate]: trueOrFalse,
      [ENV.componentUrlAllowPrivate]: trueOrFalse,
      [ENV.registryDir]: z.string().min(1).optional(),
      [ENV.appsFile]: z.string().min(1).optional(),
      ...quotaShape,
      ...emitLimitsShape,
      ...workflowLimitsShape,
      [ENV.databaseMaxMb]: count.default(0),
      [ENV.logLevel]: logLevelRule,
      [ENV.logFormat]: z.enum(LOG_FORMATS, { error: `must be one of ${LOG_FORMATS.join(", ")}` }).optional(),
      [ENV.s3Buckets]: s3BucketsRule,
    },
    env,
    "Local mode",
  );
  // Absolute from here on: esbuild resolves a relative output path against its own working dir
  // (the component's folder), and sandbox children run elsewhere than the server.
  const dataDir = resolve(parsed[ENV.dataDir] as string);
  return {
    port: parsed[ENV.port] as number,
    log: { level: parsed[ENV.logLevel] as LogLevel, format: parsed[ENV.logFormat] as LogFormat | undefined },
    databaseMaxMb: parsed[ENV.databaseMaxMb] as number,
    host: parsed[ENV.host] as string,
    dataDir,
    runtime: {
      publicUrl: (parsed[ENV.publicUrl] as string | undefined)?.replace(/\/+$/, ""),
      secretKey: parsed[ENV.secretKey] as string | undefined,
      invocationTimeoutMs: parsed[ENV.invocationTimeoutMs] as number,
      sandboxHeapMb: parsed[ENV.sandboxHeapMb] as number,
      sandboxTmpMb: parsed[ENV.sandboxTmpMb] as number,
      fileStoreMb: parsed[ENV.fileStoreMb] as number,
      sandboxIdleMs: parsed[ENV.sandboxIdleMs] as number,
      sandboxProcesses: parsed[ENV.sandboxProcesses] as number | undefined,
      sandboxMaxProcesses: parsed[ENV.sandboxMaxProcesses] as number | undefined,
      npmRegistry: parsed[ENV.npmRegistry] as string | undefined,
      componentUrlAllowPrivate: parsed[ENV.componentUrlAllowPrivate] === "true",
      registryDir: (parsed[ENV.registryDir] as string | undefined) ?? join(dataDir, "registry"),
      appsFile: parsed[ENV.appsFile] as string | undefined,
      emitLimits: emitLimitsFrom(parsed),
      workflowLimits: workflowLimitsFrom(parsed),
    },
    events: {
      maxAgeMs: (parsed[ENV.eventRetentionDays] as number) * 86_400_000,
      keepPerChannel: parsed[ENV.eventRetentionPerChannel] as number,
    },
    webhooks: {
      maxAttempts: parsed[ENV.webhookMaxAttempts] as number,
      baseDelayMs: parsed[ENV.webhookBaseDelayMs] as number,
      maxDelayMs: parsed[ENV.webhookMaxDelayMs] as number,
      timeoutMs: parsed[ENV.webhookTimeoutMs] as number,
      concurrency: parsed[ENV.webhookConcurrency] as number,
      inFlightPerWebhook: parsed[ENV.webhookInFlight] as number,
      allowPrivateAddresses: parsed[ENV.webhookAllowPrivate] === "true",
    },
    apiKey: parsed[ENV.apiKey] as string | undefined,
    username: parsed[ENV.username] as string,
    email: parsed[ENV.email] as string,
    quotas: quotasFrom(parsed),
    s3Buckets: parsed[ENV.s3Buckets] as string[],
  };
}

export interface AwsConfig {
  /** Set on functions whose route declares table access; absent on the others. */
  resourcesTable: string | undefined;
  quotas: Quotas;
  /** Age after which events expire (DynamoDB TTL); the count limit does not apply on AWS. */
  eventMaxAgeMs: number;
  /** Lines below it are not written; the format is always JSON. */
  logLevel: LogLevel;
  /** Buckets `$.send.s3` may write to (set by the stack from `-c s3Buckets`); empty: none. */
  s3Buckets: string[];
  /** The account id that must own those buckets (the stack's own); undefined: not checked. */
  s3ExpectedOwner: string | undefined;
  /** The bucket of installed npm trees (set on the functions that install packages); undefined: none. */
  npmTreesBucket: string | undefined;
  /** The bucket of projects' File Stores (set on the function that serves their calls); undefined: none. */
  fileStoreBucket: string | undefined;
}

/** An optional bucket name setting. */
const bucketRule = z
  .string()
  .refine(isBucketName, { error: "must be a bucket name (3 to 63 of a-z, 0-9, . and -)" })
  .optional();

export function loadAwsConfig(env: Env = process.env, needs: { resources: boolean } = { resources: true }): AwsConfig {
  const table = z.string({ error: "is required" }).min(3);
  const parsed = parse(
    {
      [ENV.resourcesTable]: needs.resources ? table : table.optional(),
      [ENV.eventRetentionDays]: count.default(30),
      [ENV.logLevel]: logLevelRule,
      [ENV.s3Buckets]: s3BucketsRule,
      [ENV.s3ExpectedOwner]: z
        .string()
        .regex(/^\d{12}$/, "must be a 12-digit AWS account id")
        .optional(),
      [ENV.npmTreesBucket]: bucketRule,
      [ENV.fileStoreBucket]: bucketRule,
      ...quotaShape,
    },
    env,
    "AWS",
  );
  return {
    resourcesTable: parsed[ENV.resourcesTable] as string | undefined,
    quotas: quotasFrom(parsed),
    eventMaxAgeMs: (parsed[ENV.eventRetentionDays] as number) * 86_400_000,
    logLevel: parsed[ENV.logLevel] as LogLevel,
    s3Buckets: parsed[ENV.s3Buckets] as string[],
    s3ExpectedOwner: parsed[ENV.s3ExpectedOwner] as string | undefined,
    npmTreesBucket: parsed[ENV.npmTreesBucket] as string | undefined,
    fileStoreBucket: parsed[ENV.fileStoreBucket] as string | undefined,
  };
}
