import { describe, expect, it } from "vitest";
import type { Json } from "#core/component-model";
import {
  errorEntry,
  MAX_CONTEXT_BYTES,
  MAX_OPTION_LABEL_CHARS,
  MAX_OPTIONS_BYTES,
  MAX_OPTIONS_PER_PAGE,
  OptionsResultError,
  observationsOf,
  optionsPage,
} from "#core/prop-options";

const refused = (returned: Json | undefined) => {
  try {
    optionsPage(returned);
  } catch (error) {
    expect(error).toBeInstanceOf(OptionsResultError);
    return (error as Error).message;
  }
  throw new Error("accepted");
};

describe("optionsPage: what options() returned, read as hostile input", () => {
  it("puts a list of strings in stringOptions, as the original answers", () => {
    expect(optionsPage(["a", "b"])).toEqual({ options: null, stringOptions: ["a", "b"], context: null });
    expect(optionsPage([])).toEqual({ options: null, stringOptions: [], context: null });
  });

  it("puts {label, value} options in options; strings, numbers and booleans among them label themselves", () => {
    expect(optionsPage([{ label: "Main", value: 1 }, "x", 7, false, { value: { id: 2 } }])).toEqual({
      options: [
        { label: "Main", value: 1 },
        { label: "x", value: "x" },
        { label: "7", value: 7 },
        { label: "false", value: false },
        { label: '{"id":2}', value: { id: 2 } },
      ],
      stringOptions: null,
      context: null,
    });
  });

  it("reads {options, context} and keeps the context for the next page", () => {
    expect(optionsPage({ options: ["a"], context: { nextPageToken: "t2" } })).toEqual({
      options: null,
      stringOptions: ["a"],
      context: { nextPageToken: "t2" },
    });
    expect(optionsPage({ options: [], context: null }).context).toBeNull();
  });

  it("refuses what is not a list of options, naming the item", () => {
    expect(refused(null)).toMatch(/not nothing/);
    expect(refused(undefined)).toMatch(/not nothing/);
    expect(refused("a")).toMatch(/not a string/);
    expect(refused({ items: [] })).toMatch(/not an object without an options array/);
    expect(refused(["a", null])).toBe("options()[1] must be a string or {label, value}, not nothing");
    expect(refused([["a"]])).toMatch(/options\(\)\[0\] must be .* not an array/);
    expect(refused([{ label: "no value" }])).toMatch(/options\(\)\[0\]/);
    expect(refused([{ label: 3, value: 3 }])).toBe("options()[0].label must be a string");
    expect(refused({ options: [], context: "t2" })).toMatch(/context that is not an object/);
  });

  it("bounds the count, the labels, the bytes and the context", () => {
    expect(refused(Array.from({ length: MAX_OPTIONS_PER_PAGE + 1 }, () => "a"))).toMatch(
      `returned ${MAX_OPTIONS_PER_PAGE + 1} options`,
    );
    expect(optionsPage(Array.from({ length: MAX_OPTIONS_PER_PAGE }, () => "a")).stringOptions).toHaveLength(
      MAX_OPTIONS_PER_PAGE,
    );
    expect(refused(["x".repeat(MAX_OPTION_LABEL_CHARS + 1)])).toMatch(/label over/);
    const big = "v".repeat(Math.ceil(MAX_OPTIONS_BYTES / 100));
    expect(refused(Array.from({ length: 101 }, () => ({ label: "a", value: big })))).toMatch(/bytes of options/);
    expect(refused({ options: [], context: { token: "t".repeat(MAX_CONTEXT_BYTES) } })).toMatch(/context over/);
  });
});

describe("observations and errors", () => {
  it("turns console lines and the error into the original's observations, paths redacted", () => {
    const observations = observationsOf([{ ts: 1, level: "warn", message: "slow" }], {
      name: "TypeError",
      message: "x is undefined at /srv/sluice/data/sandbox/sources/dc_1/abc/component.mjs:3:9",
      ts: 2,
    });
    expect(observations).toEqual([
      { k: "console.warn", msg: "slow", ts: 1 },
      { k: "error", err: { name: "TypeError", message: "x is undefined at component.mjs:3:9" }, ts: 2 },
    ]);
  });

  it("keeps at most 100 console lines", () => {
    const logs = Array.from({ length: 150 }, (_, i) => ({ ts: i, level: "log" as const, message: `${i}` }));
    expect(observationsOf(logs)).toHaveLength(100);
  });

  it("writes an error entry as the JSON text the original's SDK parses", () => {
    expect(JSON.parse(errorEntry({ name: "Error", message: "boom" }))).toEqual({ name: "Error", message: "boom" });
  });
});
