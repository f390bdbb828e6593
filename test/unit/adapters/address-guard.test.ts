import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { FORBIDDEN_ADDRESS, guardedLookup, isForbiddenAddress } from "#adapters/address-guard";

describe("isForbiddenAddress", () => {
  it.each([
    "127.0.0.1",
    "10.1.2.3",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "::1",
    "::",
    "fe80::1",
    "fd00::1",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    // The same IPv4 addresses in other IPv6 disguises: hex mapped, compatible, NAT64, 6to4.
    "::ffff:7f00:1",
    "::ffff:a9fe:a9fe",
    "::127.0.0.1",
    "::a9fe:a9fe",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::10.0.0.1",
    "2002:7f00:1::",
    "2002:a9fe:a9fe:1::1",
    // IPv4-translated (::ffff:0:0:0/96, written ::ffff:0:a.b.c.d), whatever IPv4 it carries, local-use NAT64 and site-local.
    "::ffff:0:127.0.0.1",
    "::ffff:0:7f00:1",
    "::ffff:0:8.8.8.8",
    "64:ff9b:1::a9fe:a9fe",
    "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
    "fec0::1",
    "feff:ffff::1",
    "not an ip",
  ])("refuses %s", (address) => {
    expect(isForbiddenAddress(address)).toBe(true);
  });

  it.each([
    "8.8.8.8",
    "172.32.0.1",
    "93.184.216.34",
    "2606:4700::1111",
    "::ffff:808:808",
    "64:ff9b::808:808",
    "2002:808:808::1",
    // Neighbours of the translated, local-use NAT64 and site-local blocks.
    "::fffe:0:808:808",
    "::ffff:1:808:808",
    "64:ff9b:0:1::1",
    "64:ff9b:2::1",
    "fe7f:ffff::1",
  ])("allows %s", (address) => {
    expect(isForbiddenAddress(address)).toBe(false);
  });
});

describe("guardedLookup", () => {
  it("fails a host that resolves to loopback with the refusal code, so no connection is made", async () => {
    const error = await new Promise<NodeJS.ErrnoException | null>((resolve) =>
      guardedLookup("localhost", {}, (failure) => resolve(failure)),
    );
    expect(error?.code).toBe(FORBIDDEN_ADDRESS);
  });

  it("is the lookup a request uses: a loopback server is never reached through it", async () => {
    let reached = false;
    const server = createServer((_request, response) => {
      reached = true;
      response.end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const answer = await fetch(`http://127.0.0.1:${port}/`).then((r) => r.status);
      expect(answer).toBe(200);
      reached = false;
      const { request } = await import("node:http");
      const code = await new Promise<string | undefined>((resolve) => {
        const outgoing = request({ host: "localhost", port, lookup: guardedLookup as never }, () =>
          resolve("answered"),
        );
        outgoing.on("error", (error: NodeJS.ErrnoException) => resolve(error.code));
        outgoing.end();
      });
      expect(code).toBe(FORBIDDEN_ADDRESS);
      expect(reached).toBe(false);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
