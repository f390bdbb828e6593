/** Small helpers for end-to-end tests that talk to a running Sluice over real HTTP. */

export interface ApiAnswer {
  status: number;
  /** The parsed JSON answer (any: tests read arbitrary shapes). */
  json: any;
}

/** Calls the REST API at `baseUrl` (ending in `/v1`) with a Bearer key; parses any JSON answer. */
export function apiClient(baseUrl: string, key: string) {
  return async (
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<ApiAnswer> => {
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, json: text ? JSON.parse(text) : undefined };
  };
}

/** Deploys `code` (a source with an HTTP interface) through `api`; its id and endpoint URL. */
export async function deployHttpSource(
  api: ReturnType<typeof apiClient>,
  code: string,
): Promise<{ id: string; endpoint: string }> {
  const answer = await api("POST", "/sources", { component_code: code });
  if (answer.status !== 200)
    throw new Error(`deploying the source answered ${answer.status}: ${JSON.stringify(answer.json)}`);
  return { id: answer.json.data.id, endpoint: answer.json.data.configured_props.http.endpoint_url };
}

/** A step of {@link createHttpWorkflow}: its namespace, code and configured props. */
export interface WorkflowStepSpec {
  namespace: string;
  code: string;
  props?: Record<string, unknown>;
}

/** The body of `POST /workflows` for an active workflow of `steps` with one HTTP trigger. */
export function httpWorkflowBody(name: string, steps: readonly WorkflowStepSpec[], customResponse: boolean) {
  return {
    settings: { name, auto_deploy: true },
    steps: steps.map(({ namespace, code, props }) => ({ namespace, component_code: code, props: props ?? {} })),
    triggers: [{ type: "http", props: { custom_response: customResponse } }],
  };
}

/** Creates an active workflow of `steps` with one HTTP trigger through `api`: its id, trigger URL and step ids. */
export async function createHttpWorkflow(
  api: ReturnType<typeof apiClient>,
  name: string,
  steps: readonly WorkflowStepSpec[],
  customResponse: boolean,
): Promise<{ id: string; url: string; stepIds: string[] }> {
  const answer = await api("POST", "/workflows", httpWorkflowBody(name, steps, customResponse));
  if (answer.status !== 200)
    throw new Error(`creating the workflow answered ${answer.status}: ${JSON.stringify(answer.json)}`);
  const data = answer.json.data;
  return {
    id: data.id,
    url: data.triggers[0].endpoint_url,
    stepIds: data.steps.map((step: { id: string }) => step.id),
  };
}

/** Runs `task` over `items` with at most `concurrency` at a time, keeping results in order. */
export async function inBatches<T, R>(items: readonly T[], concurrency: number, task: (item: T) => Promise<R>) {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return results;
}
