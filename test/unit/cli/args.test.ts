import { describe, expect, it } from "vitest";
import { coerceProps, parseCommandArgs, propAssignments } from "../../../bin/cli/args.ts";
import type { Command } from "../../../bin/cli/command.ts";
import type { UsageError } from "../../../bin/cli/errors.ts";
import { COMMANDS, main } from "../../../bin/cli/main.ts";
import { recordingIo } from "../../support/cli-io.ts";

const command: Command = {
  name: "deploy",
  summary: "",
  usage: "Usage: sluice deploy <file>",
  options: { json: { type: "boolean" }, prop: { type: "string", multiple: true }, n: { type: "string", short: "n" } },
  positionals: { min: 1, max: 1 },
  run: async () => {
    throw new Error("a parse never runs the command");
  },
};

describe("parsing a command line", () => {
  it("asks for help on --help or -h anywhere before --, whatever else is there", () => {
    expect(parseCommandArgs(command, ["x.mjs", "--help"])).toEqual({ help: true });
    expect(parseCommandArgs(command, ["-h"])).toEqual({ help: true });
    expect(parseCommandArgs(command, ["--bogus", "--help", "a", "b"])).toEqual({ help: true });
    // After `--`, it is a file name like any other.
    expect(parseCommandArgs(command, ["--", "--help"])).toEqual({ help: false, values: {}, positionals: ["--help"] });
  });

  it("parses options, repeated options and short flags", () => {
    expect(parseCommandArgs(command, ["x.mjs", "--prop", "a=1", "--prop", "b=2", "-n", "5", "--json"])).toEqual({
      help: false,
      values: { prop: ["a=1", "b=2"], n: "5", json: true },
      positionals: ["x.mjs"],
    });
  });

  it("refuses an unknown option and a wrong count of arguments, with exit code 2 and the usage", () => {
    const refusal = (args: string[]) => {
      try {
        parseCommandArgs(command, args);
      } catch (error) {
        return error as UsageError;
      }
      throw new Error("not refused");
    };
    expect(refusal(["x.mjs", "--bogus"])).toMatchObject({ exitCode: 2, message: expect.stringMatching(/--bogus/) });
    expect(refusal([]).message).toMatch(/missing arguments[\s\S]*Usage: sluice deploy/);
    expect(refusal(["a.mjs", "b.mjs"]).message).toMatch(/unexpected argument "b.mjs"/);
    expect(refusal(["x.mjs", "--prop"]).message).toMatch(/--prop/);
  });
});

describe("--prop", () => {
  it("splits name=value at the first =", () => {
    expect(propAssignments(["greeting=Hi", "url=http://x/?a=b", "empty="])).toEqual({
      greeting: "Hi",
      url: "http://x/?a=b",
      empty: "",
    });
  });

  it("refuses an assignment without a name, and a name given twice", () => {
    expect(() => propAssignments(["=x"])).toThrow(/expected name=value/);
    expect(() => propAssignments(["novalue"])).toThrow(/expected name=value/);
    expect(() => propAssignments(["a=1", "a=2"])).toThrow(/given twice/);
  });

  it("takes a string prop's value as written, and any other prop's as the JSON it spells", () => {
    const declared = [
      { name: "id", type: "string" },
      { name: "count", type: "integer" },
      { name: "enabled", type: "boolean" },
      { name: "timer", type: "$.interface.timer" },
      { name: "tags", type: "string[]" },
    ];
    expect(
      coerceProps(
        {
          id: "007",
          count: "3",
          enabled: "false",
          timer: '{"intervalSeconds":60}',
          tags: '["a","b"]',
          undeclared: "plain text",
        },
        declared,
      ),
    ).toEqual({
      id: "007",
      count: 3,
      enabled: false,
      timer: { intervalSeconds: 60 },
      tags: ["a", "b"],
      undeclared: "plain text",
    });
  });
});

describe("the command table", () => {
  it("prints each command's help, and nothing else, for --help", async () => {
    for (const each of COMMANDS) {
      const { io, written } = recordingIo();
      expect(await main([each.name, "--help"], io)).toBe(0);
      expect(written.out).toBe(`${each.usage}\n`);
      expect(written.err).toBe("");
    }
  });

  it("says so and exits 2 on an unknown command; prints the version for --version", async () => {
    const unknown = recordingIo();
    expect(await main(["deplyo"], unknown.io)).toBe(2);
    expect(unknown.written.err).toMatch(/^sluice: unknown command "deplyo"/);
    const version = recordingIo();
    expect(await main(["--version"], version.io)).toBe(0);
    expect(version.written.out).toMatch(/^sluice \d+\.\d+\.\d+\n$/);
  });
});
