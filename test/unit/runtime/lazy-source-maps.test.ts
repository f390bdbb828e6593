import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { formatFrame } from "#runtime/lazy-source-maps";

const dir = mkdtempSync(join(tmpdir(), "sluice-lazy-maps-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * A call site as V8 hands it to `Error.prepareStackTrace`, at `line`:`column` of `url`, in a
 * function that starts at `enclosing` (the same place unless given).
 */
function site(
  url: string,
  line: number,
  column: number,
  { enclosing = [line, column], text = `Object.run (${url}:${line}:${column})` } = {},
): NodeJS.CallSite {
  return {
    getFileName: () => url,
    getLineNumber: () => line,
    getColumnNumber: () => column,
    getEnclosingLineNumber: () => enclosing[0],
    getEnclosingColumnNumber: () => enclosing[1],
    toString: () => text,
  } as unknown as NodeJS.CallSite;
}

/** Generated line 1 column 0 maps to `component.ts` line 3 column 6 (0-based: line 2, column 6). */
const MAP = { version: 3, sources: ["component.ts"], names: [], mappings: "AAEM" };

/** Writes a module named `name` with `text`, and returns its URL. */
function writeModule(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return pathToFileURL(path).href;
}

describe("formatFrame", () => {
  it("maps a frame through the map beside its module, read only then", () => {
    const url = writeModule("beside.mjs", "throw new Error();\n");
    writeFileSync(join(dir, "beside.mjs.map"), JSON.stringify(MAP));
    expect(formatFrame(site(url, 1, 1))).toBe(`Object.run (${pathToFileURL(join(dir, "component.ts")).href}:3:7)`);
  });

  it("maps a frame through a map inline in its module when none lies beside it", () => {
    const inline = Buffer.from(JSON.stringify(MAP)).toString("base64");
    const url = writeModule(
      "inline.mjs",
      `throw new Error();\n//# sourceMappingURL=data:application/json;base64,${inline}\n`,
    );
    expect(formatFrame(site(url, 1, 1))).toMatch(/component\.ts:3:7\)$/);
  });

  it("never follows a map a module names by path, and leaves its frames as they are", () => {
    const secret = join(dir, "secret.map");
    writeFileSync(secret, JSON.stringify(MAP));
    const url = writeModule("named.mjs", `throw new Error();\n//# sourceMappingURL=${secret}\n`);
    expect(formatFrame(site(url, 1, 1))).toBe(`Object.run (${url}:1:1)`);
  });

  it("leaves a frame without a file, or of a module without a map, as it is", () => {
    const url = writeModule("plain.mjs", "throw new Error();\n");
    expect(formatFrame(site(url, 1, 1))).toBe(`Object.run (${url}:1:1)`);
    expect(formatFrame(site("node:internal/x", 4, 2))).toBe("Object.run (node:internal/x:4:2)");
  });

  it("names a minified function by its original name, as Node's own mapping does", () => {
    // Generated column 0 maps to component.ts 3:7 with no name; column 2 to the same place, named `runRequest`.
    const url = writeModule("named-fn.mjs", "function a(){}\n");
    writeFileSync(
      join(dir, "named-fn.mjs.map"),
      JSON.stringify({ version: 3, sources: ["component.ts"], names: ["runRequest"], mappings: "AAEM,EAAAA" }),
    );
    const original = `${pathToFileURL(join(dir, "component.ts")).href}:3:7`;
    // The name the map gives the start of the enclosing function.
    expect(formatFrame(site(url, 1, 3))).toBe(`runRequest (${original})`);
    expect(formatFrame(site(url, 1, 3, { text: `async Object.z0 (${url}:1:3)` }))).toBe(
      `async runRequest (${original})`,
    );
    expect(formatFrame(site(url, 1, 3, { text: `${url}:1:3` }))).toBe(`runRequest (${original})`);
    // No name there: the one at the calling frame's place, when that is in the same module.
    expect(formatFrame(site(url, 1, 1), site(url, 1, 3))).toBe(`runRequest (${original})`);
    expect(formatFrame(site(url, 1, 1), site("node:internal/x", 1, 3))).toBe(`Object.run (${original})`);
    expect(formatFrame(site(url, 1, 1))).toBe(`Object.run (${original})`);
  });
});
