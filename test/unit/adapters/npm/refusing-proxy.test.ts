import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { refusingProxyUrl } from "#adapters/npm/refusing-proxy";

describe("refusingProxyUrl", () => {
  it("is one server on 127.0.0.1 that refuses a proxied GET and a CONNECT with a 403 at once", async () => {
    const url = await refusingProxyUrl();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await refusingProxyUrl()).toBe(url);

    const proxied = await fetch(url, { headers: { host: "internal.example:8080" } });
    expect(proxied.status).toBe(403);
    expect(await proxied.text()).toBe("Sluice installs npm packages from the registry only\n");

    const { port } = new URL(url);
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const connect = request({ host: "127.0.0.1", port, method: "CONNECT", path: "10.0.0.1:443" });
      connect.on("connect", (answer, socket) => {
        socket.destroy();
        resolve(answer.statusCode);
      });
      connect.on("error", reject);
      connect.end();
    });
    expect(status).toBe(403);
  });
});
