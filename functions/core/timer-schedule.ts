/**
 * The pure parts of a source's timer (`$.interface.timer`, real-behaviour.md §1.3): validation
 * of its configuration, when it fires next, the event `run` receives, and the EventBridge
 * Scheduler expression that fires it on AWS.
 *
 * Cron expressions are standard 5-field cron (`minute hour day-of-month month day-of-week`,
 * day-of-week 0-7 with 0 and 7 Sunday, names allowed), or 6 fields whose first (seconds) is 0,
 * or a nickname (`@daily`, ...). Only expressions both croner (local mode) and EventBridge
 * Scheduler (AWS) can run are accepted, so a timer behaves the same in both modes.
 */
import { Cron } from "croner";
import type { TimerRunEvent } from "#runtime/protocol";
import type { TimerSpec } from "./component-model.ts";
import { invalid } from "./errors.ts";

/** Longest interval of an interval timer. */
export const MAX_TIMER_INTERVAL_SECONDS = 366 * 86_400;

/** The zone of a cron timer that names none. */
export const DEFAULT_TIMER_TIMEZONE = "UTC";

const EXPECTED = "must be an object with intervalSeconds (whole seconds) or cron (a cron expression)";

/**
 * Validates a timer configuration from a client and returns it normalised: `{intervalSeconds}`
 * or `{cron, timezone?}` (cron with single spaces; the zone in its canonical spelling).
 *
 * Accepts the written form `{intervalSeconds}` / `{cron, timezone?}` and the read-back form
 * `{cron, interval_seconds}`; `null` and empty strings count as absent. A `timezone` next to an
 * interval is validated, then dropped (an interval has no zone). Unknown keys are ignored.
 *
 * @throws DomainError `validation` naming `field` (or `field.intervalSeconds`, `.cron`, `.timezone`).
 */
export function validateTimerSpec(input: unknown, field: string): TimerSpec {
  if (typeof input !== "object" || input === null || Array.isArray(input)) throw invalid(field, EXPECTED);
  const value = input as Record<string, unknown>;
  const present = (item: unknown) =>
    item !== undefined && item !== null && !(typeof item === "string" && item.trim() === "");
  if (
    present(value.intervalSeconds) &&
    present(value.interval_seconds) &&
    value.intervalSeconds !== value.interval_seconds
  ) {
    throw invalid(field, "give intervalSeconds or interval_seconds, not both");
  }
  const interval = present(value.intervalSeconds) ? value.intervalSeconds : value.interval_seconds;
  const hasInterval = present(interval);
  const hasCron = present(value.cron);
  if (hasInterval && hasCron) throw invalid(field, "give either intervalSeconds or cron, not both");
  if (!hasInterval && !hasCron) throw invalid(field, EXPECTED);

  let timezone: string | undefined;
  if (present(value.timezone)) {
    if (typeof value.timezone !== "string") throw invalid(`${field}.timezone`, "must be an IANA time zone name");
    timezone = canonicalTimezone(value.timezone);
    if (!timezone) throw invalid(`${field}.timezone`, `"${value.timezone}" is not a known IANA time zone`);
  }

  if (hasInterval) {
    if (typeof interval !== "number" || !Number.isInteger(interval)) {
      throw invalid(`${field}.intervalSeconds`, "must be a whole number of seconds");
    }
    if (interval < 1) throw invalid(`${field}.intervalSeconds`, "must be at least 1");
    if (interval > MAX_TIMER_INTERVAL_SECONDS) {
      throw invalid(`${field}.intervalSeconds`, `must be at most ${MAX_TIMER_INTERVAL_SECONDS} (366 days)`);
    }
    return { intervalSeconds: interval };
  }

  if (typeof value.cron !== "string") throw invalid(`${field}.cron`, "must be a string");
  const cron = value.cron.trim().replace(/\s+/g, " ");
  try {
    const fields = cronFields(cron);
    awsCronFields(fields);
    if (croner(fields, timezone).nextRun(new Date(0)) === null) throw new CronError("never matches a date");
  } catch (error) {
    // croner reports a bad pattern as a TypeError whose message starts with "CronPattern: ".
    if (error instanceof CronError || (error instanceof Error && /^Cron(Pattern|Date)?: /.test(error.message))) {
      throw invalid(`${field}.cron`, cronMessage(error.message));
    }
    throw error;
  }
  return timezone ? { cron, timezone } : { cron };
}

/**
 * When a timer fires next, strictly after `afterMs` (epoch milliseconds).
 *
 * An interval timer fires at `anchorMs + k * interval` (k ≥ 1), the first such time after
 * `afterMs`: it keeps its cadence, and a timer that could not fire for a while (a restart, a
 * suspended machine) fires once at the next slot instead of catching up on the missed ones.
 * A cron timer fires at the next time its expression matches in its zone (UTC by default).
 *
 * @returns epoch milliseconds; `Infinity` when a cron never matches again.
 */
export function nextFireAt(spec: TimerSpec, afterMs: number, anchorMs: number): number {
  if (spec.cron !== undefined) {
    const next = croner(cronFields(spec.cron), spec.timezone).nextRun(new Date(afterMs));
    return next === null ? Number.POSITIVE_INFINITY : next.getTime();
  }
  const periodMs = intervalSecondsOf(spec) * 1000;
  const k = Math.max(1, Math.floor((afterMs - anchorMs) / periodMs) + 1);
  return anchorMs + k * periodMs;
}

/**
 * The event `run` receives when the timer fires at `scheduledAtMs`: `timestamp` in epoch seconds
 * and `interval_seconds`. For a cron timer, `interval_seconds` is the time between its next two
 * runs from `scheduledAtMs` on (the first at or after it, and the one after that), so a daily
 * cron reads 86400; `cron` and `timezone` are added.
 */
export function timerRunEvent(spec: TimerSpec, scheduledAtMs: number): TimerRunEvent {
  const timestamp = Math.floor(scheduledAtMs / 1000);
  if (spec.cron === undefined) return { timestamp, interval_seconds: intervalSecondsOf(spec) };
  const first = nextFireAt(spec, scheduledAtMs - 1, scheduledAtMs);
  const second = Number.isFinite(first) ? nextFireAt(spec, first, first) : Number.POSITIVE_INFINITY;
  const interval = Number.isFinite(second) ? Math.round((second - first) / 1000) : 0;
  return { timestamp, interval_seconds: interval, cron: spec.cron, timezone: spec.timezone ?? DEFAULT_TIMER_TIMEZONE };
}

/** How the AWS timer invoker runs a source when one schedule fires. */
export interface SubMinuteRepeats {
  /** Seconds between runs inside one invocation; divides 60. */
  everySeconds: number;
  /** Runs per invocation: `60 / everySeconds`, the first at the scheduled time. */
  times: number;
}

export interface AwsScheduleExpression {
  /** `rate(...)` or `cron(...)` for EventBridge Scheduler's `ScheduleExpression`. */
  expression: string;
  /** `ScheduleExpressionTimezone`, when the cron timer names a zone (Scheduler's default is UTC). */
  timezone?: string;
  /** For intervals under a minute: Scheduler fires once a minute and the invoker repeats the run. */
  subMinuteRepeats?: SubMinuteRepeats;
  /** For interval timers: the cadence AWS will actually keep, after rounding (see below). */
  effectiveIntervalSeconds?: number;
}

const DIVISORS_OF_60 = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60];

/**
 * The EventBridge Scheduler schedule of a timer. Scheduler's finest rate is one minute, so:
 *
 * - a whole number of minutes becomes `rate(N minutes|hours|days)`, in the largest exact unit;
 * - an interval under a minute that divides 60 becomes `rate(1 minute)` with
 *   {@link SubMinuteRepeats}: the invoker runs the source `times` times, `everySeconds` apart,
 *   within each invocation;
 * - any other interval is rounded to the nearest cadence that can be kept (under a minute: the
 *   nearest divisor of 60; above: the nearest whole minute; ties round to the longer cadence),
 *   reported in `effectiveIntervalSeconds`. Local mode keeps the exact interval.
 *
 * A cron becomes `cron(min hour dom month dow year)`: day-of-week 0-6 (Sunday first) becomes
 * 1-7, the unrestricted day field becomes `?`, `*\/n` becomes `first/n`, ranges with a step are
 * listed, and the year is `*`.
 *
 * @throws DomainError `validation` for a spec {@link validateTimerSpec} would refuse.
 */
export function toAwsScheduleExpression(spec: TimerSpec): AwsScheduleExpression {
  if (spec.cron !== undefined) {
    try {
      const aws = awsCronFields(cronFields(spec.cron));
      return {
        expression: `cron(${aws.join(" ")})`,
        ...(spec.timezone !== undefined ? { timezone: spec.timezone } : {}),
      };
    } catch (error) {
      if (error instanceof CronError) throw invalid("timer.cron", error.message);
      throw error;
    }
  }
  const seconds = intervalSecondsOf(spec);
  if (seconds < 60) {
    const everySeconds = nearest(DIVISORS_OF_60, seconds);
    if (everySeconds === 60) return { expression: "rate(1 minute)", effectiveIntervalSeconds: 60 };
    return {
      expression: "rate(1 minute)",
      subMinuteRepeats: { everySeconds, times: 60 / everySeconds },
      effectiveIntervalSeconds: everySeconds,
    };
  }
  const minutes = Math.floor(seconds / 60 + 0.5);
  const [value, unit] =
    minutes % 1440 === 0 ? [minutes / 1440, "day"] : minutes % 60 === 0 ? [minutes / 60, "hour"] : [minutes, "minute"];
  return { expression: `rate(${value} ${value === 1 ? unit : `${unit}s`})`, effectiveIntervalSeconds: minutes * 60 };
}

function intervalSecondsOf(spec: TimerSpec): number {
  const seconds = spec.intervalSeconds;
  if (seconds === undefined || !Number.isInteger(seconds) || seconds < 1) {
    throw invalid("timer", "must have intervalSeconds (a whole number ≥ 1) or cron");
  }
  return seconds;
}

/** The candidate closest to `value`; on a tie, the larger one. */
function nearest(candidates: number[], value: number): number {
  let best = candidates[0] ?? value;
  for (const candidate of candidates) {
    if (Math.abs(candidate - value) <= Math.abs(best - value)) best = candidate;
  }
  return best;
}

/** The zones ICU lists, by their lower-case spelling (made on first use). */
let listedZones: Map<string, string> | undefined;

/**
 * A zone name Intl accepts, as the caller wrote it but for its letters' case where ICU lists it
 * ("europe/paris" is "Europe/Paris"); undefined for one Intl refuses. Not Intl's resolved name:
 * ICU resolves to its own legacy ids ("Asia/Kolkata" to "Asia/Calcutta", "Europe/Kyiv" to
 * "Europe/Kiev"), and a caller gets back the zone it sent.
 */
function canonicalTimezone(name: string): string | undefined {
  const trimmed = name.trim();
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat("en-US", { timeZone: trimmed }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
  const lower = trimmed.toLowerCase();
  if (resolved.toLowerCase() === lower) return resolved;
  listedZones ??= new Map(Intl.supportedValuesOf("timeZone").map((zone) => [zone.toLowerCase(), zone]));
  return listedZones.get(lower) ?? trimmed;
}

/**
 * croner's message without its prefix. croner counts months and days of month from 0 inside, and
 * its range errors show that value ("Invalid value for month: 12" for 13): shown as written.
 */
function cronMessage(message: string): string {
  return message
    .replace(/^Cron(Pattern|Date)?: /, "")
    .replace(/^Invalid value for (month|day): (-?\d+)$/, (_, part: string, value: string) => {
      return `Invalid value for ${part === "day" ? "day of month" : part}: ${Number(value) + 1}`;
    });
}

/** A cron expression Sluice does not accept; the message names the problem. */
class CronError extends Error {}

/** The five standard fields, names replaced by numbers and `?` by `*`. */
interface CronFields {
  minute: string;
  hour: string;
  dayOfMonth: string;
  month: string;
  dayOfWeek: string;
}

const NICKNAMES: Record<string, string> = {
  "@yearly": "0 0 1 1 *",
  "@annually": "0 0 1 1 *",
  "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *",
  "@midnight": "0 0 * * *",
  "@hourly": "0 * * * *",
};

const MONTH_NAMES = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAY_NAMES = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

function cronFields(expression: string): CronFields {
  const text = expression.trim().replace(/\s+/g, " ");
  let parts = (NICKNAMES[text.toLowerCase()] ?? text).toUpperCase().split(" ");
  if (parts.length === 6) {
    if (!/^0{1,2}$/.test(parts[0] ?? "")) {
      throw new CronError("the seconds field of a 6-field cron must be 0: timers fire at whole minutes");
    }
    parts = parts.slice(1);
  }
  const [minute, hour, dayOfMonth, month, dayOfWeek] = parts;
  if (
    parts.length !== 5 ||
    minute === undefined ||
    hour === undefined ||
    dayOfMonth === undefined ||
    month === undefined ||
    dayOfWeek === undefined
  ) {
    throw new CronError("must have 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first");
  }
  for (const [name, part] of [
    ["minute", minute],
    ["hour", hour],
    ["month", month],
  ] as const) {
    if (part.includes("?")) throw new CronError(`"?" is allowed only in day-of-month and day-of-week, not in ${name}`);
  }
  const fields: CronFields = {
    minute,
    hour,
    dayOfMonth: dayOfMonth === "?" ? "*" : dayOfMonth,
    month: month.replace(/(?<![A-Z])(JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC)(?![A-Z])/g, (name) =>
      String(MONTH_NAMES.indexOf(name) + 1),
    ),
    // "-SUN" closes a range, so it is 7 there ("FRI-SUN"); an L may follow a day name ("FRIL").
    dayOfWeek: (dayOfWeek === "?" ? "*" : dayOfWeek).replace(
      /(-?)(?<![A-Z])(SUN|MON|TUE|WED|THU|FRI|SAT)(?=L?(?![A-Z]))/g,
      (_, dash: string, name: string) => (name === "SUN" && dash ? "-7" : `${dash}${DAY_NAMES.indexOf(name)}`),
    ),
  };
  if (fields.dayOfMonth !== "*" && fields.dayOfWeek !== "*") {
    // Standard cron runs when either day field matches; EventBridge cannot express that.
    throw new CronError("restrict the day of month or the day of week, not both (set the other to *)");
  }
  croner(fields); // throws croner's message for anything else it cannot read
  return fields;
}

function croner(fields: CronFields, timezone?: string): Cron {
  const pattern = [fields.minute, fields.hour, fields.dayOfMonth, fields.month, fields.dayOfWeek].join(" ");
  return new Cron(pattern, { paused: true, mode: "5-part", timezone: timezone ?? DEFAULT_TIMER_TIMEZONE });
}

/** The six fields of the EventBridge cron for standard fields croner accepted. */
function awsCronFields(fields: CronFields): string[] {
  const dayOfMonth = awsField(fields.dayOfMonth, 1, 31);
  const dayOfWeek = awsDayOfWeek(fields.dayOfWeek);
  return [
    awsField(fields.minute, 0, 59),
    awsField(fields.hour, 0, 23),
    dayOfMonth === "*" && dayOfWeek !== "*" ? "?" : dayOfMonth,
    awsField(fields.month, 1, 12),
    dayOfWeek === "*" ? "?" : dayOfWeek,
    "*",
  ];
}

/** Minute, hour, day of month, month: same syntax, except for steps. */
function awsField(field: string, min: number, max: number): string {
  return field
    .split(",")
    .map((token) => {
      const step = /^(\*|(\d+)-(\d+))\/(\d+)$/.exec(token);
      if (!step) return token;
      const every = Number(step[4]);
      if (step[1] === "*") return `${min}/${every}`;
      const from = Number(step[2]);
      const to = Number(step[3]);
      if (to === max) return `${from}/${every}`;
      return range(from, to, every).join(",");
    })
    .join(",");
}

/** Day of week: 0-7 (0 and 7 Sunday) to 1-7 (1 Sunday). */
function awsDayOfWeek(field: string): string {
  if (field === "*") return "*";
  const aws = (day: number) => (day % 7) + 1;
  if (/[#L]/.test(field)) {
    const nth = /^(\d)#([1-5]|L)$/.exec(field) ?? /^(\d)(L)$/.exec(field);
    if (!nth) {
      throw new CronError(`day-of-week "${field}": use # or L alone, as in 5#2 (second Friday) or 5L (last Friday)`);
    }
    return nth[2] === "L" ? `${aws(Number(nth[1]))}L` : `${aws(Number(nth[1]))}#${nth[2]}`;
  }
  const days = new Set<number>();
  for (const token of field.split(",")) {
    const match = /^(?:(\*)|(\d+)(?:-(\d+))?)(?:\/(\d+))?$/.exec(token);
    if (!match) throw new CronError(`day-of-week "${field}" cannot be translated to EventBridge Scheduler`);
    const from = match[1] ? 0 : Number(match[2]);
    const to = match[1] ? 6 : match[3] !== undefined ? Number(match[3]) : match[4] !== undefined ? 6 : from;
    for (const day of range(from, to, Number(match[4] ?? 1))) days.add(aws(day));
  }
  if (days.size === 7) return "*";
  return compressRanges([...days].sort((a, b) => a - b));
}

function range(from: number, to: number, step: number): number[] {
  const values: number[] = [];
  for (let value = from; value <= to; value += step) values.push(value);
  return values;
}

/** [1, 2, 3, 5] → "1-3,5". */
function compressRanges(sorted: number[]): string {
  const pieces: string[] = [];
  let index = 0;
  while (index < sorted.length) {
    const start = sorted[index] as number;
    let end = start;
    while (sorted[index + 1] === end + 1) {
      end += 1;
      index += 1;
    }
    pieces.push(end === start ? String(start) : end === start + 1 ? `${start},${end}` : `${start}-${end}`);
    index += 1;
  }
  return pieces.join(",");
}
