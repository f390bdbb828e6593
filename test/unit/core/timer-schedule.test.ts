import { Cron } from "croner";
import { describe, expect, it } from "vitest";
import type { TimerSpec } from "#core/component-model";
import { isDomainError } from "#core/errors";
import {
  MAX_TIMER_INTERVAL_SECONDS,
  nextFireAt,
  timerRunEvent,
  toAwsScheduleExpression,
  validateTimerSpec,
} from "#core/timer-schedule";

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();

function validationIssue(input: unknown): { field: string; message: string } {
  try {
    validateTimerSpec(input, "timer");
  } catch (error) {
    if (isDomainError(error) && error.code === "validation" && error.issues?.[0]) return error.issues[0];
    throw error;
  }
  throw new Error(`accepted ${JSON.stringify(input)}`);
}

describe("validateTimerSpec", () => {
  it.each<[unknown, TimerSpec]>([
    [{ intervalSeconds: 60 }, { intervalSeconds: 60 }],
    [{ intervalSeconds: 1 }, { intervalSeconds: 1 }],
    [{ intervalSeconds: MAX_TIMER_INTERVAL_SECONDS }, { intervalSeconds: MAX_TIMER_INTERVAL_SECONDS }],
    [{ cron: null, interval_seconds: 900 }, { intervalSeconds: 900 }],
    [{ intervalSeconds: 60, cron: null }, { intervalSeconds: 60 }],
    [{ intervalSeconds: 60, cron: "  " }, { intervalSeconds: 60 }],
    [{ intervalSeconds: 60, timezone: "Europe/Berlin" }, { intervalSeconds: 60 }],
    [{ intervalSeconds: 60, type: "$.interface.timer" }, { intervalSeconds: 60 }],
    [{ cron: " 0  9 * *\t* " }, { cron: "0 9 * * *" }],
    [
      { cron: "0 9 * * *", timezone: "Europe/Berlin" },
      { cron: "0 9 * * *", timezone: "Europe/Berlin" },
    ],
    [
      { cron: "0 9 * * *", interval_seconds: null, timezone: "UTC" },
      { cron: "0 9 * * *", timezone: "UTC" },
    ],
    [{ cron: "0 9 * * *", timezone: null }, { cron: "0 9 * * *" }],
    [{ cron: "0 30 9 * * *" }, { cron: "0 30 9 * * *" }],
    [{ cron: "@daily" }, { cron: "@daily" }],
    [{ cron: "0 9 ? * MON-FRI" }, { cron: "0 9 ? * MON-FRI" }],
    [{ cron: "0 0 * * 5#2" }, { cron: "0 0 * * 5#2" }],
    [{ cron: "0 0 L * *" }, { cron: "0 0 L * *" }],
  ])("accepts %j", (input, expected) => {
    expect(validateTimerSpec(input, "timer")).toEqual(expected);
  });

  it.each<[unknown, string, RegExp]>([
    [null, "timer", /intervalSeconds .* or cron/],
    ["60", "timer", /must be an object/],
    [[60], "timer", /must be an object/],
    [{}, "timer", /intervalSeconds .* or cron/],
    [{ cron: null, interval_seconds: null }, "timer", /intervalSeconds .* or cron/],
    [{ intervalSeconds: 60, cron: "* * * * *" }, "timer", /not both/],
    [{ interval_seconds: 60, cron: "* * * * *" }, "timer", /not both/],
    [{ intervalSeconds: 0 }, "timer.intervalSeconds", /at least 1/],
    [{ intervalSeconds: -5 }, "timer.intervalSeconds", /at least 1/],
    [{ intervalSeconds: 1.5 }, "timer.intervalSeconds", /whole number/],
    [{ intervalSeconds: "60" }, "timer.intervalSeconds", /whole number/],
    [{ intervalSeconds: MAX_TIMER_INTERVAL_SECONDS + 1 }, "timer.intervalSeconds", /at most 31622400/],
    [{ cron: 5 }, "timer.cron", /must be a string/],
    [{ cron: "* * *" }, "timer.cron", /5 fields/],
    [{ cron: "* * * * * * *" }, "timer.cron", /5 fields/],
    [{ cron: "0 25 * * *" }, "timer.cron", /Invalid value for hour: 25/],
    [{ cron: "0 0 * 13 *" }, "timer.cron", /Invalid value for month: 13/],
    [{ cron: "0 0 0 * *" }, "timer.cron", /Invalid value for day of month: 0/],
    [{ cron: "x * * * *" }, "timer.cron", /illegal characters/],
    [{ cron: "0/15 * * * *" }, "timer.cron", /stepping/],
    [{ cron: "? 0 * * *" }, "timer.cron", /only in day-of-month and day-of-week/],
    [{ cron: "30 0 9 * * *" }, "timer.cron", /seconds field .* must be 0/],
    [{ cron: "0 0 1 * 1" }, "timer.cron", /not both/],
    [{ cron: "0 0 30 2 *" }, "timer.cron", /never matches/],
    [{ cron: "0 0 * * 1,5#2" }, "timer.cron", /# or L alone/],
    [{ cron: "0 9 * * *", timezone: "Mars/Olympus_Mons" }, "timer.timezone", /not a known IANA time zone/],
    [{ cron: "0 9 * * *", timezone: 1 }, "timer.timezone", /IANA/],
    [{ intervalSeconds: 60, timezone: "Nowhere" }, "timer.timezone", /not a known/],
  ])("refuses %j", (input, field, message) => {
    const issue = validationIssue(input);
    expect(issue.field).toBe(field);
    expect(issue.message).toMatch(message);
  });

  it("stores a time zone in its canonical spelling", () => {
    expect(validateTimerSpec({ cron: "0 9 * * *", timezone: "europe/berlin" }, "t")).toEqual({
      cron: "0 9 * * *",
      timezone: "Europe/Berlin",
    });
    expect(validateTimerSpec({ cron: "0 9 * * *", timezone: " utc " }, "t")).toMatchObject({ timezone: "UTC" });
  });

  it("refuses both spellings of the interval when they differ, and takes either alone", () => {
    expect(() => validateTimerSpec({ intervalSeconds: 60, interval_seconds: 120 }, "t")).toThrow(/not both/);
    expect(validateTimerSpec({ intervalSeconds: 60, interval_seconds: 60 }, "t")).toEqual({ intervalSeconds: 60 });
    expect(validateTimerSpec({ interval_seconds: 120 }, "t")).toEqual({ intervalSeconds: 120 });
  });

  it("keeps the zone it was given rather than ICU's legacy name for it", () => {
    for (const zone of ["Asia/Kolkata", "Europe/Kyiv", "Asia/Ho_Chi_Minh", "America/Argentina/Buenos_Aires"]) {
      expect(validateTimerSpec({ cron: "0 9 * * *", timezone: zone }, "t")).toMatchObject({ timezone: zone });
    }
  });
});

describe("nextFireAt", () => {
  const minute: TimerSpec = { intervalSeconds: 60 };

  it.each([
    ["the anchor itself", 0, 60_000],
    ["just before the first slot", 59_999, 60_000],
    ["exactly a slot", 60_000, 120_000],
    ["between slots, long after the anchor", 1_000_000, 1_020_000],
    ["a time before the anchor", -5_000, 60_000],
  ])("fires an interval timer on its cadence after %s", (_, afterMs, expected) => {
    expect(nextFireAt(minute, afterMs, 0)).toBe(expected);
  });

  it("skips the slots missed while nothing ran, keeping the cadence", () => {
    const anchor = at("2024-01-01T00:00:00Z");
    const down = anchor + 3.5 * 3_600_000; // three and a half hourly slots later
    expect(iso(nextFireAt({ intervalSeconds: 3600 }, down, anchor))).toBe("2024-01-01T04:00:00.000Z");
  });

  it.each<[string, TimerSpec, string, string]>([
    ["every 15 minutes", { cron: "*/15 * * * *" }, "2024-03-30T10:07:30Z", "2024-03-30T10:15:00.000Z"],
    ["strictly after a matching time", { cron: "*/15 * * * *" }, "2024-03-30T10:15:00Z", "2024-03-30T10:30:00.000Z"],
    ["daily in UTC", { cron: "0 9 * * *" }, "2024-03-30T09:00:00.001Z", "2024-03-31T09:00:00.000Z"],
    ["a nickname", { cron: "@hourly" }, "2024-03-30T10:07:30Z", "2024-03-30T11:00:00.000Z"],
    ["6 fields", { cron: "0 30 9 * * *" }, "2024-03-30T10:00:00Z", "2024-03-31T09:30:00.000Z"],
    ["second Friday", { cron: "0 0 * * 5#2" }, "2024-03-30T00:00:00Z", "2024-04-12T00:00:00.000Z"],
    ["last day of month", { cron: "0 0 L * *" }, "2024-04-01T00:00:00Z", "2024-04-30T00:00:00.000Z"],
    ["weekdays by name", { cron: "0 9 * * MON-FRI" }, "2024-03-29T10:00:00Z", "2024-04-01T09:00:00.000Z"],
    [
      "Berlin in winter",
      { cron: "0 9 * * *", timezone: "Europe/Berlin" },
      "2024-03-29T09:00:00Z",
      "2024-03-30T08:00:00.000Z",
    ],
    [
      "Berlin on the spring change",
      { cron: "0 9 * * *", timezone: "Europe/Berlin" },
      "2024-03-30T08:00:00Z",
      "2024-03-31T07:00:00.000Z",
    ],
    [
      "Berlin on the autumn change",
      { cron: "0 9 * * *", timezone: "Europe/Berlin" },
      "2024-10-26T07:00:00Z",
      "2024-10-27T08:00:00.000Z",
    ],
    [
      "in the skipped hour: first valid time after it",
      { cron: "30 2 * * *", timezone: "Europe/Berlin" },
      "2024-03-30T12:00:00Z",
      "2024-03-31T01:00:00.000Z",
    ],
    [
      "in the repeated hour: once",
      { cron: "30 2 * * *", timezone: "Europe/Berlin" },
      "2024-10-27T00:30:00Z",
      "2024-10-28T01:30:00.000Z",
    ],
    [
      "New York on its spring change",
      { cron: "0 9 * * *", timezone: "America/New_York" },
      "2024-03-09T15:00:00Z",
      "2024-03-10T13:00:00.000Z",
    ],
  ])("fires a cron %s", (_, spec, after, expected) => {
    expect(iso(nextFireAt(spec, at(after), 0))).toBe(expected);
  });

  it("keeps 09:00 local time every day across both Berlin changes", () => {
    const spec: TimerSpec = { cron: "0 9 * * *", timezone: "Europe/Berlin" };
    const hour = new Intl.DateTimeFormat("en-GB", { timeZone: "Europe/Berlin", hour: "2-digit", minute: "2-digit" });
    for (const start of ["2024-03-28T00:00:00Z", "2024-10-25T00:00:00Z"]) {
      let t = at(start);
      const gaps: number[] = [];
      for (let day = 0; day < 5; day += 1) {
        const next = nextFireAt(spec, t, 0);
        expect(hour.format(next)).toBe("09:00");
        if (day > 0) gaps.push((next - t) / 3_600_000);
        t = next;
      }
      expect(gaps).toContain(start.startsWith("2024-03") ? 23 : 25);
    }
  });
});

describe("timerRunEvent", () => {
  it.each<[string, TimerSpec, string | number, object]>([
    [
      "an interval timer",
      { intervalSeconds: 3600 },
      1_593_937_896_000,
      { timestamp: 1_593_937_896, interval_seconds: 3600 },
    ],
    ["whole seconds", { intervalSeconds: 60 }, 1_593_937_896_999, { timestamp: 1_593_937_896, interval_seconds: 60 }],
    [
      "a daily cron",
      { cron: "0 9 * * *" },
      "2024-03-30T09:00:00Z",
      { timestamp: 1_711_789_200, interval_seconds: 86_400, cron: "0 9 * * *", timezone: "UTC" },
    ],
    [
      "a daily cron before the spring change (23 hours)",
      { cron: "0 9 * * *", timezone: "Europe/Berlin" },
      "2024-03-30T08:00:00Z",
      { timestamp: 1_711_785_600, interval_seconds: 82_800, cron: "0 9 * * *", timezone: "Europe/Berlin" },
    ],
    [
      "a weekday cron on a Friday",
      { cron: "0 9 * * 1-5" },
      "2024-03-29T09:00:00Z",
      { timestamp: 1_711_702_800, interval_seconds: 259_200, cron: "0 9 * * 1-5", timezone: "UTC" },
    ],
    [
      "a cron run off its schedule (manual)",
      { cron: "*/15 * * * *" },
      "2024-03-29T09:07:00Z",
      { timestamp: 1_711_703_220, interval_seconds: 900, cron: "*/15 * * * *", timezone: "UTC" },
    ],
  ])("describes %s", (_, spec, scheduled, expected) => {
    const ms = typeof scheduled === "number" ? scheduled : at(scheduled);
    expect(timerRunEvent(spec, ms)).toEqual(expected);
  });
});

describe("toAwsScheduleExpression", () => {
  it.each<[number, string, number, { everySeconds: number; times: number } | undefined]>([
    [60, "rate(1 minute)", 60, undefined],
    [120, "rate(2 minutes)", 120, undefined],
    [900, "rate(15 minutes)", 900, undefined],
    [5400, "rate(90 minutes)", 5400, undefined],
    [3600, "rate(1 hour)", 3600, undefined],
    [7200, "rate(2 hours)", 7200, undefined],
    [86_400, "rate(1 day)", 86_400, undefined],
    [172_800, "rate(2 days)", 172_800, undefined],
    [MAX_TIMER_INTERVAL_SECONDS, "rate(366 days)", MAX_TIMER_INTERVAL_SECONDS, undefined],
    [61, "rate(1 minute)", 60, undefined],
    [90, "rate(2 minutes)", 120, undefined],
    [100, "rate(2 minutes)", 120, undefined],
    [30, "rate(1 minute)", 30, { everySeconds: 30, times: 2 }],
    [15, "rate(1 minute)", 15, { everySeconds: 15, times: 4 }],
    [1, "rate(1 minute)", 1, { everySeconds: 1, times: 60 }],
    [7, "rate(1 minute)", 6, { everySeconds: 6, times: 10 }],
    [25, "rate(1 minute)", 30, { everySeconds: 30, times: 2 }],
    [45, "rate(1 minute)", 60, undefined],
    [50, "rate(1 minute)", 60, undefined],
  ])("schedules an interval of %i s as %s", (seconds, expression, effective, repeats) => {
    const result = toAwsScheduleExpression({ intervalSeconds: seconds });
    expect(result.expression).toBe(expression);
    expect(result.effectiveIntervalSeconds).toBe(effective);
    expect(result.subMinuteRepeats).toEqual(repeats);
    expect(result.timezone).toBeUndefined();
  });

  const crons: [string, string][] = [
    ["0 9 * * *", "cron(0 9 * * ? *)"],
    ["*/15 * * * *", "cron(0/15 * * * ? *)"],
    ["5-59/10 * * * *", "cron(5/10 * * * ? *)"],
    ["0 8-18/2 * * *", "cron(0 8,10,12,14,16,18 * * ? *)"],
    ["0 9 * * 1-5", "cron(0 9 ? * 2-6 *)"],
    ["0 9 * * MON-FRI", "cron(0 9 ? * 2-6 *)"],
    ["0 0 * * 0", "cron(0 0 ? * 1 *)"],
    ["0 0 * * 7", "cron(0 0 ? * 1 *)"],
    ["0 0 * * 5-7", "cron(0 0 ? * 1,6,7 *)"],
    ["0 0 * * FRI-SUN", "cron(0 0 ? * 1,6,7 *)"],
    ["0 0 * * */2", "cron(0 0 ? * 1,3,5,7 *)"],
    ["0 0 * * 1,3,5", "cron(0 0 ? * 2,4,6 *)"],
    ["0 0 * * 0-6", "cron(0 0 * * ? *)"],
    ["0 0 * * 5#2", "cron(0 0 ? * 6#2 *)"],
    ["0 0 * * 5L", "cron(0 0 ? * 6L *)"],
    ["0 0 * * 1#L", "cron(0 0 ? * 2L *)"],
    ["0 0 L * *", "cron(0 0 L * ? *)"],
    ["0 0 15W * *", "cron(0 0 15W * ? *)"],
    ["0 0 1 */3 *", "cron(0 0 1 1/3 ? *)"],
    ["0 0 1 JAN,JUL *", "cron(0 0 1 1,7 ? *)"],
    ["0 0 1-31/2 * *", "cron(0 0 1/2 * ? *)"],
    ["0 9 ? * 1", "cron(0 9 ? * 2 *)"],
    ["@daily", "cron(0 0 * * ? *)"],
    ["@weekly", "cron(0 0 ? * 1 *)"],
    ["0 30 9 * * *", "cron(30 9 * * ? *)"],
  ];

  it.each(crons)("translates the cron %s to %s", (cron, expression) => {
    expect(toAwsScheduleExpression({ cron })).toEqual({ expression });
  });

  it("passes the time zone on", () => {
    expect(toAwsScheduleExpression({ cron: "0 9 * * *", timezone: "Europe/Berlin" })).toEqual({
      expression: "cron(0 9 * * ? *)",
      timezone: "Europe/Berlin",
    });
  });

  it.each(crons)("keeps the runs of %s when read the AWS way", (cron) => {
    // croner reads the AWS form with Sunday = 1 (alternativeWeekdays) and `first/step` (sloppyRanges).
    const aws = /^cron\((.*) \*\)$/.exec(toAwsScheduleExpression({ cron }).expression)?.[1]?.replaceAll("?", "*");
    expect(aws).toBeDefined();
    const awsCron = new Cron(aws as string, {
      paused: true,
      mode: "5-part",
      timezone: "UTC",
      alternativeWeekdays: true,
      sloppyRanges: true,
    });
    let t = at("2024-01-01T00:00:00Z");
    for (let run = 0; run < 40; run += 1) {
      const next = nextFireAt({ cron }, t, 0);
      expect(iso(awsCron.nextRun(new Date(t))?.getTime() ?? 0)).toBe(iso(next));
      t = next;
    }
  });

  it("refuses a spec that is not a timer", () => {
    expect(() => toAwsScheduleExpression({})).toThrow(/intervalSeconds/);
    expect(() => toAwsScheduleExpression({ cron: "0 0 1 * 1" })).toThrow(/not both/);
  });
});
