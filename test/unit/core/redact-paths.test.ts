import { describe, expect, it } from "vitest";
import { redactPaths } from "#core/redact-paths";

describe("redactPaths", () => {
  it("cuts the stack frames of a run to file names and package paths", () => {
    const stack = [
      "Error: boom",
      "    at Object.run (file:///home/ana/.sluice/sandbox/ws_1/3f9a/component.ts:4:11)",
      "    at runInvocation (file:///home/ana/.sluice/sandbox/runtime/sandbox-entry.mjs:812:20)",
      "    at get (/home/ana/.sluice/packages/ab12/node_modules/lodash/get.js:3:7)",
      "    at /var/task/index.mjs:2:1",
      "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)",
    ].join("\n");
    expect(redactPaths(stack)).toBe(
      [
        "Error: boom",
        "    at Object.run (component.ts:4:11)",
        "    at runInvocation (sandbox-entry.mjs:812:20)",
        "    at get (node_modules/lodash/get.js:3:7)",
        "    at index.mjs:2:1",
        "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)",
      ].join("\n"),
    );
  });

  it("cuts paths to source files and file URLs in messages, keeping quotes and punctuation", () => {
    expect(
      redactPaths("Cannot find package 'lodash' imported from /home/ana/.sluice/sandbox/ws_1/3f9a/component.mjs."),
    ).toBe("Cannot find package 'lodash' imported from component.mjs.");
    expect(redactPaths('No matching export in "../../.sluice/packages/ab/node_modules/x/index.js" for "y"')).toBe(
      'No matching export in "node_modules/x/index.js" for "y"',
    );
    expect(redactPaths("see file:///srv/sluice/data/secret-key")).toBe("see secret-key");
    expect(redactPaths("C:\\Users\\ana\\sluice\\bundle.mjs:3 failed")).toBe("bundle.mjs:3 failed");
  });

  it("cuts every path below a given root", () => {
    const message = "EACCES: permission denied, mkdir '/home/ana/.npm/_cacache/tmp'";
    expect(redactPaths(message, ["/home/ana/.npm"])).toBe("EACCES: permission denied, mkdir 'tmp'");
    expect(redactPaths(message, ["/home/bob"])).toBe(message);
  });

  it("leaves URL paths, routes and relative names of the user's own text alone", () => {
    for (const text of [
      "GET https://api.example.com/v1/users/me failed with 404",
      "route /api/users is not allowed",
      "a/b and 1/2 and </div>",
      "./local.js is not a module",
      "ratio 3/4: ok",
    ]) {
      expect(redactPaths(text)).toBe(text);
    }
  });
});
