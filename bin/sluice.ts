#!/usr/bin/env -S npx tsx
import { parseArgs } from "node:util";
import { logFormatFor, streamLogger } from "#adapters/log-output";
import { loadLocalConfig } from "#config/env";
import { type CreatedAccount, createAccount } from "#core/accounts";
import { createLocalKey, createLocalUser } from "#local-mode/bootstrap";
import { startLocalMode } from "#local-mode/start";

const USAGE = `Usage: sluice <command> [options]

Commands:
  start          Run Sluice locally (REST API on 127.0.0.1:\${PORT:-4000}, data in \${SLUICE_DATA_DIR:-./.sluice}).
  create-key     Make a new API key for the local user and save it to <data dir>/api-key.
  create-user    Create another user with their own workspace, project and API key, and print them
                 as JSON (the key is shown only there). Without --table: in local mode's data dir
                 \${SLUICE_DATA_DIR:-./.sluice}, also while Sluice runs. With --table: in a deployed
                 stack's table, with your own AWS credentials.
                   --username <name>   (required)
                   --email <address>   (required)
                   --key <key>         use this key instead of generating one
                   --table <name>      ResourcesTableName output of the SluiceStateful stack
                   --region <region>   with --table: AWS region (default: your AWS configuration)
                   --endpoint <url>    with --table: DynamoDB endpoint (for DynamoDB Local)
`;

async function start(): Promise<void> {
  const config = loadLocalConfig();
  // A JSON line names its service for the log shipper; a person at a terminal knows it.
  const format = logFormatFor(config.log.format);
  const log = streamLogger({ level: config.log.level, format, base: format === "json" ? { service: "sluice" } : {} });
  const running = await startLocalMode(config, log);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("shutting down", { signal });
    running.stop().then(
      () => process.exit(0),
      (error) => {
        log.error("shutdown failed", { error: String(error) });
        process.exit(1);
      },
    );
  };
  process.once("SIGINT", () => shutdown("SIGINT"));
  process.once("SIGTERM", () => shutdown("SIGTERM"));
}

async function createKey(): Promise<void> {
  const config = loadLocalConfig();
  const { key, file } = await createLocalKey(config.dataDir, config.username);
  process.stdout.write(`${key}\n(saved to ${file})\n`);
}

function printAccount(account: CreatedAccount): void {
  const printed = {
    user_id: account.user.id,
    workspace_id: account.workspace.id,
    project_id: account.project.id,
    api_key: account.apiKey,
  };
  process.stdout.write(`${JSON.stringify(printed, null, 2)}\n`);
}

async function createUser(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      table: { type: "string" },
      username: { type: "string" },
      email: { type: "string" },
      region: { type: "string" },
      endpoint: { type: "string" },
      key: { type: "string" },
    },
  });
  const missing = (["username", "email"] as const).filter((name) => !values[name]);
  if (missing.length > 0) throw new Error(`missing ${missing.map((m) => `--${m}`).join(", ")}\n\n${USAGE}`);
  const input = { username: values.username!, email: values.email!, apiKey: values.key };
  if (values.table === undefined) {
    const stray = (["region", "endpoint"] as const).filter((name) => values[name] !== undefined);
    if (stray.length > 0)
      throw new Error(`${stray.map((s) => `--${s}`).join(", ")} only apply with --table\n\n${USAGE}`);
    return printAccount(await createLocalUser(loadLocalConfig().dataDir, input));
  }
  if (values.table === "") throw new Error(`--table needs a table name\n\n${USAGE}`);
  const { DynamoDBClient } = await import("@aws-sdk/client-dynamodb");
  const { documentClient } = await import("#adapters/aws/composition");
  const { DynamoDbIdentityStore } = await import("#adapters/aws/dynamodb-identity-store");
  const { systemClock } = await import("#core/ports/clock");
  const { randomIdGenerator } = await import("#core/ports/id-generator");
  const client = new DynamoDBClient({ region: values.region, endpoint: values.endpoint });
  try {
    const identity = new DynamoDbIdentityStore(documentClient(client), values.table);
    printAccount(await createAccount({ identity, clock: systemClock, ids: randomIdGenerator(systemClock) }, input));
  } finally {
    client.destroy();
  }
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === "start") return start();
  if (command === "create-key") return createKey();
  if (command === "create-user") return createUser(rest);
  process.stderr.write(USAGE);
  process.exitCode = command === undefined || command === "help" || command === "--help" ? 0 : 2;
}

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`sluice: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
