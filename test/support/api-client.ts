/** Small helpers for end-to-end tests that talk to a running Sluice over real HTTP. */

export interface ApiAnswer {
  status: number;
  /** The parsed JSON answer (any: tests read arbitrary shapes). */
  json: any;
}

/** Calls the REST API at `baseUrl` (ending in `/v1`) with a Bearer key; parses any JSON answer. */
export function apiClient(baseUrl: string, key: string) {
  return async (method: string, path: string, body?: unknown): Promise<ApiAnswer> => {
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
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
