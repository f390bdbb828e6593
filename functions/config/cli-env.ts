import { ENV } from "./env-names.ts";

/*
 * The `sluice` command line's settings. Read without zod, unlike env.ts's loaders: a command starts
 * in about a second, and loading zod alone took 0.6 s of it here. The URL is checked where it is
 * used (bin/cli/profile.ts `normalizeUrl`), with a message that says what is wrong.
 */

/** What the `sluice` CLI reads from its environment: overrides of the saved profile, and where the profile lives. */
export interface CliEnv {
  /** `SLUICE_URL`, over the profile's URL. */
  url: string | undefined;
  /** `SLUICE_API_KEY`, over the profile's key. */
  apiKey: string | undefined;
  /** The folder of the profile file: `$XDG_CONFIG_HOME/sluice`, else `<home>/.config/sluice`. */
  configDir: string;
}

/** The `sluice` CLI's settings; `home` is the user's home folder (the caller's `os.homedir()`). An empty variable counts as unset. */
export function loadCliEnv(home: string, env: Record<string, string | undefined> = process.env): CliEnv {
  const set = (name: string) => (env[name] ? env[name] : undefined);
  return {
    url: set(ENV.cliUrl),
    apiKey: set(ENV.apiKey),
    configDir: `${set(ENV.xdgConfigHome) ?? `${home}/.config`}/sluice`,
  };
}
