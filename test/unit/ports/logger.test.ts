import { PassThrough, Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { boundedLineWriter, logFormatFor, streamLogger } from "#adapters/log-output";
import {
  createLogger,
  formatJsonLine,
  formatTextLine,
  LOG_LEVELS,
  type LogFormat,
  type LogLevel,
  MAX_LOG_VALUE_CHARS,
} from "#core/ports/logger";
import { isoTime } from "#core/time";

const T = Date.UTC(2026, 10, 26, 5, 30, 1, 234);

function collect(level: LogLevel, format: LogFormat = "json", base?: Record<string, unknown>) {
  const lines: string[] = [];
  const log = createLogger({ level, format, base, write: (line) => lines.push(line), now: () => T });
  return { log, lines };
}

describe("log levels", () => {
  it.each([
    ["debug", ["debug", "info", "warn", "error"]],
    ["info", ["info", "warn", "error"]],
    ["warn", ["warn", "error"]],
    ["error", ["error"]],
    ["silent", []],
  ] as const)("at %s writes %j", (level, written) => {
    const { log, lines } = collect(level);
    for (const severity of ["debug", "info", "warn", "error"] as const) log[severity](`a ${severity} line`);
    expect(lines.map((line) => JSON.parse(line).level)).toEqual(written);
  });

  it("keeps the level in children, which add their fields to every line", () => {
    const { log, lines } = collect("warn", "json", { service: "sluice" });
    const child = log.child({ request_id: "r1" });
    child.info("not written");
    child.warn("written", { source_id: "dc_1" });
    expect(lines.map((line) => JSON.parse(line))).toEqual([
      {
        level: "warn",
        time: "2026-11-26T05:30:01.234Z",
        message: "written",
        service: "sluice",
        request_id: "r1",
        source_id: "dc_1",
      },
    ]);
  });

  it("lets a line's field win over the logger's, written once in either format", () => {
    for (const format of ["json", "text"] as const) {
      const { log, lines } = collect("info", format, { service: "sluice", source_id: "base" });
      log.info("x", { source_id: "line" });
      const line = lines[0] as string;
      expect(line.split("source_id").length - 1, format).toBe(1);
      expect(line).toContain(format === "json" ? '"source_id":"line"' : "source_id=line");
    }
  });

  it("names every level a setting may take", () => {
    expect(LOG_LEVELS).toEqual(["debug", "info", "warn", "error", "silent"]);
  });

  it("never throws for a line it cannot write", () => {
    const log = createLogger({
      level: "info",
      write: () => {
        throw new Error("EPIPE");
      },
      now: () => T,
    });
    expect(() => log.error("lost")).not.toThrow();
  });
});

describe("the JSON format", () => {
  it("writes one object per line with level, time and message first, which no field overwrites", () => {
    const line = formatJsonLine("info", T, "request", {
      message: "spoofed",
      level: "error",
      time: "then",
      method: "GET",
      status: 200,
      skipped: undefined,
    });
    expect(line).not.toContain("\n");
    expect(line).toBe(
      '{"level":"info","time":"2026-11-26T05:30:01.234Z","message":"request","method":"GET","status":200}',
    );
  });

  it("writes values JSON cannot hold (a bigint, a cycle) as text instead of throwing", () => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(JSON.parse(formatJsonLine("warn", T, "odd", { big: 10n }))).toMatchObject({ message: "odd", big: "10" });
    expect(JSON.parse(formatJsonLine("warn", T, "odd", { cycle }))).toMatchObject({ cycle: { self: "[cycle]" } });
  });

  it("cuts a long string value, saying how long it was", () => {
    const parsed = JSON.parse(formatJsonLine("error", T, "run failed", { error_message: "x".repeat(10_000) }));
    expect(parsed.error_message).toHaveLength(MAX_LOG_VALUE_CHARS + "... (10000 characters)".length);
    expect(parsed.error_message).toMatch(/\.\.\. \(10000 characters\)$/);
  });
});

describe("the text format", () => {
  it("writes time, level, message and key=value fields on one line", () => {
    expect(
      formatTextLine("info", T, "request", {
        method: "POST",
        path: "/v1/sources",
        status: 200,
        duration_ms: 12.5,
        ok: true,
        none: undefined,
      }),
    ).toBe("2026-11-26T05:30:01.234Z INFO  request method=POST path=/v1/sources status=200 duration_ms=12.5 ok=true");
  });

  it("quotes values with spaces, quotes, = or nothing, and writes objects as JSON", () => {
    expect(formatTextLine("warn", T, "x", { a: "two words", b: 'say "hi"', c: "k=v", d: "", e: { n: 1 } })).toBe(
      '2026-11-26T05:30:01.234Z WARN  x a="two words" b="say \\"hi\\"" c="k=v" d="" e={"n":1}',
    );
  });

  it("cannot be made to break a line or send terminal controls by what a value or message holds", () => {
    const hostile = "/v1/x\nINFO forged line\r\u001b[31mred\u009b2J\u2028end\u007f";
    const line = formatTextLine("info", T, `message ${hostile}`, { path: hostile });
    expect(line.split("\n")).toHaveLength(1);
    expect([...line].filter((c) => /[\p{Cc}\u2028\u2029]/u.test(c))).toEqual([]);
    expect(line).toContain('path="/v1/x\\nINFO forged line\\r\\u001b[31mred\\u009b2J\\u2028end\\u007f"');
  });

  it("cuts a long value", () => {
    const line = formatTextLine("error", T, "run failed", { error_message: "y".repeat(5000) });
    expect(line.length).toBeLessThan(MAX_LOG_VALUE_CHARS + 200);
    expect(line).toContain("(5000 characters)");
  });
});

describe("time stamps", () => {
  it("are the ISO form of the millisecond, also when the second changes or repeats", () => {
    for (const ms of [T, T + 1, T + 766, T + 1000, T - 1, 0, 1_700_000_000_999, T]) {
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    }
  });

  it("are toISOString's for any time: before 1970, past year 9999, a fraction of a ms, an invalid one", () => {
    const far = Date.UTC(12_345, 0, 1, 2, 3, 4, 5);
    for (const ms of [-1, -1_500, -62_198_755_200_001, far, far + 1, T + 0.5, -0.5, T, 8.64e15]) {
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    }
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
  });
});

describe("the output stream", () => {
  it("is text on a terminal and JSON otherwise, unless the format is set", () => {
    expect(logFormatFor(undefined, { isTTY: true })).toBe("text");
    expect(logFormatFor(undefined, { isTTY: false })).toBe("json");
    expect(logFormatFor(undefined, {})).toBe("json");
    expect(logFormatFor("json", { isTTY: true })).toBe("json");
    expect(logFormatFor("text", {})).toBe("text");
  });

  it("drops lines while its reader does not keep up, then says how many were dropped", async () => {
    // A reader that takes nothing until released, as a stalled pipe.
    const written: string[] = [];
    const held: (() => void)[] = [];
    const stream = new Writable({
      write(chunk, _encoding, done) {
        written.push(String(chunk));
        held.push(done);
      },
    });
    const write = boundedLineWriter(stream, (count) => `dropped ${count}`, { maxUnwrittenBytes: 100 });
    for (let i = 0; i < 50; i++) write(`line ${i} ${"z".repeat(20)}`);
    // What fit under the bound waits in the stream; the rest was counted, not buffered.
    expect(stream.writableLength).toBeLessThan(200);
    const drain = async () => {
      while (stream.writableLength > 0) {
        for (const done of held.splice(0)) done();
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    await drain();
    const kept = written.length;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(10);
    write("after");
    await drain();
    expect(written.slice(kept)).toEqual([`dropped ${50 - kept}\n`, "after\n"]);
  });

  /** A stream that takes every write at once, keeping each call's chunk. */
  const chunkStream = () => {
    const chunks: string[] = [];
    const stream = new Writable({
      write(chunk, _encoding, done) {
        chunks.push(String(chunk));
        done();
      },
    });
    return { chunks, stream };
  };
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

  it("per turn: writes one turn's lines in one call, in order, before the next turn", async () => {
    const { chunks, stream } = chunkStream();
    const write = boundedLineWriter(stream, (count) => `dropped ${count}`, { perTurn: true });
    write("a");
    write("b");
    expect(chunks).toEqual([]);
    await nextTurn();
    expect(chunks).toEqual(["a\nb\n"]);
    write("c");
    await nextTurn();
    expect(chunks).toEqual(["a\nb\n", "c\n"]);
  });

  it("per turn: bounds one turn's lines, then says how many were dropped", async () => {
    const { chunks, stream } = chunkStream();
    const write = boundedLineWriter(stream, (count) => `dropped ${count}`, { perTurn: true, maxUnwrittenBytes: 100 });
    for (let i = 0; i < 50; i++) write(`line ${i} ${"z".repeat(20)}`);
    await nextTurn();
    const kept = chunks.join("").split("\n").filter(Boolean);
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(10);
    write("after");
    await nextTurn();
    expect(chunks.at(-2)).toBe(`dropped ${50 - kept.length}\n`);
    expect(chunks.at(-1)).toBe("after\n");
  });

  it("per turn: a process that exits within the turn still writes the turn's lines", async () => {
    const { spawnSync } = await import("node:child_process");
    const script = [
      `const { streamLogger } = await import(${JSON.stringify(new URL("../../../functions/adapters/log-output.ts", import.meta.url).href)});`,
      `const log = streamLogger({ level: "info", format: "json", perTurn: true });`,
      `log.info("first"); log.error("last words"); process.exit(3);`,
    ].join("\n");
    const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(child.status).toBe(3);
    const messages = child.stderr
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line).message);
    expect(messages).toEqual(["first", "last words"]);
  });

  it("survives a stream that fails (its reader went away)", () => {
    const stream = new PassThrough();
    const log = streamLogger({ level: "info", format: "json", stream });
    stream.destroy(new Error("EPIPE"));
    expect(() => log.info("after the reader left")).not.toThrow();
  });

  it("writes the configured format at the configured level", () => {
    const stream = new PassThrough();
    const log = streamLogger({ level: "warn", format: "text", stream, base: { service: "sluice" } });
    log.info("hidden");
    log.warn("shown", { n: 1 });
    expect(String(stream.read())).toMatch(/^\S+Z WARN {2}shown service=sluice n=1\n$/);
  });
});
