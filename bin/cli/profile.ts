import { chmod, mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { loadCliEnv } from "#config/cli-env";
import { CliError } from "./errors.ts";

/** A saved way to reach a Sluice: local mode or a deployed stack. */
export interface Profile {
  /** The root URL, without `/v1` (`http://127.0.0.1:4000`, or a stack's API URL). */
  url: string;
  api_key: string;
  /** The live stream's root when it is elsewhere (a stack's `StreamUrl` output); default `url`. */
  stream_url?: string;
}

/** Everything the CLI needs to call a Sluice. */
export interface Target {
  url: string;
  streamUrl: string;
  apiKey: string;
  /** Where the key came from, for the message when it is refused. */
  keyFrom: "SLUICE_API_KEY" | "profile";
}

export const DEFAULT_PROFILE = "default";
export const PROFILE_FILE_NAME = "config.json";

/** The profile file: `$XDG_CONFIG_HOME/sluice/config.json`, else `~/.config/sluice/config.json`. */
export const profileFile = (home: string, env: Record<string, string | undefined>) =>
  join(loadCliEnv(home, env).configDir, PROFILE_FILE_NAME);

/** A root URL as the profile keeps it: no trailing slash, no `/v1` (accepted, as users paste the API base). */
export function normalizeUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(`${JSON.stringify(url)} is not a URL; expected one such as http://127.0.0.1:4000`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new CliError(`${JSON.stringify(url)} is not an http or https URL`);
  if (parsed.username || parsed.password || parsed.search || parsed.hash)
    throw new CliError(`${JSON.stringify(url)}: give the base URL only (no credentials, query or fragment)`);
  return `${parsed.origin}${parsed.pathname}`.replace(/\/+$/, "").replace(/\/v1$/, "");
}

/** The profiles in `file`, by name; none when the file does not exist yet. */
export async function readProfiles(file: string): Promise<Record<string, Profile>> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new CliError(`cannot read ${file}: ${(error as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as { profiles?: Record<string, Profile> };
    return parsed.profiles ?? {};
  } catch {
    throw new CliError(`${file} is not valid JSON: fix it, or delete it and run \`sluice login\` again`);
  }
}

/**
 * Saves `profile` under `name` in `file`, keeping the others. The file holds API keys, so it is
 * written readable by its owner only (0600, in a 0700 directory) whatever the umask, and replaced
 * whole (a temporary file renamed over it), so a failed write never leaves half a file.
 */
export async function saveProfile(file: string, name: string, profile: Profile): Promise<void> {
  const profiles = await readProfiles(file);
  profiles[name] = profile;
  const dir = join(file, "..");
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify({ profiles }, null, 2)}\n`, { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, file);
}

/**
 * Whom to call: `SLUICE_URL` and `SLUICE_API_KEY` over the named profile's URL and key. Fails
 * saying what to do when neither gives both.
 */
export async function resolveTarget(
  home: string,
  env: Record<string, string | undefined>,
  name = DEFAULT_PROFILE,
): Promise<Target & { warning?: string }> {
  const overrides = loadCliEnv(home, env);
  const file = profileFile(home, env);
  const profile = (await readProfiles(file))[name];
  if (name !== DEFAULT_PROFILE && profile === undefined)
    throw new CliError(`no profile named ${JSON.stringify(name)} in ${file}: run \`sluice login --profile ${name}\``);
  const url = overrides.url ?? profile?.url;
  const apiKey = overrides.apiKey ?? profile?.api_key;
  if (url === undefined || apiKey === undefined)
    throw new CliError(
      "not logged in: run `sluice login` (or set SLUICE_URL and SLUICE_API_KEY)" +
        (url === undefined ? "" : "; SLUICE_URL is set but no API key is known"),
    );
  const root = normalizeUrl(url);
  const warning = profile && (await looseMode(file)) ? `warning: ${file} is readable by others; chmod 600 it` : "";
  return {
    url: root,
    streamUrl: overrides.url === undefined && profile?.stream_url ? normalizeUrl(profile.stream_url) : root,
    apiKey,
    keyFrom: overrides.apiKey === undefined ? "profile" : "SLUICE_API_KEY",
    ...(warning ? { warning } : {}),
  };
}

async function looseMode(file: string): Promise<boolean> {
  try {
    return ((await stat(file)).mode & 0o077) !== 0;
  } catch {
    return false;
  }
}
