import { spawn } from "node:child_process";
import { ENV } from "#config/env-names";
import { CLIENT_OPTIONS, CLIENT_OPTIONS_HELP } from "../args.ts";
import type { ApiClient } from "../client.ts";
import type { Command, Io } from "../command.ts";
import { CliError, UsageError } from "../errors.ts";
import { printJson, printText } from "../output.ts";
import { connect } from "../session.ts";

const USAGE = `Usage: sluice accounts connect <app> [--name <name>] [--wait <seconds>]

Connects an account of an OAuth app (docs/accounts.md "OAuth"): asks Sluice for the provider's
authorization URL, prints it and opens it in a browser ($BROWSER, else the system's opener: open,
xdg-open or start; nothing happens where there is none: open the printed URL yourself). Once you
approve, the provider sends the browser back to Sluice, which creates the account; this command
waits for it and prints its id. Key-based apps are connected with POST /v1/accounts instead.

Options:
  --name <name>       the account's name (default: the app's name)
  --wait <seconds>    how long to wait for the account (default: 600, the authorization's lifetime)
${CLIENT_OPTIONS_HELP}`;

/** What `POST /v1/accounts/connect` answers. */
interface ConnectStarted {
  authorize_url: string;
  expires_at: string;
  app: { id: string; name_slug: string; name: string };
  workspace_id: string;
}

interface AccountItem {
  id: string;
  name: string;
}

/** How often the workspace's accounts are listed while waiting. */
const POLL_MS = 1_000;

/**
 * The command that opens `url` here: `$BROWSER` when set (as many tools read it), else the
 * platform's own. The URL is one argument, never a shell word.
 */
function opener(env: Io["env"], url: string): [string, string[]] {
  const browser = env[ENV.browser];
  if (browser) return [browser, [url]];
  if (process.platform === "darwin") return ["open", [url]];
  if (process.platform === "win32") return ["cmd", ["/c", "start", '""', url]];
  return ["xdg-open", [url]];
}

/** Opens `url` in a browser if this machine has a way to; never fails (the URL is printed anyway). */
function openInBrowser(io: Io, url: string): void {
  const [command, args] = opener(io.env, url);
  try {
    const child = spawn(command, args, { stdio: "ignore", detached: true });
    child.on("error", () => {});
    child.unref();
  } catch {
    // No opener: the user opens the printed URL.
  }
}

/** The workspace's accounts of `app` (the spec's list, filtered by app). */
const accountsOf = (api: ApiClient, workspaceId: string, app: string) =>
  api.all<AccountItem>(`/workspaces/${workspaceId}/accounts`, { query: app });

/** `sluice accounts connect <app>`: see {@link USAGE} and docs/cli.md. */
export const accounts: Command = {
  name: "accounts",
  summary: "connect an account of an OAuth app: opens the provider's page, waits for the account",
  usage: USAGE,
  options: { ...CLIENT_OPTIONS, name: { type: "string" }, wait: { type: "string" } },
  positionals: { min: 2, max: 2 },
  async run(values, [action = "", app = ""], io) {
    if (action !== "connect") throw new UsageError(`accounts: unknown action ${JSON.stringify(action)}\n\n${USAGE}`);
    const waitSeconds = values.wait === undefined ? 600 : Number(values.wait);
    if (!Number.isInteger(waitSeconds) || waitSeconds < 1) {
      throw new UsageError(`accounts connect: --wait must be a whole number of seconds\n\n${USAGE}`);
    }
    const api = await connect(values, io);
    const body = { app, ...(values.name === undefined ? {} : { name: values.name }) };
    const started = (await api.call<{ data: ConnectStarted }>("POST", "/accounts/connect", { body })).data;
    // The accounts there before, so that the one this connect makes is told apart.
    const before = new Set((await accountsOf(api, started.workspace_id, started.app.name_slug)).map((a) => a.id));
    const say = (text: string) => (values.json ? io.err.write(text) : printText(io, text));
    say(`Open this URL in a browser to connect ${started.app.name}:\n  ${started.authorize_url}\n`);
    openInBrowser(io, started.authorize_url);
    io.err.write(`Waiting for the provider to send the browser back to Sluice (up to ${waitSeconds} s)...\n`);
    const deadline = Date.now() + waitSeconds * 1000;
    while (!io.signal.aborted && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      const made = (await accountsOf(api, started.workspace_id, started.app.name_slug)).find((a) => !before.has(a.id));
      if (made !== undefined) {
        if (values.json) printJson(io, made);
        else printText(io, `Connected account ${made.id} ("${made.name}")\n`);
        return;
      }
    }
    throw new CliError(
      `no account of ${started.app.name_slug} appeared within ${waitSeconds} s: the authorization was not completed (it expires at ${started.expires_at}); run the command again`,
    );
  },
};
