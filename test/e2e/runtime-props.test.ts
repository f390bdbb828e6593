import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, deployHttpSource } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";

/** A source whose run sends its `http_request` prop's request and emits the answer (or the error). */
const EXECUTE_SOURCE = `
export default {
  name: "Forward",
  version: "0.0.1",
  props: {
    http: "$.interface.http",
    request: { type: "http_request", label: "Request", default: { method: "POST" } },
  },
  async run(event) {
    try {
      const { status, data } = await this.request.execute();
      this.$emit({ status, data });
    } catch (error) {
      this.$emit({ error: error.name, message: error.message });
    }
  },
};
`;

describe("run-time props against local mode with AWS's outbound rule (SLUICE_WEBHOOK_ALLOW_PRIVATE=false)", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    sluice = await startSluice({ env: { SLUICE_WEBHOOK_ALLOW_PRIVATE: "false" } });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
    await receiver?.stop();
  });

  it("refuses an http_request prop's execute() to a loopback address, reaching nothing", async () => {
    const source = await deployHttpSource(api, EXECUTE_SOURCE);
    const configured = await api("PUT", `/sources/${source.id}`, {
      configured_props: { request: { url: receiver.url("/internal") } },
    });
    expect(configured.status, JSON.stringify(configured.json)).toBe(200);
    expect(configured.json.data.configured_props.request).toEqual({ method: "POST", url: receiver.url("/internal") });
    expect((await fetch(source.endpoint, { method: "POST", body: "{}" })).status).toBe(200);
    const emitted = await eventually(async () => {
      const page = await api("GET", `/sources/${source.id}/event_summaries?expand=event`);
      return page.json.data[0]?.event;
    }, "the run's emit");
    expect(emitted).toEqual({
      error: "ForbiddenAddressError",
      message: expect.stringMatching(/^execute\(\): the request was refused: 127\.0\.0\.1 is a private address/),
    });
    expect(receiver.requests).toEqual([]);
  });
});
