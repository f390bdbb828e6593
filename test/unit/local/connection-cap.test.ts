import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_MAX_CONNECTIONS,
  maxConnectionsFor,
  openFilesLimitIn,
  serverMaxConnections,
} from "#local-mode/connection-cap";

/**
 * Local mode's cap on its open connections: component code can connect to the server from its
 * sandbox, and a server without a descriptor left for its own files and children stalls for
 * every tenant (a probe held 20,000 connections open from two sources).
 */
const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            20000                40000                files
Max locked memory         8388608              8388608              bytes
`;

describe("the server's connection cap", () => {
  it("reads the soft open-files limit, and none when unlimited or missing", () => {
    expect(openFilesLimitIn(LIMITS)).toBe(20000);
    expect(openFilesLimitIn(LIMITS.replace("20000", "unlimited"))).toBeUndefined();
    expect(openFilesLimitIn("Limit Soft Hard\n")).toBeUndefined();
  });

  it("keeps a quarter of the descriptors for the server itself, and at least 64 connections", () => {
    expect(maxConnectionsFor(20000)).toBe(15000);
    expect(maxConnectionsFor(1024)).toBe(768);
    expect(maxConnectionsFor(50)).toBe(64);
    expect(maxConnectionsFor(undefined)).toBe(DEFAULT_MAX_CONNECTIONS);
  });

  it("is this process's own limit on Linux", () => {
    const own = openFilesLimitIn(readFileSync("/proc/self/limits", "utf8"));
    expect(serverMaxConnections()).toBe(maxConnectionsFor(own));
    expect(serverMaxConnections()).toBeLessThan(own ?? Number.POSITIVE_INFINITY);
  });
});
