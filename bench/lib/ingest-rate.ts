import { monoMs } from "./clock.ts";
import { numberedBody, waitForCount } from "./common.ts";
import { type LoadResult, runLoad } from "./load.ts";
import type { BenchServer } from "./processes.ts";
import type { ScenarioContext } from "./scenario.ts";
import type { DeployedSource, SluiceApi } from "./sluice-api.ts";

export interface IngestMeasurement {
  load: LoadResult;
  /** Events stored by the load (counted through the API afterwards). */
  stored: number;
  /** From the first request until the last accepted event was stored. */
  storedSeconds: number;
  /** Stored events per second over `storedSeconds`. */
  rate: number;
  /** Accepted (2xx) requests whose event was not stored. */
  lost: number;
  complete: boolean;
}

/** Events on the default channel of all `sources`, summed. */
async function countEvents(api: SluiceApi, sources: readonly DeployedSource[]): Promise<number> {
  let total = 0;
  for (let index = 0; index < sources.length; index += 20) {
    const counts = await Promise.all(sources.slice(index, index + 20).map((source) => api.eventCount(source.id)));
    for (const count of counts) total += count;
  }
  return total;
}

/**
 * Ingest at a fixed concurrency over `sources` (round robin), then counts what was stored: the
 * rate is events stored ÷ time from the first request until the last accepted one was stored,
 * so a backlog of queued runs counts against it.
 */
export async function measureIngest(
  context: ScenarioContext,
  server: BenchServer,
  api: SluiceApi,
  sources: readonly DeployedSource[],
  {
    concurrency,
    durationMs,
    warmUp = false,
    count = () => countEvents(api, sources),
  }: {
    concurrency: number;
    durationMs: number;
    warmUp?: boolean;
    /** What the load produced so far; by default the events stored on the sources' default channels. */
    count?: () => Promise<number>;
  },
): Promise<IngestMeasurement> {
  const paths = sources.map((source) => new URL(source.endpoint).pathname);
  const before = await count();
  // A warm-up (JIT, SQLite page cache, sandbox) runs the same way but outside the measured windows.
  const measured = <T>(task: () => Promise<T>) => (warmUp ? task() : context.measure(server, task));
  return measured(async () => {
    const startedAt = monoMs();
    const load = await runLoad({
      url: sources[0]?.endpoint as string,
      path: (index) => paths[index % paths.length] as string,
      concurrency,
      durationMs,
      body: numberedBody,
    });
    const counted = await waitForCount(async () => (await count()) - before, load.ok, {
      intervalMs: sources.length > 1 ? 500 : 100,
    });
    const storedSeconds = (Math.max(counted.reachedAt, startedAt + load.elapsedMs) - startedAt) / 1000;
    return {
      load,
      stored: counted.count,
      storedSeconds,
      rate: counted.count / storedSeconds,
      lost: Math.max(0, load.ok - counted.count),
      complete: counted.complete,
    };
  });
}
