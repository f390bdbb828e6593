const { startSluice } = await import("./test/support/local-process.ts");
const { apiClient } = await import("./test/support/api-client.ts");
const s = await startSluice({ env: { SLUICE_INVOCATION_TIMEOUT_MS: "3000" } });
try {
  const api = apiClient(s.baseUrl, s.apiKeyFromFile());
  const src = (i: number) => `import { axios } from "@pipedream/platform";\nexport default { name: "s", version: "1", props: { a: { type: "string", optional: true } }, async additionalProps() { return { b: { type: "string", optional: true, label: typeof axios } }; }, async run() {} };\n// ${i}`;
  for (let i = 0; i < 6; i++) {
    const t = performance.now();
    const d = await api("POST", "/sources", { component_code: src(i) });
    console.log(i, "deploy of a source importing axios, with additionalProps", (performance.now() - t).toFixed(0), d.status);
  }
} finally { await s.stop(); }
