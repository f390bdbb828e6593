import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { route as createAutoSubscription } from "#http/create-auto-subscription";
import { route as createSubscription } from "#http/create-subscription";
import { route as createWebhook } from "#http/create-webhook";
import { route as listUserSubscriptions } from "#http/list-user-subscriptions";
import { route as listUserWebhooks } from "#http/list-user-webhooks";
import { type ApiAnswer, apiClient } from "../support/api-client.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";

/**
 * The webhook and subscription endpoints over real HTTP against local mode, with parameters in the
 * query string as the spec writes them, for one account. "Another account's resource is 404" is
 * covered with two accounts in fault-tenant-isolation.test.ts (over HTTP) and
 * test/unit/core/{webhooks,subscriptions}.test.ts; here, ids that exist nowhere answer 404.
 */
const QUIET_SOURCE = `
export default {
  name: "Quiet",
  version: "0.0.1",
  props: {},
  async run() {},
};
`;

const MISSING_SOURCE = "dc_01jd0000000000000000ab";
const MISSING_WEBHOOK = "wh_01jd0000000000000000ab";
const MISSING_WORKSPACE = "o_01jd0000000000000000ab";

const query = (params: Record<string, string | undefined>) => {
  const defined = Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined);
  return defined.length > 0 ? `?${new URLSearchParams(defined)}` : "";
};

interface Subscription {
  id: string;
  emitter_id: string;
  listener_id: string;
  event_name: string;
}

describe("webhooks and subscriptions over real HTTP against local mode", () => {
  let sluice: SluiceProcess;
  let api: (method: string, path: string, body?: unknown) => Promise<ApiAnswer>;
  let workspaceId: string;

  const newWebhook = async (params: Record<string, string>) => {
    const answer = await api("POST", `/webhooks${query(params)}`);
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    return answer.json.data as { id: string; signing_secret: string; url: string };
  };
  const newSource = async () => {
    const answer = await api("POST", "/sources", { component_code: QUIET_SOURCE });
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    return answer.json.data as { id: string };
  };
  const subscribe = (params: Record<string, string | undefined>) => api("POST", `/subscriptions${query(params)}`);
  const mySubscriptions = async (): Promise<Subscription[]> => {
    const answer = await api("GET", "/users/me/subscriptions?limit=100");
    expect(answer.status).toBe(200);
    return answer.json.data;
  };
  const expect400 = (answer: ApiAnswer, field: string) => {
    expect(answer.status, JSON.stringify(answer.json)).toBe(400);
    expect(answer.json.details.map((d: { field: string }) => d.field)).toContain(field);
  };

  beforeAll(async () => {
    sluice = await startSluice();
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    workspaceId = (await api("GET", "/users/me")).json.data.orgs[0].id;
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  describe("webhooks", () => {
    it("creates a webhook from query parameters and shows its signing secret only in that answer", async () => {
      const created = await api(
        "POST",
        `/webhooks${query({ url: "http://127.0.0.1:9/hooks?token=a&b=c", name: "Local", description: "a receiver" })}`,
      );
      expect(created.status).toBe(200);
      expect(createWebhook.response.safeParse(created.json).error).toBeUndefined();
      const webhook = created.json.data;
      expect(webhook).toMatchObject({
        id: expect.stringMatching(/^wh_/),
        url: "http://127.0.0.1:9/hooks?token=a&b=c",
        name: "Local",
        description: "a receiver",
        active: true,
      });
      expect(webhook.signing_secret).toMatch(/^whsec_/);

      const fetched = await api("GET", `/webhooks/${webhook.id}`);
      expect(fetched.status).toBe(200);
      expect(fetched.json.data).not.toHaveProperty("signing_secret");
      expect(fetched.json.data.url).toBe(webhook.url);
      const listed = await api("GET", "/users/me/webhooks");
      expect(listed.status).toBe(200);
      expect(listUserWebhooks.response.safeParse(listed.json).error).toBeUndefined();
      expect(listed.json.data.map((w: { id: string }) => w.id)).toContain(webhook.id);
      expect(JSON.stringify(listed.json)).not.toContain(webhook.signing_secret);
    });

    it("accepts the same fields in a JSON body, and refuses a field given differently in both", async () => {
      const created = await api("POST", "/webhooks", { url: "https://example.com/in", name: "From body" });
      expect(created.status).toBe(200);
      expect(created.json.data).toMatchObject({ url: "https://example.com/in", name: "From body", description: null });
      const both = await api("POST", `/webhooks${query({ url: "https://example.com/a" })}`, {
        url: "https://example.com/b",
      });
      expect400(both, "url");
    });

    it.each([
      ["no url at all", {}],
      ["an empty url", { url: "" }],
      ["no protocol", { url: "example.com/hook" }],
      ["ftp", { url: "ftp://example.com/hook" }],
      ["a mailto URL", { url: "mailto:ops@example.com" }],
      ["no hostname", { url: "http://" }],
      ["a path but no hostname", { url: "https:///hook" }],
      ["credentials", { url: "https://user:secret@example.com/hook" }],
      ["a space", { url: "https://example.com/a hook" }],
    ])("answers 400 naming url for %s", async (_, params: Record<string, string>) => {
      expect400(await api("POST", `/webhooks${query(params)}`), "url");
    });

    it("pages through the caller's webhooks", async () => {
      for (let n = 0; n < 3; n++) await newWebhook({ url: `https://example.com/page/${n}` });
      const first = await api("GET", "/users/me/webhooks?limit=2");
      expect(first.json.page_info.count).toBe(2);
      const second = await api("GET", `/users/me/webhooks?limit=2&after=${first.json.page_info.end_cursor}`);
      expect(second.status).toBe(200);
      const ids = [...first.json.data, ...second.json.data].map((w: { id: string }) => w.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(first.json.page_info.total_count).toBeGreaterThanOrEqual(3);
    });

    it("rotates the signing secret and shows the new one once", async () => {
      const webhook = await newWebhook({ url: "https://example.com/rotate" });
      const rotated = await api("POST", `/webhooks/${webhook.id}/rotate_secret`);
      expect(rotated.status).toBe(200);
      expect(rotated.json.data.id).toBe(webhook.id);
      expect(rotated.json.data.signing_secret).toMatch(/^whsec_/);
      expect(rotated.json.data.signing_secret).not.toBe(webhook.signing_secret);
      expect((await api("GET", `/webhooks/${webhook.id}`)).json.data).not.toHaveProperty("signing_secret");
    });

    it("answers 404 for a webhook that does not exist and 400 for an id without the wh_ prefix", async () => {
      for (const [method, path] of [
        ["GET", `/webhooks/${MISSING_WEBHOOK}`],
        ["DELETE", `/webhooks/${MISSING_WEBHOOK}`],
        ["POST", `/webhooks/${MISSING_WEBHOOK}/rotate_secret`],
      ] as const) {
        expect((await api(method, path)).status, `${method} ${path}`).toBe(404);
      }
      expect400(await api("GET", "/webhooks/dc_123"), "id");
    });
  });

  describe("subscriptions", () => {
    it("subscribes a webhook to a source; subscribing again answers the same subscription", async () => {
      const source = await newSource();
      const webhook = await newWebhook({ url: "http://127.0.0.1:9/a" });
      const first = await subscribe({ emitter_id: source.id, listener_id: webhook.id });
      expect(first.status).toBe(200);
      expect(createSubscription.response.safeParse(first.json).error).toBeUndefined();
      expect(first.json.data).toMatchObject({
        id: expect.stringMatching(/^sub_/),
        emitter_id: source.id,
        listener_id: webhook.id,
        event_name: "",
      });
      const again = await subscribe({ emitter_id: source.id, listener_id: webhook.id, event_name: "" });
      expect(again.status).toBe(200);
      expect(again.json.data.id).toBe(first.json.data.id);
      const mine = await mySubscriptions();
      expect(mine.filter((s) => s.emitter_id === source.id && s.listener_id === webhook.id)).toHaveLength(1);
      const listed = await api("GET", "/users/me/subscriptions");
      expect(listUserSubscriptions.response.safeParse(listed.json).error).toBeUndefined();
      // Without pagination parameters the spec's {data: [...]}: every subscription, no page_info.
      expect(listed.json.page_info).toBeUndefined();
      expect(listed.json.data.map((s: { id: string }) => s.id)).toEqual(mine.map((s) => s.id));
    });

    it("takes dc_*, p_*, workflow ids, custom channels, $errors, $logs and a source listening to itself", async () => {
      const source = await newSource();
      const webhook = await newWebhook({ url: "http://127.0.0.1:9/b" });
      const workflow = await api("POST", "/workflows", {
        steps: [{ namespace: "quiet", component_code: "export default defineComponent({ async run() {} })" }],
      });
      expect(workflow.status, JSON.stringify(workflow.json)).toBe(200);
      const workflowId: string = workflow.json.data.id;
      const cases: [Record<string, string>, string][] = [
        [{ emitter_id: "dc_*", listener_id: webhook.id }, ""],
        [{ emitter_id: "p_*", listener_id: webhook.id, event_name: "$errors" }, "$errors"],
        [{ emitter_id: source.id, listener_id: webhook.id, event_name: "$logs" }, "$logs"],
        [{ emitter_id: source.id, listener_id: webhook.id, event_name: "orders" }, "orders"],
        [{ emitter_id: source.id, listener_id: source.id, event_name: "self" }, "self"],
        [{ emitter_id: workflowId, listener_id: webhook.id }, ""],
        [{ emitter_id: source.id, listener_id: workflowId }, ""],
      ];
      for (const [params, channel] of cases) {
        const answer = await subscribe(params);
        expect(answer.status, JSON.stringify([params, answer.json])).toBe(200);
        expect(answer.json.data).toMatchObject({
          emitter_id: params.emitter_id,
          listener_id: params.listener_id,
          event_name: channel,
        });
      }
    });

    it("takes the workspace as emitter with event_name=$errors only", async () => {
      const webhook = await newWebhook({ url: "http://127.0.0.1:9/c" });
      const ok = await subscribe({ emitter_id: workspaceId, listener_id: webhook.id, event_name: "$errors" });
      expect(ok.status).toBe(200);
      expect(ok.json.data).toMatchObject({ emitter_id: workspaceId, event_name: "$errors" });
      expect400(await subscribe({ emitter_id: workspaceId, listener_id: webhook.id }), "event_name");
      expect400(
        await subscribe({ emitter_id: workspaceId, listener_id: webhook.id, event_name: "$logs" }),
        "event_name",
      );
      const foreign = await subscribe({
        emitter_id: MISSING_WORKSPACE,
        listener_id: webhook.id,
        event_name: "$errors",
      });
      expect(foreign.status).toBe(404);
    });

    it("answers 400 naming the parameter for each bad emitter, listener or channel", async () => {
      const source = await newSource();
      const webhook = await newWebhook({ url: "http://127.0.0.1:9/d" });
      const cases: [Record<string, string | undefined>, string][] = [
        [{ listener_id: webhook.id }, "emitter_id"],
        [{ emitter_id: "", listener_id: webhook.id }, "emitter_id"],
        [{ emitter_id: "dc_no.pe", listener_id: webhook.id }, "emitter_id"],
        [{ emitter_id: "*", listener_id: webhook.id }, "emitter_id"],
        [{ emitter_id: webhook.id, listener_id: webhook.id }, "emitter_id"],
        [{ emitter_id: source.id }, "listener_id"],
        [{ emitter_id: source.id, listener_id: "dc_*" }, "listener_id"],
        [{ emitter_id: source.id, listener_id: workspaceId }, "listener_id"],
        [{ emitter_id: source.id, listener_id: "https://example.com/" }, "listener_id"],
        [{ emitter_id: source.id, listener_id: webhook.id, event_name: "$nope" }, "event_name"],
        [{ emitter_id: source.id, listener_id: webhook.id, event_name: "x".repeat(129) }, "event_name"],
      ];
      for (const [params, field] of cases) expect400(await subscribe(params), field);
    });

    it("answers 404 for a source, webhook or workflow that does not exist", async () => {
      const source = await newSource();
      const webhook = await newWebhook({ url: "http://127.0.0.1:9/e" });
      expect((await subscribe({ emitter_id: MISSING_SOURCE, listener_id: webhook.id })).status).toBe(404);
      // Ids are opaque: one shaped like the hosted service's is looked up like any other.
      expect((await subscribe({ emitter_id: "dc_nope", listener_id: webhook.id })).status).toBe(404);
      expect((await subscribe({ emitter_id: source.id, listener_id: MISSING_WEBHOOK })).status).toBe(404);
      expect((await subscribe({ emitter_id: source.id, listener_id: MISSING_SOURCE })).status).toBe(404);
      expect((await subscribe({ emitter_id: "p_01jd0000000000000000ab", listener_id: webhook.id })).status).toBe(404);
      expect((await subscribe({ emitter_id: source.id, listener_id: "p_01jd0000000000000000ab" })).status).toBe(404);
    });

    it("deletes with the parameters of creation (empty event_name for the default channel); a missing one is 404", async () => {
      const source = await newSource();
      const webhook = await newWebhook({ url: "http://127.0.0.1:9/f" });
      const created = (await subscribe({ emitter_id: source.id, listener_id: webhook.id })).json.data;
      const params = query({ emitter_id: source.id, listener_id: webhook.id, event_name: "" });
      const deleted = await api("DELETE", `/subscriptions${params}`);
      expect(deleted.status).toBe(200);
      expect(deleted.json.data).toEqual({ id: created.id, deleted: true });
      expect((await mySubscriptions()).map((s) => s.id)).not.toContain(created.id);
      expect((await api("DELETE", `/subscriptions${params}`)).status).toBe(404);
      expect400(await api("DELETE", `/subscriptions${query({ listener_id: webhook.id })}`), "emitter_id");
    });

    it("lists the workspace's subscriptions, and answers 404 for a workspace the caller is not in", async () => {
      const source = await newSource();
      const webhook = await newWebhook({ url: "http://127.0.0.1:9/g" });
      const created = (await subscribe({ emitter_id: source.id, listener_id: webhook.id })).json.data;
      const listed = await api("GET", `/workspaces/${workspaceId}/subscriptions?limit=100`);
      expect(listed.status).toBe(200);
      expect(listed.json.data.map((s: Subscription) => s.id)).toContain(created.id);
      expect((await api("GET", `/workspaces/${MISSING_WORKSPACE}/subscriptions`)).status).toBe(404);
    });
  });

  describe("auto subscriptions and cleanup", () => {
    it("subscribes the listener to sources created afterwards only", async () => {
      const before = await newSource();
      const webhook = await newWebhook({ url: "http://127.0.0.1:9/h" });
      const auto = await api("POST", `/auto_subscriptions${query({ event_name: "$errors", listener_id: webhook.id })}`);
      expect(auto.status).toBe(200);
      expect(createAutoSubscription.response.safeParse(auto.json).error).toBeUndefined();
      expect(auto.json.data).toMatchObject({ listener_id: webhook.id, event_name: "$errors" });

      const after = await newSource();
      const mine = await mySubscriptions();
      expect(mine.filter((s) => s.listener_id === webhook.id && s.event_name === "$errors")).toEqual([
        expect.objectContaining({ emitter_id: after.id }),
      ]);
      expect(mine.some((s) => s.emitter_id === before.id && s.listener_id === webhook.id)).toBe(false);
    });

    it("answers 400 for a missing or wrong event_name or listener, 404 for a missing listener", async () => {
      const webhook = await newWebhook({ url: "http://127.0.0.1:9/i" });
      const post = (params: Record<string, string>) => api("POST", `/auto_subscriptions${query(params)}`);
      expect400(await post({ listener_id: webhook.id }), "event_name");
      expect400(await post({ event_name: "orders", listener_id: webhook.id }), "event_name");
      expect400(await post({ event_name: "$errors" }), "listener_id");
      expect400(await post({ event_name: "$errors", listener_id: "dc_*" }), "listener_id");
      expect((await post({ event_name: "$logs", listener_id: MISSING_WEBHOOK })).status).toBe(404);
    });

    it("removes a deleted source's and a deleted webhook's subscriptions", async () => {
      const source = await newSource();
      const other = await newSource();
      const webhook = await newWebhook({ url: "http://127.0.0.1:9/j" });
      await subscribe({ emitter_id: source.id, listener_id: webhook.id });
      await subscribe({ emitter_id: other.id, listener_id: source.id });
      const kept = (await subscribe({ emitter_id: other.id, listener_id: webhook.id })).json.data;

      expect((await api("DELETE", `/sources/${source.id}`)).status).toBe(200);
      let mine = await mySubscriptions();
      expect(mine.some((s) => s.emitter_id === source.id || s.listener_id === source.id)).toBe(false);
      expect(mine.map((s) => s.id)).toContain(kept.id);

      expect((await api("DELETE", `/webhooks/${webhook.id}`)).json.data).toEqual({ id: webhook.id, deleted: true });
      mine = await mySubscriptions();
      expect(mine.some((s) => s.listener_id === webhook.id)).toBe(false);
      expect((await api("GET", `/webhooks/${webhook.id}`)).status).toBe(404);
      expect((await api("DELETE", `/webhooks/${webhook.id}`)).status).toBe(404);
    });
  });
});
