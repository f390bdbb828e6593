/**
 * The proxy npm is given for every host but the registry's (npm-cli.ts, decision 542): a server
 * on 127.0.0.1 of this process that refuses every request and every `CONNECT` with a 403, at
 * once. A package's dependency on a tarball URL elsewhere then fails npm's lockfile resolution
 * with that 403 (which npm does not retry) instead of being fetched from wherever it points.
 * Started on first use, unreferenced: it never keeps the process alive.
 */
import type { AddressInfo } from "node:net";
import { nodeHttp } from "../node-http.ts";

const REFUSAL = "Sluice installs npm packages from the registry only\n";

let started: Promise<string> | undefined;

/** The proxy's URL (`http://127.0.0.1:<port>`), the server started the first time. */
export function refusingProxyUrl(): Promise<string> {
  started ??= new Promise<string>((resolve, reject) => {
    const server = nodeHttp.createServer((_request, response) => {
      response.writeHead(403, { "content-type": "text/plain", connection: "close" });
      response.end(REFUSAL);
    });
    server.on("connect", (_request, socket) => {
      socket.on("error", () => {});
      socket.end(
        `HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(REFUSAL)}\r\nconnection: close\r\n\r\n${REFUSAL}`,
      );
    });
    server.on("clientError", (_error, socket) => socket.destroy());
    server.once("error", (error) => {
      started = undefined;
      reject(error);
    });
    server.listen(0, "127.0.0.1", () => {
      server.unref();
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    });
  });
  return started;
}
