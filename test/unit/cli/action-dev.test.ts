import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { actionRunLines, startActionDev } from "../../../bin/cli/action-dev.ts";
import { apiClient, type Component, type WorkflowRun } from "../../../bin/cli/client.ts";
import { runLines } from "../../../bin/cli/commands/events.ts";
import { CliError } from "../../../bin/cli/errors.ts";
import { recordingIo } from "../../support/cli-io.ts";

/*
 * `sluice dev` on an action, against a stand-in Sluice API: what a run prints, and that what can
 * go wrong while it watches (an endpoint it cannot reach, a file that stopped being an action) is
 * a CliError, which dev prints and goes on from, never a crash. The whole loop against a real
 * Sluice is in test/e2e/cli-commands.test.ts.
 */

const run = (fields: Partial<WorkflowRun>): WorkflowRun =>
  ({
    id: "run_1",
    status: "success",
    started_at_ms: Date.UTC(2026, 10, 27, 12, 0, 1),
    duration_ms: 4,
    steps: [
      { id: "c_1", namespace: "action", status: "success", summary: null, duration_ms: 3, export_bytes: 10 },
      { id: "c_2", namespace: "sluice_dev_answer", status: "success", summary: null, duration_ms: 1, export_bytes: 0 },
    ],
    logs: [],
    exit_reason: null,
    error: null,
    ...fields,
  }) as WorkflowRun;

describe("runLines: a paused run, its continuation and a cancellation", () => {
  it("say where and until when a run paused, what a run went on from, and why one was cancelled", () => {
    const paused = run({
      status: "paused",
      pause: { kind: "suspend", step_id: "c_1", until_ms: Date.UTC(2026, 10, 28, 12, 0, 1) },
    });
    expect(runLines(paused)).toBe(
      "2026-11-27T12:00:01Z  run run_1  paused in 4 ms  (by $.flow.suspend in action until 2026-11-28T12:00:01Z)",
    );
    expect(runLines(run({ id: "run_2", resumed_from: "run_1" }))).toBe(
      "2026-11-27T12:00:01Z  run run_2  success in 4 ms  (resumed from run_1)",
    );
    expect(runLines(run({ id: "run_3", status: "cancelled", resumed_from: "run_1", cancel_reason: "timeout" }))).toBe(
      "2026-11-27T12:00:01Z  run run_3  cancelled in 4 ms  (resumed from run_1; its suspension timed out)",
    );
    expect(
      runLines(run({ id: "run_4", status: "cancelled", resumed_from: "run_1", cancel_reason: "inactive" })),
    ).toContain("(resumed from run_1; its workflow was made inactive)");
  });
});

describe("actionRunLines: a run of the action as dev prints it", () => {
  it("gives the return value, the exports but $summary, the summary and the logs", () => {
    const success = run({
      steps: [
        { id: "c_1", namespace: "action", status: "success", summary: "Greeted Ada", duration_ms: 3, export_bytes: 9 },
      ],
      logs: [{ ts: Date.UTC(2026, 10, 27, 12, 0, 1), level: "log", message: "greeting Ada", step: "c_1" }],
    });
    expect(actionRunLines(success, { $return_value: "Hey, Ada", letters: 3, $summary: "Greeted Ada" }, undefined)).toBe(
      [
        "2026-11-27T12:00:01Z  run run_1  success in 4 ms",
        "2026-11-27T12:00:01Z  log    [action] greeting Ada",
        '  return  "Hey, Ada"',
        "  export  letters = 3",
        "  summary Greeted Ada",
        "",
      ].join("\n"),
    );
  });

  it("gives an exit's reason, an error, the action's own answer, and says when no run was recorded", () => {
    expect(
      actionRunLines(run({ status: "exited", exit_reason: "nothing to do" }), undefined, { status: 400, body: "x" }),
    ).toBe("2026-11-27T12:00:01Z  run run_1  exited in 4 ms\n  exit    nothing to do\n");
    const failed = run({ status: "error", error: { code: "TypeError", cell_id: "c_1", message: "no one" } });
    expect(actionRunLines(failed, undefined, { status: 400, body: "{}" })).toContain(
      "ERROR  TypeError: no one (in action)\n",
    );
    expect(actionRunLines(run({}), undefined, { status: 201, body: "made" })).toContain("  answer  201 made\n");
    expect(actionRunLines(undefined, undefined, { status: 404, body: "gone" })).toBe(
      "no run was recorded (the endpoint answered 404 gone)\n",
    );
  });
});

describe("startActionDev against a stand-in API", () => {
  let server: Server;
  let url: string;
  let closedPort: number;
  const requests: { method: string; path: string; body: unknown }[] = [];
  let sessions = 0;

  beforeAll(async () => {
    // A port nothing listens on: the session workflow's endpoint that cannot be reached.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    closedPort = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    server = createServer((request, response) => {
      let text = "";
      request.on("data", (chunk) => {
        text += chunk;
      });
      request.on("end", () => {
        const body = text ? JSON.parse(text) : undefined;
        requests.push({ method: request.method ?? "", path: request.url ?? "", body });
        const answer = (data: unknown) =>
          response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data }));
        // The second session gets an endpoint that answers as the session's answering step does.
        if (request.url === "/v1/workflows") {
          const endpoint = sessions++ === 0 ? `http://127.0.0.1:${closedPort}/http/k` : `${url}/http/k`;
          return answer({ id: `p_dev${sessions}`, triggers: [{ endpoint_url: endpoint }] });
        }
        if (request.url === "/http/k") {
          return response
            .writeHead(200, { "content-type": "application/json", "x-sluice-dev-outputs": "1" })
            .end(JSON.stringify({ $return_value: "Hey, Ada", letters: 3 }));
        }
        if (request.url?.startsWith("/v1/workflows/p_dev2/runs")) return answer([run({ id: "run_2" })]);
        if (request.url === "/v1/components") return answer({ id: "sc_2", type: "source", configurable_props: [] });
        answer({});
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it("makes the session's workflow, and turns an unreachable endpoint and a file no longer an action into CliErrors", async () => {
    const api = apiClient({ url, streamUrl: url, apiKey: "k".repeat(20), keyFrom: "SLUICE_API_KEY" });
    const { io } = recordingIo();
    const component = {
      id: "sc_1",
      type: "action",
      configurable_props: [{ name: "greeting", type: "string" }],
    } as unknown as Component;
    const dev = await startActionDev(api, io, "dev/greet.mjs", component, {
      props: { greeting: "007" },
      event: { name: "Ada" },
      json: false,
    });
    expect(requests[0]).toMatchObject({
      method: "POST",
      path: "/v1/workflows",
      body: {
        settings: { name: "dev greet.mjs", auto_deploy: true },
        steps: [
          { namespace: "action", component_id: "sc_1", props: { greeting: "007" } },
          { namespace: "sluice_dev_answer", component_code: expect.stringContaining("steps.action") },
        ],
        triggers: [{ type: "http", props: { custom_response: true } }],
      },
    });
    const unreachable = await dev.run().catch((error: unknown) => error);
    expect(unreachable).toBeInstanceOf(CliError);
    expect((unreachable as Error).message).toMatch(/^cannot reach the workflow's endpoint .*: ECONNREFUSED$/);
    const noLongerAction = await dev
      .update({ body: { component_code: "export default {}" }, read: [] } as never)
      .catch((error: unknown) => error);
    expect(noLongerAction).toBeInstanceOf(CliError);
    expect((noLongerAction as Error).message).toBe("greet.mjs is no longer an action");
    // Nothing was put on the workflow for the refused save.
    expect(requests.some((request) => request.method === "PUT")).toBe(false);
  });

  it("prints a run with --json as one line: the run record, and the outputs the answering step gave", async () => {
    const api = apiClient({ url, streamUrl: url, apiKey: "k".repeat(20), keyFrom: "SLUICE_API_KEY" });
    const { io, written } = recordingIo();
    const component = { id: "sc_1", type: "action", configurable_props: [] } as unknown as Component;
    const dev = await startActionDev(api, io, "greet.mjs", component, {
      props: {},
      event: { name: "Ada" },
      json: true,
    });
    await dev.run();
    const line = JSON.parse(written.out);
    expect(line).toMatchObject({
      run: { id: "run_2", status: "success" },
      outputs: { $return_value: "Hey, Ada", letters: 3 },
    });
    expect(line).not.toHaveProperty("answer");
    // The event went to the endpoint as the trigger's body.
    expect(requests.find((request) => request.path === "/http/k")?.body).toEqual({ name: "Ada" });
    expect(requests.at(-1)).toMatchObject({ method: "GET", path: "/v1/workflows/p_dev2/runs?limit=1" });
  });
});
