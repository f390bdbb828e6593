import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeComponentInSandbox } from "#adapters/local/component-sandbox";
import { isDomainError } from "#core/errors";

// Real child processes under Node's permission model: nothing here is mocked.
let workDir: string;

beforeAll(() => {
  workDir = mkdtempSync(join(tmpdir(), "sluice-sandbox-"));
});

afterAll(() => {
  rmSync(workDir, { recursive: true, force: true });
});

/** Describes `code` and returns the validation error it must fail with. */
async function loadFailure(code: string, options: { timeoutMs?: number; heapMb?: number } = {}): Promise<string> {
  const error = await describeComponentInSandbox(code, { workDir, ...options }).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  if (!isDomainError(error)) throw new Error(`expected a validation error, got ${String(error)}`);
  expect(error.code).toBe("validation");
  expect(error.issues?.[0]?.field).toBe("component_code");
  return error.message;
}

describe("describeComponentInSandbox", () => {
  it("describes an ES module component", async () => {
    const code = `
      export default {
        name: "Sandbox ESM",
        key: "sandbox-esm",
        version: "0.0.1",
        props: {
          http: "$.interface.http",
          db: "$.service.db",
          timer: { type: "$.interface.timer", default: { intervalSeconds: 60 } },
          n: { type: "integer", min: 1, max: 5 },
        },
        async run() {},
      };`;
    const description = await describeComponentInSandbox(code, { workDir });
    expect(description).toEqual({
      key: "sandbox-esm",
      name: "Sandbox ESM",
      version: "0.0.1",
      type: "source",
      hooks: [],
      methods: [],
      hasRun: true,
      hasAdditionalProps: false,
      props: [
        { name: "http", type: "$.interface.http" },
        { name: "db", type: "$.service.db" },
        { name: "timer", type: "$.interface.timer", default: { intervalSeconds: 60 } },
        { name: "n", type: "integer", min: 1, max: 5 },
      ],
    });
  });

  it("describes a code step written with the global defineComponent, as workflow steps are", async () => {
    const code = `
      export default defineComponent({
        props: { greeting: { type: "string", default: "hi" } },
        async run({ steps, $ }) {
          $.export("$summary", this.greeting);
          return steps.trigger.event;
        },
      });`;
    const description = await describeComponentInSandbox(code, { workDir });
    // No `type`: it describes as a source would; workflow validation (step 5) decides what a step is.
    expect(description).toMatchObject({
      hasRun: true,
      props: [{ name: "greeting", type: "string", default: "hi" }],
    });
  });

  it("describes a CommonJS component that requires a built-in module", async () => {
    const code = `
      const { format } = require("node:util");
      module.exports = {
        name: format("%s", "Sandbox CJS"),
        type: "action",
        props: { secret: "string" },
        methods: { helper() {} },
        async run({ $ }) {},
      };`;
    const description = await describeComponentInSandbox(code, { workDir });
    expect(description).toMatchObject({
      name: "Sandbox CJS",
      type: "action",
      methods: ["helper"],
      hasRun: true,
      props: [{ name: "secret", type: "string" }],
    });
  });

  it("describes a TypeScript component", async () => {
    const code = `
      const defineSource = <T>(component: T): T => component;
      interface Options { label: string }
      const interval: number = 900;
      const options: Options = { label: "Interval" };
      export default defineSource({
        name: "Sandbox TS",
        props: { timer: { type: "$.interface.timer", label: options.label, default: { intervalSeconds: interval } } },
        async run(): Promise<void> {},
      });`;
    const description = await describeComponentInSandbox(code, { workDir });
    expect(description.props).toEqual([
      { name: "timer", type: "$.interface.timer", label: "Interval", default: { intervalSeconds: 900 } },
    ]);
  });

  it("refuses to bundle files the code names by path, relative or absolute", async () => {
    // The bundler runs with Sluice's rights: it must not inline a file of the host for the code.
    const secret = join(workDir, "host-secret.json");
    writeFileSync(secret, '{"token":"host"}');
    for (const specifier of ["./host-secret.json", secret]) {
      const message = await loadFailure(
        `import data from ${JSON.stringify(specifier)};\nexport default { name: JSON.stringify(data) };\n`,
      );
      expect(message).toContain("cannot import");
      expect(message).toContain("line 1");
      // A relative specifier is shown as written, an absolute one by its file name only (item 16).
      expect(message).not.toContain(workDir);
    }
  });

  it("rejects a syntax error with its line number", async () => {
    const message = await loadFailure('export default {\n  name: "x",\n  props: {,\n};\n');
    expect(message).toMatch(/^component_code: .+\(line 3, column \d+\)$/);
  });

  it("rejects a module that throws at top level, with the message and line", async () => {
    const message = await loadFailure('const ok = 1;\nthrow new Error("boom");\nexport default { name: "x" };\n');
    expect(message).toContain("boom");
    expect(message).toContain("line 2");
  });

  it("names the user's own line of TypeScript that throws, after types and comments esbuild drops", async () => {
    const code = [
      "// a comment",
      "interface Settings { retries: number }",
      "type Id = string;",
      "const settings: Settings = { retries: 3 };",
      "",
      'if (settings.retries > 2) throw new Error("too many retries");',
      'export default { name: "x" };',
    ].join("\n");
    const message = await loadFailure(code);
    expect(message).toMatch(/too many retries \(line 6, column \d+\)$/);
  });

  it("stops a module that never finishes loading at the time limit", async () => {
    const started = performance.now();
    const message = await loadFailure("while (true) {}\nexport default {};\n", { timeoutMs: 1500 });
    expect(message).toBe("component_code: loading the component took longer than 1.5s");
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it("rejects a module that allocates without bound, without harming this process", async () => {
    const code = "const hoard = [];\nwhile (true) hoard.push(new Array(1e6).fill(1));\nexport default {};\n";
    const message = await loadFailure(code, { heapMb: 64, timeoutMs: 20_000 });
    expect(message).toMatch(/could not be loaded: its process (was killed by|exited with)/);
  });

  it("denies a CommonJS module writing a file", async () => {
    const target = join(workDir, "written-by-component.txt");
    const message = await loadFailure(
      `require("fs").writeFileSync(${JSON.stringify(target)}, "x");\nmodule.exports = {};\n`,
    );
    expect(message).toContain("ERR_ACCESS_DENIED");
    expect(existsSync(target)).toBe(false);
  });

  it("denies an ES module reading a file outside its bundle", async () => {
    const message = await loadFailure(
      'import("node:fs").then((fs) => fs.readFileSync("/etc/passwd"));\nexport default { name: "x" };\n',
    );
    expect(message).toContain("ERR_ACCESS_DENIED");
  });

  it("gives the component an empty environment", async () => {
    const code = `export default {
      props: { env: { type: "string", default: Object.keys(process.env).join(",") } },
    };`;
    const description = await describeComponentInSandbox(code, { workDir });
    expect(description.props).toEqual([{ name: "env", type: "string", default: "" }]);
  });
});
