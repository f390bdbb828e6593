import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accounts } from "../../../bin/cli/commands/accounts.ts";
import { recordingIo } from "../../support/cli-io.ts";

/*
 * `sluice accounts connect` against a stand-in Sluice API: it asks for the authorization URL,
 * prints it, opens it with $BROWSER (a script that visits it, as a browser approving would), and
 * waits for the new account to be listed. The whole flow against a real Sluice and provider is in
 * test/e2e/accounts-oauth.test.ts.
 */

const KEY = "sluice_cli-accounts-key-0123456789";

describe("sluice accounts connect", () => {
  let server: Server;
  let url: string;
  const listed = [{ id: "apn_old", name: "Older" }];
  const connects: unknown[] = [];
  let browser: string;

  beforeAll(async () => {
    server = createServer((request, response) => {
      const answer = (status: number, body: unknown) =>
        response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
      if (request.headers.authorization !== `Bearer ${KEY}` && request.url !== "/approve") return answer(401, {});
      const path = new URL(request.url ?? "/", url);
      if (request.method === "POST" && path.pathname === "/v1/accounts/connect") {
        let body = "";
        request.on("data", (chunk) => {
          body += chunk;
        });
        request.on("end", () => {
          connects.push(JSON.parse(body));
          answer(200, {
            data: {
              authorize_url: `${url}/approve`,
              state: "s",
              redirect_uri: `${url}/v1/accounts/oauth/callback`,
              expires_at: "2026-11-26T18:00:00.000Z",
              app: { id: "app_1", name_slug: "standin", name: "Stand-in" },
              workspace_id: "o_1",
            },
          });
        });
        return;
      }
      if (path.pathname === "/approve") {
        listed.unshift({ id: "apn_new", name: "Mine" });
        return answer(200, {});
      }
      if (path.pathname === "/v1/workspaces/o_1/accounts" && path.searchParams.get("query") === "standin") {
        return answer(200, {
          page_info: { total_count: listed.length, count: listed.length, start_cursor: null, end_cursor: null },
          data: listed,
        });
      }
      answer(404, { error: "not found" });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // A "browser" that visits the URL it is given, as one approving at the provider would.
    browser = join(mkdtempSync(join(tmpdir(), "sluice-browser-")), "browser");
    writeFileSync(browser, `#!/bin/sh\nexec curl -fsS -o /dev/null "$1"\n`);
    chmodSync(browser, 0o755);
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it("prints the URL, opens it with $BROWSER and prints the account the visit made", async () => {
    const { io, written } = recordingIo({ SLUICE_URL: url, SLUICE_API_KEY: KEY, BROWSER: browser });
    await accounts.run({ name: "Mine" }, ["connect", "standin"], io);
    expect(connects).toEqual([{ app: "standin", name: "Mine" }]);
    expect(written.out).toBe(
      `Open this URL in a browser to connect Stand-in:\n  ${url}/approve\nConnected account apn_new ("Mine")\n`,
    );
  });

  it("never fails for want of a browser, and gives up after --wait with a clear message", async () => {
    const { io, written } = recordingIo({ SLUICE_URL: url, SLUICE_API_KEY: KEY, BROWSER: "/nonexistent/browser" });
    await expect(accounts.run({ wait: "1" }, ["connect", "standin"], io)).rejects.toThrow(
      /no account of standin appeared within 1 s: the authorization was not completed/,
    );
    expect(written.out).toContain(`${url}/approve`);
  });

  it("refuses an unknown action and a bad --wait", async () => {
    const { io } = recordingIo({ SLUICE_URL: url, SLUICE_API_KEY: KEY });
    await expect(accounts.run({}, ["list", "standin"], io)).rejects.toThrow(/unknown action "list"/);
    await expect(accounts.run({ wait: "soon" }, ["connect", "standin"], io)).rejects.toThrow(/--wait/);
  });
});
