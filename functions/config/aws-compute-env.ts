import * as z from "zod";
import type { RuntimeSettings } from "#core/ports/deps";
import {
  ENV,
  emitLimitsFrom,
  emitLimitsShape,
  invocationTimeoutRule,
  parseVariables,
  workflowLimitsFrom,
  workflowLimitsShape,
} from "./env.ts";

/**
 * The environment variables of the AWS side of sources: deployed source functions, their
 * schedules, the run queue, the secrets key, the event purger, the live stream and the event fan-out (bus and
 * delivery queues). The service stack (`lib/`) sets them from these
 * names; the AWS composition root reads them with {@link loadAwsComputeConfig}.
 */
export const AWS_COMPUTE_ENV = {
  /** Stage of the deployment; source functions are named `sluice-<stage>-<source id>`. */
  stage: "SLUICE_STAGE",
  /** Function that runs queued source runs (`LambdaRunQueue`). */
  sourceRunnerFunction: "SLUICE_SOURCE_RUNNER_FUNCTION",
  /** ARN of the KMS key that seals secret props (`KmsSecrets`). */
  secretsKeyArn: "SLUICE_SECRETS_KEY_ARN",
  /** Execution role of source functions (logging only). */
  sourceRoleArn: "SLUICE_SOURCE_ROLE_ARN",
  /** Version ARN of the runtime layer every source function runs on. */
  runtimeLayerArn: "SLUICE_RUNTIME_LAYER_ARN",
  /** Log group that all source functions log to. */
  sourceLogGroup: "SLUICE_SOURCE_LOG_GROUP",
  /** Function that reads a component's metadata in a sandbox (`LambdaComponentHost.describe`). */
  describerFunction: "SLUICE_DESCRIBER_FUNCTION",
  /** ARN of the function that EventBridge Scheduler invokes for timers. */
  timerInvokerArn: "SLUICE_TIMER_INVOKER_ARN",
  /** Role EventBridge Scheduler assumes to invoke the timer invoker. */
  schedulerRoleArn: "SLUICE_SCHEDULER_ROLE_ARN",
  /** EventBridge Scheduler group of the timers' and the delayed emits' schedules. */
  scheduleGroup: "SLUICE_SCHEDULE_GROUP",
  /**
   * ARN of the function EventBridge Scheduler invokes for a due delayed emit; set on the functions
   * that apply runs (they schedule delayed emits), with the schedule group and the scheduler role.
   */
  delayedEmitDelivererArn: "SLUICE_DELAYED_EMIT_DELIVERER_ARN",
  /**
   * ARN of the function EventBridge Scheduler invokes when a paused workflow run's time comes; set
   * on the functions that run workflows (they pause them), with the schedule group and the role.
   */
  pausedRunDispatcherArn: "SLUICE_PAUSED_RUN_DISPATCHER_ARN",
  /**
   * Function that finishes deploys and deletions a request could not fit in its time
   * (`LambdaDeployFinisher`); set on the routes that deploy and remove sources.
   */
  deployFinisherFunction: "SLUICE_DEPLOY_FINISHER_FUNCTION",
  /** Function that physically removes deleted events (`LambdaEventPurger`). */
  eventPurgerFunction: "SLUICE_EVENT_PURGER_FUNCTION",
  /** Base URL of the stream function (its function URL, no trailing slash): where `GET /sources/{id}/sse` redirects. */
  streamUrl: "SLUICE_STREAM_URL",
  /** Stream function: how often it reads the store for new events, in milliseconds. */
  streamPollMs: "SLUICE_STREAM_POLL_MS",
  /** Stream function: ends the response this long before the function's timeout, in milliseconds. */
  streamEndMarginMs: "SLUICE_STREAM_END_MARGIN_MS",
  /** EventBridge bus that stored events are published on (`EventBridgeEventBus`); set on functions that append events. */
  eventBusName: "SLUICE_EVENT_BUS_NAME",
  /** URL of the FIFO queue of webhook deliveries (`SqsDeliveryQueue`): the dispatcher and the replay routes. */
  deliveryQueueUrl: "SLUICE_DELIVERY_QUEUE_URL",
  /** URL of the standard queue that holds failed deliveries until their retry is due (the webhook deliverer). */
  deliveryRetryQueueUrl: "SLUICE_DELIVERY_RETRY_QUEUE_URL",
} as const;

/** The settings of a function that creates or updates source and workflow functions. */
const SOURCE_FUNCTIONS_KEYS = [
  "sourceRoleArn",
  "runtimeLayerArn",
  "sourceLogGroup",
] as const satisfies readonly (keyof typeof AWS_COMPUTE_ENV)[];

/** The settings of a function that creates, updates or deletes timers' schedules. */
const SCHEDULES_KEYS = [
  "timerInvokerArn",
  "schedulerRoleArn",
  "scheduleGroup",
] as const satisfies readonly (keyof typeof AWS_COMPUTE_ENV)[];

/**
 * Schedule keys that are also set alone, outside {@link SCHEDULES_KEYS}' group: the schedule group
 * (on functions that cancel delayed emits) and the scheduler role (on functions that schedule
 * them). They do not make a function one that manages timers.
 */
const SHARED_SCHEDULE_KEYS: readonly (keyof typeof AWS_COMPUTE_ENV)[] = ["scheduleGroup", "schedulerRoleArn"];

/** The names a function that creates or updates source and workflow functions needs, all of them. */
export const SOURCE_FUNCTIONS_ENV = SOURCE_FUNCTIONS_KEYS.map((key) => AWS_COMPUTE_ENV[key]);

/** The names a function that manages timers' schedules needs, all of them. */
export const SCHEDULES_ENV = SCHEDULES_KEYS.map((key) => AWS_COMPUTE_ENV[key]);

/** What a function needs to create or update source and workflow functions (see {@link AWS_COMPUTE_ENV}). */
export type SourceFunctionsConfig = Record<(typeof SOURCE_FUNCTIONS_KEYS)[number], string>;

/** What a function needs to manage timers' schedules (see {@link AWS_COMPUTE_ENV}). */
export type SchedulesConfig = Record<(typeof SCHEDULES_KEYS)[number], string>;

export interface DelayedEmitSchedules {
  scheduleGroup: string;
  target: { delivererArn: string; roleArn: string } | undefined;
}

/** Paused runs' schedules: like {@link DelayedEmitSchedules}, invoking the paused-run dispatcher. */
export interface PausedRunSchedules {
  scheduleGroup: string;
  target: { dispatcherArn: string; roleArn: string } | undefined;
}

/** Settings of the live stream on AWS (`functions/internal/source-stream-function.ts`). */
export interface StreamSettings {
  /** The stream function's URL without a trailing slash; set on the function that redirects to it. */
  url: string | undefined;
  /** Pause between two reads of the store for new events. @default 500 */
  pollIntervalMs: number;
  /**
   * The response ends when the function has less than this left before its timeout, so the client
   * reconnects (with `Last-Event-ID`) instead of being cut off. @default 5000
   */
  endMarginMs: number;
}

export const STREAM_POLL_DEFAULT_MS = 500;
export const STREAM_END_MARGIN_DEFAULT_MS = 5_000;

export interface AwsComputeConfig {
  /** `default` when the stack was deployed without `-c stage=...`. */
  stage: string;
  /** Set on functions that queue runs. */
  sourceRunnerFunction: string | undefined;
  /** Set on functions that seal or open secret props. */
  secretsKeyArn: string | undefined;
  /** Set on functions that read components' metadata (every `access.compute` level that bundles code). */
  describerFunction: string | undefined;
  /** Set, all of it, on functions that create or update source and workflow functions; undefined on the others. */
  functions: SourceFunctionsConfig | undefined;
  /** Set, all of it, on functions that manage timers' schedules; undefined on the others. */
  schedules: SchedulesConfig | undefined;
  /**
   * Delayed emits' schedules: the group on functions that cancel them (delete `$in` events or
   * sources), and `target` too on the functions that apply runs, which schedule them.
   */
  delayedEmits: DelayedEmitSchedules | undefined;
  /**
   * Paused runs' schedules: the group on functions that delete them (a deleted workflow's pauses, a
   * continuation that ended), and `target` too on the functions that run workflows, which make them.
   */
  pausedRuns: PausedRunSchedules | undefined;
  /** Set on functions that start purges of deleted events (`access.eventPurges` routes). */
  eventPurgerFunction: string | undefined;
  /** Set on functions that hand deploys and deletions over to the deploy finisher (`access.compute: "deploy"` and `"remove"` routes). */
  deployFinisherFunction: string | undefined;
  /**
   * `SLUICE_NPM_REGISTRY`: where deploying functions install components' npm packages (npm's default
   * when unset). The stack sets it from `-c npmRegistry=<url>`.
   */
  npmRegistry: string | undefined;
  /** The live stream's settings (defaults where unset). */
  stream: StreamSettings;
  /** Set on functions that append events: they publish them on this EventBridge bus. */
  eventBusName: string | undefined;
  /** Set on functions that queue webhook deliveries (the dispatcher, the replay routes). */
  deliveryQueueUrl: string | undefined;
  /** Set on the webhook deliverer, which sends failed deliveries there until their retry is due. */
  deliveryRetryQueueUrl: string | undefined;
  /**
   * `SLUICE_PUBLIC_URL` without a trailing slash (empty where unset: functions that show no
   * endpoint) and `SLUICE_INVOCATION_TIMEOUT_MS` (default 30 s), both set by the service stack, and
   * the per-run emit and workflow limits (defaults).
   */
  runtime: RuntimeSettings;
}

type Env = Record<string, string | undefined>;

const name = z.string({ error: "is required" }).min(1);
const runtimeShape = {
  [ENV.publicUrl]: z.url({ error: "must be a URL" }).optional(),
  [ENV.invocationTimeoutMs]: invocationTimeoutRule,
  [ENV.npmRegistry]: z.url({ error: "must be a URL" }).optional(),
  ...emitLimitsShape,
  ...workflowLimitsShape,
};
const streamShape = {
  [AWS_COMPUTE_ENV.streamUrl]: z.url({ error: "must be a URL" }).optional(),
  [AWS_COMPUTE_ENV.streamPollMs]: z.coerce.number().int().min(100).max(60_000).default(STREAM_POLL_DEFAULT_MS),
  [AWS_COMPUTE_ENV.streamEndMarginMs]: z.coerce
    .number()
    .int()
    .min(1_000)
    .max(60_000)
    .default(STREAM_END_MARGIN_DEFAULT_MS),
};

/** Stage names: they prefix stack, function and schedule group names (`bin/app.ts` checks `-c stage` with it). */
export const STAGE_PATTERN = /^[A-Za-z][A-Za-z0-9-]{0,29}$/;
export const STAGE_RULE = "1 to 30 letters, digits or hyphens, starting with a letter";

/**
 * Reads the compute settings. Each group is optional, but a group that is partly set is an error
 * naming every missing variable, as a half-configured function would fail only at its first use.
 */
export function loadAwsComputeConfig(env: Env = process.env): AwsComputeConfig {
  const problems: string[] = [];
  const stage = env[AWS_COMPUTE_ENV.stage] ?? "default";
  if (!STAGE_PATTERN.test(stage)) problems.push(`${AWS_COMPUTE_ENV.stage}: must be ${STAGE_RULE}`);
  const { data: settings, problems: runtimeProblems } = parseVariables(runtimeShape, env);
  const { data: streaming, problems: streamProblems } = parseVariables(streamShape, env);
  problems.push(...runtimeProblems, ...streamProblems);
  const functions = group(env, SOURCE_FUNCTIONS_KEYS, problems);
  const schedules = group(env, SCHEDULES_KEYS, problems, SHARED_SCHEDULE_KEYS);
  const delayedEmits = oneTimeSchedulesFrom(env, AWS_COMPUTE_ENV.delayedEmitDelivererArn, problems);
  const pausedRuns = oneTimeSchedulesFrom(env, AWS_COMPUTE_ENV.pausedRunDispatcherArn, problems);
  if (problems.length > 0) throw new Error(`AWS compute configuration is invalid:\n  ${problems.join("\n  ")}`);
  return {
    stage,
    sourceRunnerFunction: env[AWS_COMPUTE_ENV.sourceRunnerFunction] || undefined,
    secretsKeyArn: env[AWS_COMPUTE_ENV.secretsKeyArn] || undefined,
    describerFunction: env[AWS_COMPUTE_ENV.describerFunction] || undefined,
    functions,
    schedules,
    delayedEmits: delayedEmits && {
      scheduleGroup: delayedEmits.scheduleGroup,
      target: delayedEmits.target && {
        delivererArn: delayedEmits.target.functionArn,
        roleArn: delayedEmits.target.roleArn,
      },
    },
    pausedRuns: pausedRuns && {
      scheduleGroup: pausedRuns.scheduleGroup,
      target: pausedRuns.target && { dispatcherArn: pausedRuns.target.functionArn, roleArn: pausedRuns.target.roleArn },
    },
    eventPurgerFunction: env[AWS_COMPUTE_ENV.eventPurgerFunction] || undefined,
    deployFinisherFunction: env[AWS_COMPUTE_ENV.deployFinisherFunction] || undefined,
    npmRegistry: settings[ENV.npmRegistry],
    stream: {
      url: streaming[AWS_COMPUTE_ENV.streamUrl]?.replace(/\/+$/, ""),
      pollIntervalMs: streaming[AWS_COMPUTE_ENV.streamPollMs],
      endMarginMs: streaming[AWS_COMPUTE_ENV.streamEndMarginMs],
    },
    eventBusName: env[AWS_COMPUTE_ENV.eventBusName] || undefined,
    deliveryQueueUrl: env[AWS_COMPUTE_ENV.deliveryQueueUrl] || undefined,
    deliveryRetryQueueUrl: env[AWS_COMPUTE_ENV.deliveryRetryQueueUrl] || undefined,
    runtime: {
      publicUrl: (settings[ENV.publicUrl] ?? "").replace(/\/+$/, ""),
      invocationTimeoutMs: settings[ENV.invocationTimeoutMs],
      emitLimits: emitLimitsFrom(settings),
      workflowLimits: workflowLimitsFrom(settings),
    },
  };
}

/** One-time schedules' settings: the group, and the function they invoke with the role that invokes it. */
interface OneTimeSchedules {
  scheduleGroup: string;
  target: { functionArn: string; roleArn: string } | undefined;
}

/**
 * The settings of one kind of one-time schedule (delayed emits', paused runs'), told apart by the
 * variable naming their target (`targetVariable`): a function that invokes needs the group and the
 * role with it.
 */
function oneTimeSchedulesFrom(env: Env, targetVariable: string, problems: string[]): OneTimeSchedules | undefined {
  const group = env[AWS_COMPUTE_ENV.scheduleGroup] || undefined;
  const functionArn = env[targetVariable] || undefined;
  const roleArn = env[AWS_COMPUTE_ENV.schedulerRoleArn] || undefined;
  if (functionArn === undefined) return group === undefined ? undefined : { scheduleGroup: group, target: undefined };
  const missing = [
    ...(group === undefined ? [AWS_COMPUTE_ENV.scheduleGroup] : []),
    ...(roleArn === undefined ? [AWS_COMPUTE_ENV.schedulerRoleArn] : []),
  ];
  if (group === undefined || roleArn === undefined) {
    problems.push(...missing.map((name) => `${name}: is required with ${targetVariable}`));
    return undefined;
  }
  return { scheduleGroup: group, target: { functionArn, roleArn } };
}

/**
 * The settings of `keys`: all set, or none (undefined); a partly set group adds a problem per
 * missing name. Keys in `shared` may be set alone: only the group's other keys make it present.
 */
function group<K extends keyof typeof AWS_COMPUTE_ENV>(
  env: Env,
  keys: readonly K[],
  problems: string[],
  shared: readonly (keyof typeof AWS_COMPUTE_ENV)[] = [],
): Record<K, string> | undefined {
  const names = keys.map((key) => AWS_COMPUTE_ENV[key]);
  const own = keys.filter((key) => !shared.includes(key)).map((key) => AWS_COMPUTE_ENV[key]);
  if (!own.some((variable) => env[variable] !== undefined)) return undefined;
  const parsed = parseVariables(Object.fromEntries(names.map((variable) => [variable, name])), env);
  if (parsed.problems.length > 0) {
    problems.push(...parsed.problems);
    return undefined;
  }
  const values = parsed.data as Record<string, string>;
  return Object.fromEntries(keys.map((key) => [key, values[AWS_COMPUTE_ENV[key]]])) as Record<K, string>;
}
