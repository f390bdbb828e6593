import { randomUUID } from "node:crypto";
import { expect } from "vitest";
import type { apiClient } from "./api-client.ts";
import { eventually, when } from "./eventually.ts";
import { appFiles, type TreeServer } from "./registry-tree.ts";

/**
 * What the registry suite (test/compat/registry-suite*.test.ts) does to a component of the
 * fixture tree (test/fixtures/registry-tree/components/): bring it by `component_files` or by
 * `component_url`, deploy it as a source or run it as a workflow step, and read back what it did.
 */
export type Via = "component_files" | "component_url";
export const VIAS: readonly Via[] = ["component_files", "component_url"];

export interface Emitted {
  id: string;
  event: any;
  metadata: { summary?: string; id?: string };
}

export interface Run {
  id: string;
  status: string;
  error: { code: string; message: string } | null;
  steps: { namespace: string; status: string; summary: string | null }[];
}

/** A code step that emits what the earlier steps left, so a test reads their results back. */
const REPORT = {
  namespace: "report",
  component_code:
    "export default defineComponent({ async run({ steps, $ }) { $.send.emit({ raw_event: JSON.parse(JSON.stringify(steps)) }); } })",
};

export const postJson = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

/**
 * The suite's operations, on the Sluice and the file server `context` gives once `beforeAll` has
 * started them (so a test file may destructure them at its top).
 */
export function registrySuite(context: () => { api: ReturnType<typeof apiClient>; tree: TreeServer }) {
  const api: ReturnType<typeof apiClient> = (...args) => context().api(...args);
  /** The body fields that bring `path` (`<app>/<path in the app>`) by `via`. */
  const componentFields = (via: Via, path: string) => {
    const [app, ...rest] = path.split("/");
    return via === "component_files"
      ? { component_files: appFiles(app as string), component_entry: rest.join("/") }
      : { component_url: `${context().tree.origin}/components/${path}` };
  };

  /** Deploys `path` as a source: its id and its HTTP endpoint (of a prop named `httpInterface` or `http`). */
  async function deploy(via: Via, path: string, configured_props: Record<string, unknown> = {}) {
    const answer = await api("POST", "/sources", { ...componentFields(via, path), configured_props });
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    const source = answer.json.data as { id: string; configured_props: Record<string, any> };
    const endpoint = (source.configured_props.httpInterface ?? source.configured_props.http)?.endpoint_url;
    return { id: source.id, endpoint: endpoint as string };
  }

  /** Deletes a source (a timer source's runs load the machine every second until then). */
  async function remove(sourceId: string) {
    expect((await api("DELETE", `/sources/${sourceId}`)).status).toBeLessThan(300);
  }

  /** The source's events, oldest first. */
  const events = async (sourceId: string, query = ""): Promise<Emitted[]> =>
    ((await api("GET", `/sources/${sourceId}/event_summaries?expand=event&limit=100${query}`)).json.data as Emitted[])
      .slice()
      .reverse();

  /** The source's events once there are `count` of them, oldest first. */
  const eventsWhen = (sourceId: string, count: number, what: string) =>
    eventually(
      async () => {
        const found = await events(sourceId);
        return when(found.length >= count) && found;
      },
      `${what} (${count} events)`,
      { timeoutMs: 20_000 },
    );

  /** A step of `path` brought by `via`: its files, or a component saved from its URL. */
  async function stepOf(via: Via, namespace: string, path: string, props: Record<string, unknown>) {
    if (via === "component_files") return { namespace, ...componentFields(via, path), props };
    const saved = await api("POST", "/components", componentFields(via, path));
    expect(saved.status, JSON.stringify(saved.json)).toBe(200);
    return { namespace, component_id: saved.json.data.id, props };
  }

  /**
   * Creates an active workflow of `steps` and a last step reporting every step's results, behind
   * an HTTP trigger; runs it once. The trigger's answer, the run, and what the steps left.
   */
  async function runWorkflow(steps: unknown[], options: { customResponse?: boolean; body?: unknown } = {}) {
    const created = await api("POST", "/workflows", {
      settings: { name: `suite ${randomUUID()}`, auto_deploy: true },
      steps: [...steps, REPORT],
      triggers: [{ type: "http", props: { custom_response: options.customResponse ?? false } }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    const workflow = created.json.data;
    const answer = await postJson(workflow.triggers[0].endpoint_url, options.body ?? {});
    const run: Run = await eventually(async () => {
      const [newest] = (await api("GET", `/workflows/${workflow.id}/runs`)).json.data;
      return newest && newest.status !== "running" ? newest : undefined;
    }, "the workflow's run");
    const reported = (await api("GET", `/workflows/${workflow.id}/event_summaries?expand=event`)).json.data;
    return { answer, run, steps: reported[0]?.event.raw_event as Record<string, any> | undefined };
  }

  return { componentFields, deploy, remove, events, eventsWhen, stepOf, runWorkflow };
}

/** Each step's `$summary` as the run record shows it, by namespace. */
export const stepSummaries = (run: Run) => Object.fromEntries(run.steps.map((s) => [s.namespace, s.summary]));
