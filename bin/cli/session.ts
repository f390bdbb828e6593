import { type ApiClient, apiClient } from "./client.ts";
import type { Io, Values } from "./command.ts";
import { resolveTarget } from "./profile.ts";

/** A client for the Sluice the command line names (`--profile`, `SLUICE_URL`, `SLUICE_API_KEY`). */
export async function connect(values: Values, io: Io): Promise<ApiClient> {
  const target = await resolveTarget(io.home, io.env, values.profile as string | undefined);
  if (target.warning) io.err.write(`${target.warning}\n`);
  return apiClient(target);
}
