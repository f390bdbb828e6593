/**
 * The names and limits that the infrastructure (`lib/`) and the functions both spell: the table,
 * the event bus's entries, the queues, the timer invoker's input and the npm packages Sluice
 * ships. One pure module (it imports nothing), so that the stacks read them without loading an
 * adapter, an AWS SDK client or a Lambda entry, and the two sides cannot disagree.
 */

/** The resources table: one item collection per owner record, generic `pk`/`sk` string keys. */
export const RESOURCES_TABLE = {
  /** Logical id and construct id in the stateful stack. */
  id: "Resources",
  partitionKey: "pk",
  sortKey: "sk",
  /** The TTL attribute (epoch seconds), written on event items when events expire. */
  timeToLiveAttribute: "expiresAt",
} as const;

/** `source` of every entry the event bus publishes; the fan-out rule matches it. */
export const EVENT_SOURCE = "sluice.events";
/** `detail-type` of every entry the event bus publishes; the fan-out rule matches it. */
export const EVENT_DETAIL_TYPE = "event.stored";

/** The SQS queue that takes the entries EventBridge keeps refusing, named after the bus. */
export const fallbackQueueNameFor = (busName: string) => `${busName}-unpublished-events`;

/** The queues' `MaximumMessageSize` (set by the stack): 1 MiB, SQS's largest. */
export const SQS_MAX_MESSAGE_BYTES = 1024 * 1024;

/**
 * What EventBridge Scheduler sends the timer invoker: the timer (a source's, `{sourceId}`, or a
 * workflow's timer trigger, `{workflowId, timerId}`), `scheduledAt` filled in by Scheduler (ISO
 * 8601), and for an interval under a minute `everySeconds` and `times`.
 */
export type TimerInvokerInput = ({ sourceId: string } | { workflowId: string; timerId: string }) & {
  scheduledAt?: string | undefined;
  everySeconds?: number | undefined;
  times?: number | undefined;
};

/**
 * What EventBridge Scheduler sends the delayed emit deliverer (`SchedulerDelayedEmits`): the key of
 * one waiting delayed emit, whose body the deliverer reads from the table.
 */
export interface DelayedEmitDelivererInput {
  sourceId: string;
  inEventId: string;
}

/**
 * What EventBridge Scheduler sends the paused-run dispatcher (`SchedulerPausedRuns`): the paused
 * run whose time came, by its run id.
 */
export interface PausedRunDispatcherInput {
  pauseId: string;
}

/** The npm CLI package Sluice depends on, to install the packages it does not ship. */
export const NPM_CLI_PACKAGE = "npm";

/**
 * Packages served from Sluice's own `node_modules`: `@pipedream/platform`, which most registry
 * components import, and its runtime dependencies, which components also import directly.
 */
export const SHIPPED_NPM_PACKAGES: readonly string[] = [
  "@pipedream/platform",
  "axios",
  "fp-ts",
  "io-ts",
  "mime-types",
  "querystring",
  "uuid",
];

/**
 * Where a deploying route's bundle carries the operator's registry directory (`-c registryDir`),
 * next to the shipped `registry/`: `<task root>/registry-dir/`, served by key before it.
 */
export const REGISTRY_DIR_ASSET = "registry-dir";

/**
 * Where a function's bundle carries the app catalog: `<task root>/apps/apps.json` (a copy of the
 * shipped `registry/apps.json`) and, with `-c appsFile`, the operator's file as
 * `<task root>/apps/operator-apps.json` (lib/constructs/apps-asset.ts).
 */
export const APPS_ASSET = "apps";
/** The shipped catalog's name inside a registry directory (`registry/apps.json`) and in {@link APPS_ASSET}. */
export const APPS_FILE_NAME = "apps.json";
/** The operator's apps file (`-c appsFile`) inside {@link APPS_ASSET}. */
export const OPERATOR_APPS_FILE = "operator-apps.json";

/**
 * esbuild's package of its native binary for a platform and architecture (`@esbuild/linux-arm64`):
 * the stack ships Lambda's in the functions that bundle components, which look for it there
 * (functions/adapters/aws/native-esbuild.ts).
 */
export function esbuildBinaryPackage(target: { readonly platform: string; readonly arch: string }): string {
  return `@esbuild/${target.platform}-${target.arch}`;
}

/** The prefix of installed npm trees in the service stack's bucket (`npm-trees/<key>.zip`); the grant names it too. */
export const NPM_TREES_PREFIX = "npm-trees/";

/**
 * The time part of a probe's id (`formatId(kind, 0, ...)`): the dynamic props probes' sources and
 * the run action's workflows (`functions/core/run-action.ts`). No real resource has it, so the
 * stack can grant rights on `sluice-<stage>-p_<this>*` functions without reaching real workflows'.
 */
export const PROBE_ID_TIME = "0000000000";
