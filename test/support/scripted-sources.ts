import type { ComponentDescription } from "#core/component-model";
import type { IncomingHttpRequest } from "#core/http-run-event";
import type { RunJob } from "#core/ports/run-queue";
import { deploySource } from "#core/sources";
import { accountIn, memoryDeps, type Script, scriptedHost } from "./memory-deps.ts";

/**
 * One deployed source of a scripted component (`scriptedHost`) on `memoryDeps`, with an HTTP
 * interface (custom response or not) and a timer, for driving the trusted side through the real use
 * cases: `receiveHttpRequest`, `runSource`, `fireTimer`. Queued runs land in `jobs`.
 */
export async function scriptedSource(
  script: Script,
  options: { customResponse?: boolean; description?: Partial<ComponentDescription> } = {},
) {
  const { host, calls } = scriptedHost(
    {
      props: [
        { name: "http", type: "$.interface.http", customResponse: options.customResponse ?? false },
        { name: "timer", type: "$.interface.timer", default: { intervalSeconds: 60 } },
        { name: "db", type: "$.service.db" },
      ],
      ...options.description,
    },
    script,
  );
  const jobs: RunJob[] = [];
  const deps = memoryDeps(Date.UTC(2026, 10, 20, 12), {
    host,
    runs: { enqueue: async (job) => void jobs.push(job) },
    timers: { schedule: async () => {}, cancel: async () => {} },
  });
  const account = await accountIn(deps, "scripted");
  const source = await deploySource(deps, { userId: account.user.id }, { component_code: "code" });
  const endpointKey = String((source.configured_props.http as { endpoint_url: string }).endpoint_url)
    .split("/")
    .at(-1) as string;
  /** The events of one channel of the source, oldest first. */
  const channel = async (name: string) =>
    (await deps.events.listEvents(source.id, { limit: 100, channel: name })).items.reverse();
  return {
    deps,
    calls,
    jobs,
    source,
    endpointKey,
    channel,
    workspaceId: account.workspace.id,
    userId: account.user.id,
  };
}

/** A request to a source's endpoint. */
export function endpointRequest(body = "{}", method = "POST"): IncomingHttpRequest {
  return {
    method,
    path: "/",
    rawQuery: "",
    headers: { "content-type": "application/json" },
    body: Buffer.from(body),
    clientIp: "127.0.0.1",
    url: "http://127.0.0.1/http/x",
  };
}
