import type { AddressInfo } from "node:net";
import { type DataDirLock, lockDataDir, prepareDataDir } from "#adapters/local/data-dir";
import type { LocalConfig } from "#config/env";
import { nearPath } from "#config/near-path";
import type { Logger } from "#core/ports/logger";
import { routes } from "#http/routes";
import { localDeps } from "#local-mode/composition";
import { ensureFirstAccount } from "./bootstrap.ts";
import { createLocalServer } from "./server.ts";

export interface RunningLocalMode {
  /** Base URL of the REST API, ending in `/v1`. */
  baseUrl: string;
  /** Stops accepting requests, lets running ones finish (up to `graceMs`), closes the store. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts local mode: takes the data dir (refused while another server holds it, before anything in
 * it is touched), opens it, makes the first account if needed, serves the API.
 */
export async function startLocalMode(
  config: LocalConfig,
  log: Logger,
  print: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
): Promise<RunningLocalMode> {
  prepareDataDir(config.dataDir);
  const lock = lockDataDir(config.dataDir);
  try {
    return await serve(config, log, print, lock);
  } catch (error) {
    lock.release();
    throw error;
  }
}

async function serve(
  config: LocalConfig,
  log: Logger,
  print: (line: string) => void,
  lock: DataDirLock,
): Promise<RunningLocalMode> {
  const local = await localDeps(config, log);
  const { deps } = local;
  const { server, streams } = createLocalServer(routes, deps, { bus: local.bus, files: local.files });
  let outcome: Awaited<ReturnType<typeof ensureFirstAccount>>;
  try {
    outcome = await ensureFirstAccount(deps, config);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(config.port, config.host, () => resolve());
    });
  } catch (error) {
    // A taken port: what started in the data dir stops before the hold on it is let go.
    await local.close(0);
    throw error;
  }
  const { port } = server.address() as AddressInfo;
  const baseUrl = `http://${config.host}:${port}/v1`;
  // With PORT=0 the port is known only now; endpoints are derived from it when not configured.
  if (config.runtime.publicUrl === undefined) deps.runtime.publicUrl = `http://${config.host}:${port}`;
  await local.startTimers();
  const keyFile = nearPath(outcome.keyFile);

  if (outcome.kind === "created") {
    print(`Created your API key (shown once, also saved to ${keyFile}):\n\n  ${outcome.apiKey}\n`);
  } else if (outcome.kind === "existing" && !outcome.keyFileExists) {
    print(`The API key file ${keyFile} is gone; make a new key with: npm run sluice -- create-key`);
  }
  const keySource = outcome.kind === "from-env" ? "from SLUICE_API_KEY" : `in ${keyFile}`;
  print(`Sluice is ready at ${baseUrl} (API key ${keySource}; data in ${nearPath(config.dataDir, "./")})`);

  return {
    baseUrl,
    async stop(graceMs = 5_000) {
      // Live streams never finish on their own: end them so the server's close does not wait for them.
      streams.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const force = setTimeout(() => server.closeAllConnections(), graceMs);
      await closed;
      clearTimeout(force);
      await local.close(graceMs);
      lock.release();
    },
  };
}
