import { describe, expect, it } from "vitest";
import { parseMessage } from "#adapters/local/sandbox-process";
import { LineDecoder, pathRedactor } from "#runtime/sandbox-channel";

describe("LineDecoder: the framing of a sandbox child's messages", () => {
  it("returns the lines a chunk finishes, joining a line split over chunks", () => {
    const decoder = new LineDecoder(100);
    expect(decoder.push('{"a":1}\n{"b"')).toEqual(['{"a":1}']);
    expect(decoder.pendingChars).toBe(4);
    expect(decoder.push(":2}\n\n{")).toEqual(['{"b":2}', ""]);
    expect(decoder.push('"c":3}\n')).toEqual(['{"c":3}']);
    expect(decoder.pendingChars).toBe(0);
  });

  it("refuses a line over the limit, finished or not", () => {
    expect(() => new LineDecoder(10).push(`${"x".repeat(11)}\n`)).toThrow(RangeError);
    const unfinished = new LineDecoder(10);
    unfinished.push("x".repeat(6));
    expect(() => unfinished.push("x".repeat(5))).toThrow(/longer than 10 bytes/);
    // Exactly at the limit, in two pieces, is a line.
    const atLimit = new LineDecoder(10);
    atLimit.push("x".repeat(6));
    expect(atLimit.push("xxxx\n")).toEqual(["x".repeat(10)]);
  });
});

describe("parseMessage: what the host takes from a child", () => {
  it("takes the runtime's messages", () => {
    for (const message of [
      { type: "ready" },
      { type: "beat" },
      { type: "started", invocationId: "i" },
      { type: "exiting", invocationId: "i" },
      { type: "respond", invocationId: "i", response: { status: 200 } },
      { type: "result", result: { invocationId: "i", emits: [] } },
      { type: "described", requestId: "r", ok: false, error: { message: "m" } },
    ]) {
      expect(parseMessage(JSON.stringify(message))).toEqual(message);
    }
  });

  it.each([
    ["not json", /not JSON/],
    ['{"type":"res', /not JSON/],
    ["[1,2]", /not an object/],
    ["null", /not an object/],
    ['"ready"', /not an object/],
    ['{"type":"hello"}', /no known type/],
    ['{"type":"__proto__"}', /no known type/],
    ['{"type":"started"}', /malformed started/],
    ['{"type":"exiting","invocationId":5}', /malformed exiting/],
    ['{"type":"result","result":5}', /malformed result/],
    ['{"type":"result","result":{"invocationId":null}}', /malformed result/],
    ['{"type":"described","requestId":"r"}', /malformed described/],
  ])("refuses %s", (line, why) => {
    expect(parseMessage(line)).toMatch(why);
  });
});

describe("pathRedactor", () => {
  const redact = pathRedactor(["/data/my dir/sandbox/runtime", "/data/my dir/sandbox/sources/dc_1/"]);
  const hash = "a".repeat(64);

  it("takes the server's folders out of stack frames and messages, as paths and as file URLs", () => {
    const stack = [
      "Error: boom",
      `    at Object.run (file:///data/my%20dir/sandbox/sources/dc_1/${hash}/component.ts:3:11)`,
      "    at execute (file:///data/my%20dir/sandbox/runtime/sandbox-entry.mjs:120:7)",
      `    at load (/data/my dir/sandbox/sources/dc_1/${hash}/component.mjs:1:1)`,
    ].join("\n");
    expect(redact(stack)).toBe(
      [
        "Error: boom",
        "    at Object.run (component.ts:3:11)",
        "    at execute (sandbox-entry.mjs:120:7)",
        "    at load (component.mjs:1:1)",
      ].join("\n"),
    );
    expect(
      redact(`Cannot find package 'x' imported from /data/my dir/sandbox/sources/dc_1/${hash}/component.mjs`),
    ).toBe("Cannot find package 'x' imported from component.mjs");
  });

  it("leaves other text alone", () => {
    expect(redact("/etc/passwd and /data/other/sandbox/runtime/x")).toBe(
      "/etc/passwd and /data/other/sandbox/runtime/x",
    );
    expect(pathRedactor([])("/data/x")).toBe("/data/x");
  });

  it("takes a workflow's step folder out too: a step's frames name component.ts", () => {
    const workflow = pathRedactor(["/data/sandbox/workflows/p_1/"]);
    expect(workflow(`    at Object.run (file:///data/sandbox/workflows/p_1/${hash}/steps/component.ts:3:11)`)).toBe(
      "    at Object.run (component.ts:3:11)",
    );
    // Only right below a content hash: a folder of the step's own named steps stays.
    expect(workflow("/data/sandbox/workflows/p_1/steps/x.mjs")).toBe("steps/x.mjs");
  });
});
