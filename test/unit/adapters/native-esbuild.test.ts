import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chooseEsbuild, esbuildBinaryPath } from "#adapters/aws/native-esbuild";
import { PROJECT_ROOT } from "../../../lib/constructs/sluice-function.ts";

const NODE_MODULES = join(PROJECT_ROOT, "node_modules");
/** This machine's own platform and architecture: what the selection runs on here (x64), as on Lambda (arm64). */
const HERE = { platform: process.platform, arch: process.arch };

/**
 * A function's `node_modules` as the stack ships it: the esbuild JS API and the binary package of
 * `target`, its binary given by `binary` (a copy of a real one, or a stand-in).
 */
function taskNodeModules(root: string, name: string, target: typeof HERE, binary: (path: string) => void): string {
  const modules = join(root, name, "node_modules");
  cpSync(join(NODE_MODULES, "esbuild", "package.json"), join(modules, "esbuild", "package.json"));
  const path = esbuildBinaryPath(modules, target);
  mkdirSync(join(path, ".."), { recursive: true });
  binary(path);
  return modules;
}

describe("chooseEsbuild (the deploying functions' bundler on Lambda)", () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), "sluice-native-esbuild-"));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("picks the native binary of this architecture when it is there and runs", async () => {
    const modules = taskNodeModules(root, "native", HERE, (path) =>
      copyFileSync(esbuildBinaryPath(NODE_MODULES, HERE), path),
    );
    const choice = await chooseEsbuild(modules, HERE);
    expect(choice).toEqual({
      flavour: "native",
      binary: esbuildBinaryPath(modules, HERE),
      version: expect.stringMatching(/^\d+\.\d+\.\d+$/),
    });
  });

  it("falls back to esbuild-wasm when the binary package is absent", async () => {
    const modules = join(root, "absent", "node_modules");
    cpSync(join(NODE_MODULES, "esbuild", "package.json"), join(modules, "esbuild", "package.json"));
    expect(await chooseEsbuild(modules, HERE)).toEqual({
      flavour: "wasm",
      reason: `@esbuild/${HERE.platform}-${HERE.arch} is not installed`,
    });
  });

  it("runs a binary that lost its executable bit (a zip that dropped the mode) from a copy in the scratch folder", async () => {
    const modules = taskNodeModules(root, "not-executable", HERE, (path) => {
      copyFileSync(esbuildBinaryPath(NODE_MODULES, HERE), path);
      chmodSync(path, 0o644);
    });
    const scratch = join(root, "scratch");
    expect(await chooseEsbuild(modules, HERE, scratch)).toMatchObject({
      flavour: "native",
      binary: join(scratch, "esbuild"),
    });
    // With nowhere to copy it, WebAssembly.
    const choice = await chooseEsbuild(modules, HERE);
    expect(choice).toMatchObject({ flavour: "wasm", reason: expect.stringContaining("does not run here (EACCES)") });
  });

  it("falls back when the binary is not a program of this machine (another architecture's)", async () => {
    const modules = taskNodeModules(root, "foreign", HERE, (path) => {
      // An ELF header the kernel refuses to run: what an arm64 binary is on x64, and an x64 one on arm64.
      writeFileSync(path, Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]), Buffer.alloc(57)]));
      chmodSync(path, 0o755);
    });
    const choice = await chooseEsbuild(modules, HERE);
    expect(choice).toMatchObject({
      flavour: "wasm",
      reason: expect.stringMatching(/does not run here \((ENOEXEC|exit \d+)\)/),
    });
  });

  it("falls back when the binary is another version than the esbuild API beside it", async () => {
    const modules = taskNodeModules(root, "other-version", HERE, (path) => {
      writeFileSync(path, "#!/bin/sh\necho 0.0.1\n");
      chmodSync(path, 0o755);
    });
    const choice = await chooseEsbuild(modules, HERE);
    expect(choice).toMatchObject({ flavour: "wasm", reason: expect.stringContaining("is 0.0.1, esbuild is") });
  });

  it("loads esbuild with that binary as its service: a bundle runs on the binary it chose", async () => {
    // A task root as on Lambda: the entry bundled with esbuild external, beside its node_modules.
    const task = join(root, "task");
    const modules = taskNodeModules(root, "task", HERE, (path) =>
      copyFileSync(esbuildBinaryPath(NODE_MODULES, HERE), path),
    );
    rmSync(join(modules, "esbuild"), { recursive: true });
    symlinkSync(join(NODE_MODULES, "esbuild"), join(modules, "esbuild"));
    const entry = join(task, "entry.ts");
    // It lists the executables of its child processes after a build: esbuild's service is one.
    writeFileSync(
      entry,
      `import { readdirSync, readFileSync, readlinkSync } from "node:fs";
      import { loadLambdaEsbuild } from ${JSON.stringify(join(PROJECT_ROOT, "functions/adapters/aws/native-esbuild.ts"))};
      const logs: unknown[] = [];
      const log = { info: (m: string) => logs.push(m), warn: (m: string) => logs.push(m) } as never;
      const esbuild = await loadLambdaEsbuild(${JSON.stringify(modules)}, log, { target: ${JSON.stringify(HERE)} });
      const out = await esbuild.build({ stdin: { contents: "export const x = 1 + 1;" }, write: false, format: "esm" });
      const children = readdirSync("/proc").filter((pid) => /^\\d+$/.test(pid)).filter((pid) => {
        try { return readFileSync("/proc/" + pid + "/stat", "utf8").split(") ")[1]?.split(" ")[1] === String(process.pid); } catch { return false; }
      }).map((pid) => { try { return readlinkSync("/proc/" + pid + "/exe"); } catch { return ""; } });
      process.stdout.write(JSON.stringify({ env: process.env.ESBUILD_BINARY_PATH, logs, children, built: out.outputFiles[0]?.text.includes("1 + 1") }));
      await esbuild.stop();`,
    );
    const esbuild = await import("esbuild");
    await esbuild.build({
      entryPoints: [entry],
      outfile: join(task, "index.mjs"),
      bundle: true,
      platform: "node",
      format: "esm",
      external: ["esbuild", "esbuild-wasm"],
      logLevel: "silent",
      tsconfig: join(PROJECT_ROOT, "tsconfig.json"),
    });
    // A fresh process, as a Lambda container: esbuild reads ESBUILD_BINARY_PATH when it first loads.
    const output = execFileSync(process.execPath, [join(task, "index.mjs")], {
      cwd: task,
      encoding: "utf8",
      env: { PATH: process.env.PATH, HOME: root },
    });
    const result = JSON.parse(output) as { env: string; logs: string[]; children: string[]; built: boolean };
    const binary = esbuildBinaryPath(modules, HERE);
    expect(result.env).toBe(binary);
    expect(result.built).toBe(true);
    expect(result.children, JSON.stringify(result.children)).toEqual([binary]);
    expect(result.logs).toEqual(["bundling components with native esbuild"]);
  });
});
