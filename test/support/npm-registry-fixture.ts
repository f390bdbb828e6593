/**
 * A tiny npm registry on 127.0.0.1 for tests that install packages for real without the internet.
 * It serves, for each fixture package, a packument at `/<name>` (`/@scope%2fname` for a scoped
 * one, as npm asks) with `versions`, `dist-tags` and each version's `dist` (tarball URL on this
 * server, `integrity` and `shasum` of the tarball), and the tarballs themselves at
 * `/<name>/-/<basename>-<version>.tgz`. Tarballs are built in memory: a ustar archive of
 * `package/package.json` and the package's files, gzipped. Anything else answers 404 as the public
 * registry does. Every request is recorded, so a test can tell whether npm downloaded anything.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { compareVersions, parseVersion } from "#adapters/npm/version-ranges";
import { folderFiles } from "./registry-tree.ts";

/** One version of a package the registry serves. */
export interface FixturePackage {
  readonly name: string;
  readonly version: string;
  readonly dependencies?: Readonly<Record<string, string>>;
  /** Files of the package besides `package.json` (written from the fields above), by relative path. */
  readonly files: Readonly<Record<string, string>>;
  /** The package's own `package.json` fields (`main`, `exports`, ...), kept over the ones written from the fields above. */
  readonly manifest?: Readonly<Record<string, unknown>>;
}

export interface RegistryRequest {
  readonly method: string;
  /** The path as npm sent it (`/@scope%2fname`). */
  readonly path: string;
  readonly userAgent: string;
}

export interface NpmRegistryFixture {
  /** Base URL with a trailing slash, for `--registry`. */
  readonly url: string;
  /** Every request so far, oldest first. */
  readonly requests: readonly RegistryRequest[];
  /** How many tarballs were downloaded so far, of `name` or of any package. */
  tarballRequests(name?: string): number;
  close(): Promise<void>;
}

/** Starts the registry on a free port of 127.0.0.1. */
export async function startNpmRegistry(packages: readonly FixturePackage[]): Promise<NpmRegistryFixture> {
  const requests: RegistryRequest[] = [];
  const server = createServer((request, response) => {
    requests.push({
      method: request.method ?? "",
      path: request.url ?? "",
      userAgent: String(request.headers["user-agent"] ?? ""),
    });
    serve(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;

  const tarballs = new Map<string, { name: string; data: Buffer }>();
  const packuments = new Map<string, Packument>();
  for (const pkg of packages) {
    const manifest = {
      main: "index.js",
      ...pkg.manifest,
      name: pkg.name,
      version: pkg.version,
      dependencies: pkg.dependencies ?? {},
    };
    const data = packageTarball({ "package.json": JSON.stringify(manifest, null, 2), ...pkg.files });
    const tarballPath = `/${pkg.name}/-/${pkg.name.split("/").pop()}-${pkg.version}.tgz`;
    tarballs.set(tarballPath, { name: pkg.name, data });
    const packument = packuments.get(pkg.name) ?? { name: pkg.name, "dist-tags": {}, versions: {} };
    packument.versions[pkg.version] = {
      ...manifest,
      _id: `${pkg.name}@${pkg.version}`,
      dist: {
        tarball: new URL(tarballPath.slice(1), url).href,
        integrity: `sha512-${createHash("sha512").update(data).digest("base64")}`,
        shasum: createHash("sha1").update(data).digest("hex"),
      },
    };
    packuments.set(pkg.name, packument);
  }
  for (const packument of packuments.values()) {
    const newestFirst = Object.keys(packument.versions).sort((a, b) =>
      compareVersions(parseVersion(b)!, parseVersion(a)!),
    );
    packument["dist-tags"].latest = newestFirst[0]!;
  }

  function serve(request: IncomingMessage, response: ServerResponse): void {
    const path = (request.url ?? "/").split("?")[0] ?? "/";
    const tarball = tarballs.get(decodeURIComponent(path));
    if (request.method === "GET" && tarball) {
      response.writeHead(200, { "content-type": "application/octet-stream", "content-length": tarball.data.length });
      response.end(tarball.data);
      return;
    }
    const packument = packuments.get(decodeURIComponent(path.slice(1)));
    if (request.method === "GET" && packument) {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify(packument));
      return;
    }
    response.writeHead(404, { "content-type": "application/json" });
    response.end('{"error":"Not found"}');
  }

  return {
    url,
    requests,
    tarballRequests: (name) =>
      requests.filter((seen) => {
        const tarball = tarballs.get(decodeURIComponent(seen.path.split("?")[0] ?? ""));
        return tarball !== undefined && (name === undefined || tarball.name === name);
      }).length,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface Packument {
  name: string;
  "dist-tags": Record<string, string>;
  versions: Record<string, unknown>;
}

/**
 * A package tarball as npm publishes it: every file under `package/`, in a gzipped ustar archive;
 * `links` adds symbolic links (path to target), as a hostile archive could.
 */
export function packageTarball(
  files: Readonly<Record<string, string>>,
  links: Readonly<Record<string, string>> = {},
): Buffer {
  const blocks = [
    ...Object.entries(files).flatMap(([path, text]) => tarEntry(`package/${path}`, Buffer.from(text))),
    ...Object.entries(links).flatMap(([path, target]) => tarEntry(`package/${path}`, Buffer.alloc(0), target)),
  ];
  // Two zero blocks end the archive.
  return gzipSync(Buffer.concat([...blocks, Buffer.alloc(1024)]));
}

/** npm's own fixed mtime for reproducible tarballs (1985-10-26). */
const TAR_MTIME = 499162500;

/** One regular file (or a symbolic link to `link`): a 512-byte ustar header, then the data padded to 512 bytes. */
function tarEntry(path: string, data: Buffer, link?: string): Buffer[] {
  if (Buffer.byteLength(path) > 100) throw new Error(`tar path too long for a plain ustar header: ${path}`);
  const header = Buffer.alloc(512);
  header.write(path, 0, 100, "utf8");
  writeOctal(header, 100, 8, 0o644); // mode
  writeOctal(header, 108, 8, 0); // uid
  writeOctal(header, 116, 8, 0); // gid
  writeOctal(header, 124, 12, data.length);
  writeOctal(header, 136, 12, TAR_MTIME);
  header.write(link === undefined ? "0" : "2", 156, "ascii"); // type: regular file or symbolic link
  if (link !== undefined) header.write(link, 157, 100, "utf8");
  header.write("ustar\0", 257, "binary");
  header.write("00", 263, "ascii");
  // The checksum is the byte sum of the header with its own field read as spaces.
  header.fill(" ", 148, 156);
  const checksum = header.reduce((sum, byte) => sum + byte, 0);
  header.write(`${checksum.toString(8).padStart(6, "0")}\0 `, 148, 8, "ascii");
  const padding = Buffer.alloc((512 - (data.length % 512)) % 512);
  return [header, data, padding];
}

function writeOctal(header: Buffer, offset: number, length: number, value: number): void {
  header.write(`${value.toString(8).padStart(length - 1, "0")}\0`, offset, length, "ascii");
}

/**
 * Installed packages of Sluice's own `node_modules` and everything they depend on, as fixture
 * packages with their real manifests (install scripts left out): what npm's registry would serve
 * for them, without the network.
 */
export function installedPackages(nodeModules: string, names: readonly string[]): FixturePackage[] {
  const found = new Map<string, FixturePackage>();
  const queue = [...names];
  for (let name = queue.pop(); name !== undefined; name = queue.pop()) {
    if (found.has(name)) continue;
    const dir = join(nodeModules, name);
    const { scripts: _scripts, ...manifest } = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
      version: string;
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
      scripts?: unknown;
    };
    found.set(name, {
      name,
      version: manifest.version,
      dependencies: manifest.dependencies ?? {},
      manifest,
      files: folderFiles(dir, (path) => path !== "package.json"),
    });
    // npm installs optional dependencies too (pg's `pg-cloudflare`), where it can.
    queue.push(...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.optionalDependencies ?? {}));
  }
  return [...found.values()];
}
