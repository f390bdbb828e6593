import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { type NpmRegistryFixture, startNpmRegistry } from "../support/npm-registry-fixture.ts";

/**
 * Issue 12, item 1: the bundler runs with the server's rights, so a component (or an npm package
 * it imports) must never make it read a file the component did not legitimately import. esbuild
 * follows `sourceMappingURL` comments of its inputs when it writes a source map, and quoted the
 * target's first token in its error ("Unexpected "<token>" in source map"): another tenant's API
 * key came back in a 400. Each request here names a file of the server; no answer and no line of
 * the server's log may carry any of its content, and the next deploy must work.
 */
const COMPONENT = (marker: string) =>
  `export default {\n  name: "map ${marker}",\n  version: "0.0.1",\n  props: { db: "$.service.db" },\n  async run() {},\n};\n`;

/** A third-party package whose own file names a server file, and one that imports one. */
const MARKER = "zq7MarkerOfTheServerEnvironment";

describe("source-map comments and package imports never make the bundler read the server's files", () => {
  let sluice: SluiceProcess;
  let registry: NpmRegistryFixture;
  let api: ReturnType<typeof apiClient>;
  let secrets: string[];
  let hostFile: string;

  beforeAll(async () => {
    const outside = mkdtempSync(join(tmpdir(), "sluice-host-"));
    hostFile = join(outside, "host-credentials.json");
    writeFileSync(hostFile, '{"token":"zq7HostCredentialNobodyMayRead"}');
    registry = await startNpmRegistry([
      {
        name: "maps-to-api-key",
        version: "1.0.0",
        // In the cache at <data dir>/packages/<hash>/node_modules/maps-to-api-key/index.js.
        files: { "index.js": "module.exports = { answer: 42 };\n//# sourceMappingURL=../../../../api-key\n" },
      },
      {
        name: "imports-a-host-file",
        version: "1.0.0",
        files: { "index.js": `module.exports = require(${JSON.stringify(hostFile)});\n` },
      },
    ]);
    // A key from the environment is not printed, so the log must not hold it either.
    sluice = await startSluice({
      env: {
        SLUICE_API_KEY: `sluice_${randomBytes(18).toString("base64url")}`,
        SLUICE_NPM_REGISTRY: registry.url,
        HOME: outside,
        ZQ_MARKER: MARKER,
      },
    });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    const environ = readFileSync(`/proc/${sluice.child.pid}/environ`, "utf8");
    secrets = [
      sluice.apiKeyFromFile(),
      readFileSync(join(sluice.dataDir, "secret-key"), "utf8").trim(),
      // The first variable of the server's environment, which esbuild quoted, and a value in it.
      environ.split("\0")[0] ?? "",
      MARKER,
      "zq7HostCredentialNobodyMayRead",
    ].filter((secret) => secret.length >= 8);
  }, 60_000);

  afterAll(async () => {
    await sluice?.stop();
    await registry?.close();
  });

  /** Fails when any answer or log line so far carries content of a server file. */
  function expectNoSecret(text: string) {
    for (const secret of secrets) expect(text).not.toContain(secret);
    expect(text).not.toContain("in source map");
  }

  const comments = (dataDir: string) => ({
    "a relative path": "//# sourceMappingURL=../../../api-key",
    "an absolute path": `//# sourceMappingURL=${join(dataDir, "api-key")}`,
    "a file: URL (//@ form)": `//@ sourceMappingURL=${pathToFileURL(join(dataDir, "secret-key")).href}`,
    "/proc/self/environ in a block comment": "/*# sourceMappingURL=/proc/self/environ */",
  });

  for (const endpoint of ["/components", "/sources"] as const) {
    it(`deploys code on POST ${endpoint} without reading the files its comments name`, async () => {
      for (const [what, comment] of Object.entries(comments(sluice.dataDir))) {
        const code = `${COMPONENT(`${endpoint} ${what}`)}${comment}\n`;
        const answer = await api("POST", endpoint, { component_code: code });
        expectNoSecret(JSON.stringify(answer.json));
        expect(answer.status, `${what}: ${JSON.stringify(answer.json)}`).toBe(200);
      }
      expectNoSecret(sluice.output());
    });
  }

  it("keeps the bundler alive when a comment names /dev/zero, and the next deploy works", async () => {
    for (const endpoint of ["/components", "/sources"]) {
      const code = `${COMPONENT(`zero ${endpoint}`)}//# sourceMappingURL=/dev/zero\n`;
      const answer = await api("POST", endpoint, { component_code: code });
      expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    }
    const next = await api("POST", "/components", { component_code: COMPONENT("after /dev/zero") });
    expect(next.status, JSON.stringify(next.json)).toBe(200);
    expect(next.json.data.name).toBe("map after /dev/zero");
  });

  it("ignores the source-map comment of an npm package in the cache", async () => {
    const code = `import pkg from "maps-to-api-key";\nexport default { name: "uses " + pkg.answer, props: {}, async run() {} };\n`;
    for (const endpoint of ["/components", "/sources"]) {
      const answer = await api("POST", endpoint, { component_code: code });
      expectNoSecret(JSON.stringify(answer.json));
      expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    }
    expectNoSecret(sluice.output());
  });

  it("refuses a package that imports a file outside the package cache, without its content", async () => {
    const code = `import creds from "imports-a-host-file";\nexport default { name: JSON.stringify(creds), props: {}, async run() {} };\n`;
    const answer = await api("POST", "/components", { component_code: code });
    expectNoSecret(JSON.stringify(answer.json));
    expect(answer.status).toBe(400);
    expect(answer.json.error).toContain('npm package "imports-a-host-file"');
    expect(answer.json.error).not.toContain(hostFile);
    expectNoSecret(sluice.output());
  });
});
