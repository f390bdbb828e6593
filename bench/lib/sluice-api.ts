import { type ApiAnswer, apiClient } from "../../test/support/api-client.ts";
import type { BenchServer } from "./processes.ts";

export interface DeployedSource {
  id: string;
  endpoint: string;
}

function expectOk(answer: ApiAnswer, what: string): ApiAnswer {
  if (answer.status < 200 || answer.status >= 300) {
    throw new Error(`${what} answered ${answer.status}: ${JSON.stringify(answer.json).slice(0, 400)}`);
  }
  return answer;
}

/** The REST API of a bench server, with the calls the scenarios need. */
export function sluiceApi(server: Pick<BenchServer, "baseUrl" | "apiKey">) {
  const call = apiClient(server.baseUrl, server.apiKey);
  return {
    call,
    async deploy(code: string, extra: Record<string, unknown> = {}): Promise<DeployedSource> {
      const answer = expectOk(await call("POST", "/sources", { component_code: code, ...extra }), "POST /sources");
      return { id: answer.json.data.id, endpoint: answer.json.data.configured_props.http.endpoint_url };
    },
    /** Events stored on a source's default channel (`page_info.total_count`). */
    async eventCount(sourceId: string): Promise<number> {
      const answer = expectOk(
        await call("GET", `/sources/${sourceId}/event_summaries?event_name=default&limit=1`),
        "GET event_summaries",
      );
      return Number(answer.json.page_info.total_count);
    },
    /** Creates a workflow; `endpoint` is its first HTTP trigger's URL ("" without one). */
    async createWorkflow(body: Record<string, unknown>): Promise<DeployedSource> {
      const answer = expectOk(await call("POST", "/workflows", body), "POST /workflows");
      const trigger = answer.json.data.triggers.find((item: { endpoint_url?: string }) => item.endpoint_url);
      return { id: answer.json.data.id, endpoint: trigger?.endpoint_url ?? "" };
    },
    /**
     * Runs of a workflow that ended (`GET /runs`): the total, less those still running among the
     * newest page (runs end roughly in the order they began, so older ones have ended too).
     */
    async endedRunCount(workflowId: string): Promise<number> {
      const answer = expectOk(await call("GET", `/workflows/${workflowId}/runs?limit=100`), "GET runs");
      const running = answer.json.data.filter((run: { status: string }) => run.status === "running").length;
      return Number(answer.json.page_info.total_count) - running;
    },
    /** Every item of a paginated list, newest first, following `end_cursor` 100 at a time. */
    async allItems<T>(path: string): Promise<T[]> {
      const items: T[] = [];
      let after = "";
      for (;;) {
        const separator = path.includes("?") ? "&" : "?";
        const url = `${path}${separator}limit=100${after ? `&after=${encodeURIComponent(after)}` : ""}`;
        const answer = expectOk(await call("GET", url), `GET ${path}`);
        items.push(...answer.json.data);
        after = answer.json.page_info.end_cursor;
        if (!after || answer.json.data.length < 100) return items;
      }
    },
    async createWebhook(url: string): Promise<string> {
      const answer = expectOk(
        await call("POST", `/webhooks?url=${encodeURIComponent(url)}&name=bench`),
        "POST /webhooks",
      );
      return answer.json.data.id;
    },
    async subscribe(emitterId: string, listenerId: string): Promise<string> {
      const answer = expectOk(
        await call("POST", `/subscriptions?emitter_id=${encodeURIComponent(emitterId)}&listener_id=${listenerId}`),
        "POST /subscriptions",
      );
      return answer.json.data.id;
    },
  };
}

export type SluiceApi = ReturnType<typeof sluiceApi>;
