/**
 * The IAM actions each function of the service stack holds, spelled out: function-rights.test.ts
 * checks the synthesized template against this table (so a new grant is added here, deliberately),
 * and docs/aws.md shows it as rendered by {@link renderRightsTable}.
 */

/** Every function writes to its own log group, and nowhere else. */
export const LOG_ACTIONS = ["logs:CreateLogStream", "logs:PutLogEvents"];
/** What `access.resources` gives on the resources table, and nothing on any other. */
export const TABLE = {
  read: ["dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:Query"],
  write: [
    "dynamodb:BatchGetItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:DeleteItem",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
  ],
} as const;

export interface FunctionRights {
  /** A route's name (functions/http/<name>.ts), or an internal function's name below. */
  readonly name: string;
  readonly table?: keyof typeof TABLE;
  /** The actions besides its logs and the table, sorted. */
  readonly actions: readonly string[];
}

const SEALS = ["kms:Decrypt", "kms:GenerateDataKey"];
/** Store events and publish them (the bus, and the queue of what EventBridge refused). */
const APPENDS = ["events:PutEvents", "sqs:GetQueueUrl", "sqs:SendMessage"];
const RUNS = ["lambda:GetFunction", "lambda:InvokeFunction"];
/** Installs components' packages: read and store installed trees (`npm-trees/*` of the stack's bucket). */
const NPM_TREES = ["s3:GetObject", "s3:PutObject"];
/** Serve runs' `$.files` calls: sign URLs to read and write the File Store bucket's objects, list it, delete. */
const FILE_STORES = ["s3:DeleteObject", "s3:GetObject", "s3:ListBucket", "s3:PutObject"];
const CREATES = [
  "iam:PassRole",
  "lambda:CreateFunction",
  "lambda:GetLayerVersion",
  "lambda:TagResource",
  "lambda:UpdateFunctionCode",
  "lambda:UpdateFunctionConfiguration",
];
/** Schedule delayed emits (one-time schedules invoking the deliverer, with the scheduler role) and cancel them. */
const DELAYS = ["iam:PassRole", "scheduler:CreateSchedule", "scheduler:DeleteSchedule"];
/**
 * Pause workflow runs (one-time schedules invoking the paused-run dispatcher, moved when a run
 * pauses again under the same id) and forget them.
 */
const PAUSES = ["iam:PassRole", "scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:UpdateSchedule"];
const CONSUMES_SQS = [
  "sqs:ChangeMessageVisibility",
  "sqs:DeleteMessage",
  "sqs:GetQueueAttributes",
  "sqs:GetQueueUrl",
  "sqs:ReceiveMessage",
];

const reads = (name: string): FunctionRights => ({ name, table: "read", actions: [] });
const writes = (name: string, ...actions: string[][]): FunctionRights => ({
  name,
  table: "write",
  actions: [...new Set(actions.flat())].sort(),
});

/** Route functions, by route name. */
export const ROUTE_RIGHTS: readonly FunctionRights[] = [
  ...[
    "get-me",
    "get-workspace",
    "list-workspace-projects",
    "get-source",
    "list-user-sources",
    "list-workspace-sources",
    "list-source-events",
    "list-user-webhooks",
    "get-webhook",
    "list-user-subscriptions",
    "list-workspace-subscriptions",
    "get-workflow",
    "list-user-workflows",
    "list-workspace-workflows",
    "list-workflow-events",
    "list-workflow-errors",
    "list-dead-letters",
    "list-workflow-runs",
    "list-workflow-dead-letters",
    "list-workspace-data-stores",
    "list-data-store-records",
    "list-apps",
    "get-app",
    "list-workspace-accounts",
    "list-user-accounts",
  ].map(reads),
  { name: "get-openapi", actions: [] },
  // access.compute "describe": the describer only (a registry component is saved on first read).
  ...["create-component", "get-component", "connect-get-component", "get-registry-component"].map((name) =>
    writes(name, ["lambda:InvokeFunction"]),
  ),
  // "probe": a probe source's function, created and invoked; the credentials of the accounts its
  // app props name opened (`$auth`), nothing sealed.
  ...[
    "configure-component-prop",
    "reload-component-props",
    "connect-configure-component-prop",
    "connect-reload-component-props",
  ].map((name) => writes(name, RUNS, CREATES, ["kms:Decrypt"])),
  // "run": the same on a probe workflow's function too (an action run on its own).
  writes("connect-run-action", RUNS, CREATES, ["kms:Decrypt"]),
  // "deploy": sources', workflows' functions and timers; hooks that seal, open and store events
  // (their delayed emits scheduled: CreateSchedule and PassRole, which the timers need too).
  // Their packages' installed trees are read and stored.
  ...["create-source", "update-source", "create-workflow", "update-workflow"].map((name) =>
    writes(name, RUNS, CREATES, SEALS, APPENDS, NPM_TREES, [
      "lambda:DeleteFunction",
      "scheduler:CreateSchedule",
      "scheduler:DeleteSchedule",
      "scheduler:UpdateSchedule",
    ]),
  ),
  // "remove": deactivate hooks (or the deploy finisher invoked, for one the request has no time
  // for), then the functions and schedules go; nothing is created. Deleting a workflow also
  // deletes its paused runs' schedules (the same right; creating one does too, on a rollback).
  ...["delete-source", "delete-workflow"].map((name) =>
    writes(name, RUNS, SEALS, APPENDS, ["lambda:DeleteFunction", "scheduler:DeleteSchedule"]),
  ),
  // Invokes the event purger; cancels the delayed emits of the `$in` events it deletes.
  writes("delete-source-events", ["lambda:InvokeFunction", "scheduler:DeleteSchedule"]),
  ...["create-webhook", "rotate-webhook-secret"].map((name) => writes(name, SEALS)),
  // Accounts' credentials are sealed; a read with include_credentials=1 opens them and may store
  // refreshed OAuth tokens, sealed again.
  ...["create-account", "get-account", "update-account"].map((name) => writes(name, SEALS)),
  // Connected accounts: seal PKCE verifiers and credentials, open them to refresh and test. The
  // callback and the test also call the provider over the internet (no AWS right needed).
  ...["connect-account", "finish-account-connect", "test-account"].map((name) => writes(name, SEALS)),
  // Public (the grant is the key): opens grants, seals nothing.
  writes("serve-data-store-call", ["kms:Decrypt"], FILE_STORES),
  ...[
    "delete-webhook",
    "create-subscription",
    "delete-subscription",
    "create-auto-subscription",
    "clear-data-store",
    "delete-data-store",
    "delete-account",
  ].map((name) => writes(name)),
  // The delivery queue.
  ...["replay-dead-letter", "replay-dead-letters", "replay-workflow-dead-letter", "replay-workflow-dead-letters"].map(
    (name) => writes(name, ["sqs:SendMessage"]),
  ),
];

/** The other functions of the stack, by the names the test gives their constructs. */
export const INTERNAL_RIGHTS: readonly FunctionRights[] = [
  { name: "route-not-found", actions: [] },
  // Evaluates untrusted code: its logs, nothing else.
  { name: "describer", actions: [] },
  // Run sources and workflows, queue runs (the source runner), queue their sends' deliveries.
  // Schedule the delayed emits of the runs they apply.
  writes("endpoint-function", RUNS, SEALS, APPENDS, DELAYS),
  writes("timer-invoker", RUNS, SEALS, APPENDS, DELAYS),
  // Lambda's on-failure destination needs GetQueueAttributes on the failed-runs queue. It runs
  // workflows, so pauses them (and moves a pause's schedule when a run pauses again).
  writes("source-runner", RUNS, SEALS, APPENDS, DELAYS, PAUSES, ["sqs:GetQueueAttributes"]),
  reads("source-stream"),
  { name: "sse-redirect", actions: [] },
  writes("event-purger"),
  // Consumes the unpublished-events queue; queues runs and deliveries.
  {
    name: "dispatcher",
    table: "read",
    actions: [...new Set([...CONSUMES_SQS, "lambda:InvokeFunction", "sqs:SendMessage"])].sort(),
  },
  // Consumes the delivery and retry queues, sends to the retry queue, opens signing secrets.
  writes("deliverer", CONSUMES_SQS, ["kms:Decrypt", "sqs:SendMessage"]),
  // Removes sources whose deploy was interrupted: no hook runs, nothing is created or invoked.
  writes("deploy-sweeper", ["lambda:DeleteFunction", "scheduler:DeleteSchedule"]),
  // Emits a delayed emit when its schedule fires: stores and publishes it.
  writes("delayed-emit-deliverer", APPENDS),
  // Takes a paused run when its schedule fires, and queues its continuation on the source runner.
  writes("paused-run-dispatcher", ["lambda:InvokeFunction"]),
  // Finishes what a deploy's request could not fit: the function, the hooks, the timer; on a
  // failure, removes what it made. No describer: the component was read in the request.
  // Renews OAuth tokens before they expire: reads and writes the accounts, opens and seals them,
  // and stores and publishes a refusal's notice on the sources' $errors.
  writes("account-refresher", SEALS, APPENDS),
  writes("deploy-finisher", RUNS, CREATES, SEALS, APPENDS, NPM_TREES, [
    "lambda:DeleteFunction",
    "scheduler:CreateSchedule",
    "scheduler:DeleteSchedule",
    "scheduler:UpdateSchedule",
  ]),
];

/** Every action a row grants, sorted. */
export function actionsOfRow(row: FunctionRights): string[] {
  return [...new Set([...LOG_ACTIONS, ...(row.table ? TABLE[row.table] : []), ...row.actions])].sort();
}

/** The Markdown table of docs/aws.md ("Rights of each function"). */
export function renderRightsTable(describe: (name: string) => string): string {
  const rows = [...ROUTE_RIGHTS, ...INTERNAL_RIGHTS].map(
    (row) =>
      `| ${describe(row.name)} | ${row.table ?? "-"} | ${row.actions.length ? row.actions.map((a) => `\`${a}\``).join(", ") : "-"} |`,
  );
  return ["| function | table | other actions |", "|---|---|---|", ...rows].join("\n");
}
