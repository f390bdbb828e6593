import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { importCandidates } from "#core/component-files";
import { importSpecifiers } from "#core/import-specifiers";

/** `test/fixtures/registry-tree/`: components written afresh in the public registry's layout. */
export const REGISTRY_TREE = fileURLToPath(new URL("../fixtures/registry-tree/", import.meta.url));

/**
 * The files of one app folder of the fixture tree (`components/<app>/`), by path relative to it,
 * as a client sends them in `component_files` (README files left out).
 */
export function appFiles(app: string): Record<string, string> {
  return folderFiles(join(REGISTRY_TREE, "components", app), (path) => !path.endsWith(".md"));
}

/** Every file under `root` that `keep` keeps, by `/`-separated path relative to it (folders without `node_modules`). */
export function folderFiles(root: string, keep: (path: string) => boolean = () => true): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      const name = relative(root, path).split("\\").join("/");
      if (entry.isDirectory()) {
        if (entry.name !== "node_modules") walk(path);
      } else if (keep(name)) files[name] = readFileSync(path, "utf8");
    }
  };
  walk(root);
  return files;
}

/**
 * One component of an installed package in the registry's layout (`node_modules/@pipedream/<app>`),
 * as a client sends it in `component_files`: the entry and every file it reaches by relative
 * imports, by path relative to the package, resolved as Sluice resolves them. Nothing else of the
 * package (its `package.json` and its own `node_modules` stay behind, as for `sluice deploy`).
 */
export function packageComponentFiles(packageDir: string, entry: string): Record<string, string> {
  const files: Record<string, string> = {};
  const visit = (path: string) => {
    if (path in files) return;
    const code = readFileSync(join(packageDir, path), "utf8");
    files[path] = code;
    for (const specifier of importSpecifiers(code).filter((s) => s.startsWith("."))) {
      const candidates = importCandidates(path, specifier);
      const found = "paths" in candidates && candidates.paths.find((p) => isFile(join(packageDir, p)));
      if (!found) throw new Error(`${path}: cannot resolve ${specifier} in ${packageDir}`);
      visit(found);
    }
  };
  visit(entry);
  return files;
}

const isFile = (path: string) => existsSync(path) && statSync(path).isFile();

/** A loopback HTTP server of files, as a static host (or raw.githubusercontent.com) serves a components tree. */
export interface TreeServer {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  /** Paths requested, in order (what was fetched, and how often). */
  readonly requested: string[];
  close(): Promise<void>;
}

/**
 * Serves `test/fixtures/registry-tree/` (`/components/<app>/...`) on 127.0.0.1, plus `routes`:
 * a path's text, or a function answering the request itself (redirects, generated trees).
 */
export async function startTreeServer(
  routes: Record<string, string | ((response: ServerResponse) => void)> = {},
): Promise<TreeServer> {
  const requested: string[] = [];
  const server = createServer((request, response) => {
    const path = decodeURIComponent(new URL(request.url ?? "/", "http://x").pathname);
    requested.push(path);
    const route = routes[path];
    if (typeof route === "function") return route(response);
    if (typeof route === "string") return response.end(route);
    const file = join(REGISTRY_TREE, path);
    if (!file.startsWith(REGISTRY_TREE) || !existsSync(file) || !statSync(file).isFile()) {
      response.writeHead(404);
      return response.end();
    }
    response.end(readFileSync(file));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requested,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
