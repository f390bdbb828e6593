import { describe, expect, it } from "vitest";
import { RateSchedule } from "../../../bench/lib/rate.ts";

describe("RateSchedule", () => {
  it("spaces slots 1000 / rate ms apart from the start", () => {
    const schedule = new RateSchedule(500, 1000);
    expect(schedule.dueAt(0)).toBe(1000);
    expect(schedule.dueAt(1)).toBe(1002);
    expect(schedule.dueAt(500)).toBe(2000);
  });

  it("counts the slots due by a moment, slot 0 being due at the start", () => {
    const schedule = new RateSchedule(10, 0);
    expect(schedule.dueBy(-1)).toBe(0);
    expect(schedule.dueBy(0)).toBe(1);
    expect(schedule.dueBy(99.9)).toBe(1);
    expect(schedule.dueBy(100)).toBe(2);
    expect(schedule.dueBy(999)).toBe(10);
  });

  it("does not lose a slot due exactly now to floating-point error", () => {
    const schedule = new RateSchedule(3, 0);
    expect(schedule.dueBy(schedule.dueAt(3))).toBe(4);
    expect(schedule.dueBy(schedule.dueAt(300))).toBe(301);
  });

  it("never has more slots due than its total", () => {
    const schedule = new RateSchedule(100, 0, 5);
    expect(schedule.dueBy(10_000)).toBe(5);
  });

  it("plans rate × duration slots", () => {
    expect(RateSchedule.slotsIn(500, 10_000)).toBe(5000);
    expect(RateSchedule.slotsIn(20, 1_500)).toBe(30);
    expect(RateSchedule.slotsIn(3, 1_000)).toBe(3);
    expect(RateSchedule.slotsIn(10, 0)).toBe(0);
  });

  it("refuses a rate that is not positive", () => {
    expect(() => new RateSchedule(0, 0)).toThrow(RangeError);
    expect(() => new RateSchedule(Number.POSITIVE_INFINITY, 0)).toThrow(RangeError);
  });
});
