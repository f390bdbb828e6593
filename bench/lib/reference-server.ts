/**
 * The reference of every scenario: a bare Node.js HTTP server that reads the request body,
 * parses it as JSON and answers 200 with a small JSON body. Run as its own child process
 * (`startReference` in processes.ts); prints `listening <port>` once it serves 127.0.0.1.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

const server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    let status = 200;
    try {
      const text = Buffer.concat(chunks).toString("utf8");
      if (text) JSON.parse(text);
    } catch {
      status = 400;
    }
    const body = status === 200 ? '{"ok":true}' : '{"error":"malformed JSON"}';
    response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    response.end(body);
  });
});
server.keepAliveTimeout = 30_000;
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
// Never outlive the bench: stdin is a pipe from it, which closes when it exits.
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
