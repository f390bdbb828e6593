/**
 * How many connections local mode's server keeps open at once (`server.maxConnections`). Every
 * connection is a file descriptor of the server's, and so are its SQLite files, its sandbox
 * children's pipes and its outgoing webhook connections: past its open-files limit it could open
 * none of those, and every tenant's requests would stall. Component code can open connections to
 * the server from its sandbox (Node 20 has no network permission), so the server keeps a quarter
 * of its descriptors for itself; connections past the cap are closed as they come.
 */
import { readFileSync } from "node:fs";

/** Connections kept when the open-files limit is unknown (not Linux). */
export const DEFAULT_MAX_CONNECTIONS = 8192;

/** The soft limit of open files in `/proc/<pid>/limits` text (`Max open files  20000  20000  files`). */
export function openFilesLimitIn(limitsText: string): number | undefined {
  const match = /^Max open files\s+(\d+|unlimited)\s/m.exec(limitsText);
  if (!match?.[1] || match[1] === "unlimited") return undefined;
  return Number(match[1]);
}

/** The cap for an open-files limit: three quarters of it, at least 64. */
export function maxConnectionsFor(openFiles: number | undefined): number {
  if (openFiles === undefined) return DEFAULT_MAX_CONNECTIONS;
  return Math.max(64, Math.floor(openFiles * 0.75));
}

/** This process's open-files limit (Node raises its soft limit to the hard one as it starts); unknown off Linux. */
export function serverOpenFilesLimit(): number | undefined {
  try {
    return openFilesLimitIn(readFileSync("/proc/self/limits", "utf8"));
  } catch {
    return undefined;
  }
}

/** The cap for this process. */
export function serverMaxConnections(): number {
  return maxConnectionsFor(serverOpenFilesLimit());
}
