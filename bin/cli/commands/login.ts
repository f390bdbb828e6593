import { createInterface } from "node:readline";
import { CLIENT_OPTIONS } from "../args.ts";
import { apiClient } from "../client.ts";
import type { Command, Io } from "../command.ts";
import { CliError } from "../errors.ts";
import { printJson, printText } from "../output.ts";
import { DEFAULT_PROFILE, normalizeUrl, profileFile, saveProfile } from "../profile.ts";

const DEFAULT_URL = "http://127.0.0.1:4000";

/** Asks `question` on the terminal; with `hidden`, what is typed is not echoed (an API key). */
function ask(io: Io, question: string, hidden = false): Promise<string> {
  const rl = createInterface({ input: io.stdin, output: io.err, terminal: true });
  if (hidden) {
    // readline echoes through this method; after the question is shown, echo nothing.
    const echo = rl as unknown as { _writeToOutput: (text: string) => void };
    let shown = false;
    const original = echo._writeToOutput.bind(rl);
    echo._writeToOutput = (text) => {
      if (!shown) original(text);
    };
    io.err.write(question);
    shown = true;
  }
  return new Promise((resolve) => {
    rl.question(hidden ? "" : question, (answer) => {
      rl.close();
      if (hidden) io.err.write("\n");
      resolve(answer.trim());
    });
  });
}

export const login: Command = {
  name: "login",
  summary: "save the URL and API key of a Sluice (local mode or a deployed stack) as a profile",
  usage: `Usage: sluice login [--url <url>] [--key <key>] [--stream-url <url>] [--profile <name>]

Checks the key against the Sluice at <url> (GET /v1/users/me) and saves both as a profile, in
$XDG_CONFIG_HOME/sluice/config.json (default ~/.config/sluice/config.json), readable by you only
(mode 0600). The key is never printed. Without --url or --key it asks for them at a terminal.
SLUICE_URL and SLUICE_API_KEY, when set, take the place of the profile's in every other command.

  --url <url>          the root URL (local mode: http://127.0.0.1:4000; a stack: its ApiUrl output)
  --key <key>          the API key (local mode: the contents of .sluice/api-key)
  --stream-url <url>   a stack's StreamUrl output, where the live stream is (default: --url)
  --profile <name>     save under this name (default: "default"); other commands take --profile too
  --json               print {profile, file, url, user} as JSON`,
  options: { ...CLIENT_OPTIONS, url: { type: "string" }, key: { type: "string" }, "stream-url": { type: "string" } },
  positionals: { min: 0, max: 0 },
  async run(values, _positionals, io) {
    const atTerminal = io.stdin.isTTY === true;
    const need = (option: string) => {
      if (!atTerminal) throw new CliError(`login needs --${option} when not run at a terminal`);
    };
    let url = values.url as string | undefined;
    if (url === undefined) {
      need("url");
      url = (await ask(io, `Sluice URL [${DEFAULT_URL}]: `)) || DEFAULT_URL;
    }
    const root = normalizeUrl(url);
    let key = values.key as string | undefined;
    if (key === undefined) {
      need("key");
      key = await ask(io, "API key (not shown): ", true);
    }
    if (!key) throw new CliError("an API key is needed");
    const streamUrl = values["stream-url"] as string | undefined;
    const client = apiClient({ url: root, streamUrl: root, apiKey: key, keyFrom: "profile" });
    const me = await client
      .call<{ data: { id: string; username: string } }>("GET", "/users/me")
      .catch((error: CliError & { status?: number }) => {
        throw new CliError(
          error.status === 401
            ? `${root} refused this API key (401): nothing saved`
            : `${error.message}: nothing saved`,
        );
      });
    const name = (values.profile as string | undefined) ?? DEFAULT_PROFILE;
    const file = profileFile(io.home, io.env);
    await saveProfile(file, name, {
      url: root,
      api_key: key,
      ...(streamUrl ? { stream_url: normalizeUrl(streamUrl) } : {}),
    });
    if (values.json) printJson(io, { profile: name, file, url: root, user: me.data.username });
    else printText(io, `Logged in to ${root} as ${me.data.username}; profile "${name}" saved in ${file}\n`);
  },
};
