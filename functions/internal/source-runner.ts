/**
 * The function that runs queued source runs (`LambdaRunQueue`): an HTTP event answered already, a
 * delivery of another source's event. Lambda invokes it asynchronously and retries a run that
 * failed twice, so a failure of the store is retried; what the component does never fails it.
 */
import { z } from "zod";
import { runSource } from "#core/source-runs";

export const runJobSchema = z.object({
  sourceId: z.string().startsWith("dc_"),
  trigger: z.enum(["http", "timer", "event"]),
  event: z.json(),
});

const loadDeps = async () => (await import("#adapters/aws/composition")).awsDeps({ resources: true });

export async function handler(event: unknown): Promise<void> {
  const deps = await loadDeps();
  const job = runJobSchema.safeParse(event);
  if (!job.success) {
    // Retrying cannot fix a malformed job: it is logged and dropped.
    deps.log.error("malformed run job dropped", { issues: job.error.issues });
    return;
  }
  await runSource(deps, job.data);
}
