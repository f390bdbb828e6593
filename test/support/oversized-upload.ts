import { connect } from "node:net";

/**
 * Sends a request whose body is far larger than a server's limit over a raw socket and resolves
 * with the head of the answer. A raw socket because Node's fetch reports the reset of an upload
 * the server answered early (413) instead of the answer itself.
 */
export function oversizedUpload(
  url: URL,
  head: string,
  options: { declared: boolean; sendBytes: number },
): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let received = "";
    socket.on("data", (chunk) => {
      received += chunk;
      if (received.includes("\r\n\r\n")) {
        socket.destroy();
        resolve(received);
      }
    });
    socket.on("error", reject);
    const framing = options.declared ? `content-length: ${options.sendBytes * 2}` : "transfer-encoding: chunked";
    socket.write(`${head}\r\nhost: x\r\n${framing}\r\n\r\n`);
    const piece = Buffer.alloc(64 * 1024, 32);
    for (let sent = 0; sent < options.sendBytes; sent += piece.length) {
      socket.write(
        options.declared
          ? piece
          : Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")]),
      );
    }
  });
}
