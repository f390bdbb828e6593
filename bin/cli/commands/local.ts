import type { CreatedAccount } from "#core/accounts";
import type { Command } from "../command.ts";
import { CliError } from "../errors.ts";

/*
 * The commands that act on a Sluice's own data rather than through its API: run local mode, make
 * a key, add a user. Their modules are loaded only when they run, so that the client commands
 * start without loading the server.
 */

export const start: Command = {
  name: "start",
  summary: "run Sluice locally (REST API on 127.0.0.1:$PORT, default 4000; data in ./.sluice or $SLUICE_DATA_DIR)",
  usage: `Usage: sluice start

Runs local mode: the REST API on 127.0.0.1:\${PORT:-4000}, data in \${SLUICE_DATA_DIR:-./.sluice}
(the settings are environment variables: see the README). On the first start it creates a user,
a workspace, a project and an API key, prints the key and saves it to <data dir>/api-key.
Ctrl-C or SIGTERM stops it.`,
  options: {},
  positionals: { min: 0, max: 0 },
  ownSignals: true,
  async run() {
    const { loadLocalConfig } = await import("#config/env");
    const { logFormatFor, streamLogger } = await import("#adapters/log-output");
    const { startLocalMode } = await import("#local-mode/start");
    const config = loadLocalConfig();
    // A JSON line names its service for the log shipper; a person at a terminal knows it.
    const format = logFormatFor(config.log.format);
    const log = streamLogger({
      level: config.log.level,
      format,
      base: format === "json" ? { service: "sluice" } : {},
      // A line per request: written together per event-loop turn, one write call for a turn's.
      perTurn: true,
    });
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
    // Node opens its inspector (127.0.0.1:9229, running any code sent to it) on SIGUSR1, which any
    // process of this user can send; with a listener it does not. Debug with `node --inspect`.
    process.on("SIGUSR1", () => log.warn("SIGUSR1 ignored: Sluice does not open its inspector on a signal"));
    process.once("SIGINT", () => shutdown("SIGINT"));
    process.once("SIGTERM", () => shutdown("SIGTERM"));
    // Local mode runs until a signal stops it.
    await new Promise(() => {});
  },
};

export const createKey: Command = {
  name: "create-key",
  summary: "make a new API key for the local user and save it to <data dir>/api-key",
  usage: `Usage: sluice create-key

Makes a new API key for local mode's user (in \${SLUICE_DATA_DIR:-./.sluice}), prints it and saves
it to <data dir>/api-key. Works while Sluice runs; the old key keeps working.`,
  options: {},
  positionals: { min: 0, max: 0 },
  async run(_values, _positionals, io) {
    const { loadLocalConfig } = await import("#config/env");
    const { createLocalKey } = await import("#local-mode/bootstrap");
    const config = loadLocalConfig(io.env);
    const { key, file } = await createLocalKey(config.dataDir, config.username);
    io.out.write(`${key}\n(saved to ${file})\n`);
  },
};

function printAccount(out: NodeJS.WritableStream, account: CreatedAccount): void {
  const printed = {
    user_id: account.user.id,
    workspace_id: account.workspace.id,
    project_id: account.project.id,
    api_key: account.apiKey,
  };
  out.write(`${JSON.stringify(printed, null, 2)}\n`);
}

const CREATE_USER_USAGE = `Usage: sluice create-user --username <name> --email <address> [--key <key>] [--table <name> ...]

Creates another user with their own workspace, project and API key, and prints them as JSON (the
key is shown only there). Without --table: in local mode's data dir \${SLUICE_DATA_DIR:-./.sluice},
also while Sluice runs. With --table: in a deployed stack's table, with your own AWS credentials.

  --username <name>   (required)
  --email <address>   (required)
  --key <key>         use this key instead of generating one
  --table <name>      ResourcesTableName output of the SluiceStateful stack
  --region <region>   with --table: AWS region (default: your AWS configuration)
  --endpoint <url>    with --table: DynamoDB endpoint (for DynamoDB Local)`;

export const createUser: Command = {
  name: "create-user",
  summary: "create another user with their own workspace, project and API key (local mode or a stack's table)",
  usage: CREATE_USER_USAGE,
  options: {
    table: { type: "string" },
    username: { type: "string" },
    email: { type: "string" },
    region: { type: "string" },
    endpoint: { type: "string" },
    key: { type: "string" },
  },
  positionals: { min: 0, max: 0 },
  async run(values, _positionals, io) {
    const missing = (["username", "email"] as const).filter((name) => !values[name]);
    if (missing.length > 0)
      throw new CliError(`missing ${missing.map((m) => `--${m}`).join(", ")}\n\n${CREATE_USER_USAGE}`);
    const input = { username: values.username as string, email: values.email as string, apiKey: values.key as string };
    const table = values.table as string | undefined;
    if (table === undefined) {
      const stray = (["region", "endpoint"] as const).filter((name) => values[name] !== undefined);
      if (stray.length > 0)
        throw new CliError(`${stray.map((s) => `--${s}`).join(", ")} only apply with --table\n\n${CREATE_USER_USAGE}`);
      const { loadLocalConfig } = await import("#config/env");
      const { createLocalUser } = await import("#local-mode/bootstrap");
      return printAccount(io.out, await createLocalUser(loadLocalConfig(io.env).dataDir, input));
    }
    if (table === "") throw new CliError(`--table needs a table name\n\n${CREATE_USER_USAGE}`);
    const { createAccount } = await import("#core/accounts");
    const { DynamoDBClient } = await import("@aws-sdk/client-dynamodb");
    const { documentClient } = await import("#adapters/aws/dynamodb-client");
    const { DynamoDbIdentityStore } = await import("#adapters/aws/dynamodb-identity-store");
    const { systemClock } = await import("#core/ports/clock");
    const { randomIdGenerator } = await import("#core/ports/id-generator");
    const client = new DynamoDBClient({ region: values.region as string, endpoint: values.endpoint as string });
    try {
      const identity = new DynamoDbIdentityStore(documentClient(client), table);
      printAccount(
        io.out,
        await createAccount({ identity, clock: systemClock, ids: randomIdGenerator(systemClock) }, input),
      );
    } finally {
      client.destroy();
    }
  },
};
