import { describe, expect, it } from "vitest";
import { type BudgetMember, SandboxBudget } from "#adapters/local/sandbox-budget";

/** A member that records what the budget asked of it, and leaves when reaped or drained empty. */
class FakeMember implements BudgetMember {
  draining = false;
  reaped = false;
  busy = 0;
  constructor(
    readonly name: string,
    private readonly budget: SandboxBudget,
    public lastUsedAt: number,
  ) {
    budget.join(this);
  }
  reap(): void {
    this.reaped = true;
    this.budget.leave(this);
  }
  drain(): void {
    this.draining = true;
  }
  /** Its runs ended: idle (a draining member stops then). */
  finish(): void {
    this.busy = 0;
    if (this.draining) this.reap();
    else this.budget.setIdle(this, true);
  }
}

describe("SandboxBudget: the bound on live sandbox processes", () => {
  it("lets processes start below the bound, and at the bound only a needed one, by reaping the least recently idle", () => {
    const budget = new SandboxBudget(2);
    expect(budget.take(false)).toBe(true);
    const a = new FakeMember("a", budget, 1);
    expect(budget.take(false)).toBe(true);
    const b = new FakeMember("b", budget, 2);
    // Both busy: nobody starts, needed or not.
    expect([budget.take(false), budget.take(true)]).toEqual([false, false]);
    b.finish();
    a.finish();
    // A wanted start never reaps; a needed one reaps b, idle first.
    expect(budget.take(false)).toBe(false);
    expect(budget.take(true)).toBe(true);
    expect([a.reaped, b.reaped]).toEqual([false, true]);
    expect(budget.used).toBe(1);
  });

  it("does not reap a member that is busy again", () => {
    const budget = new SandboxBudget(1);
    const a = new FakeMember("a", budget, 1);
    a.finish();
    budget.setIdle(a, false);
    expect(budget.take(true)).toBe(false);
    expect(a.reaped).toBe(false);
  });

  it("serves waiters first come first served as slots free up", () => {
    const budget = new SandboxBudget(1);
    const a = new FakeMember("a", budget, 1);
    const granted: string[] = [];
    const waiter = (name: string) => ({
      granted: () => {
        granted.push(name);
        if (budget.take(true)) new FakeMember(name, budget, 10);
      },
    });
    const first = waiter("first");
    budget.wait(first);
    budget.wait(waiter("second"));
    // Waiting twice is waiting once.
    budget.wait(first);
    expect(granted).toEqual([]);
    budget.leave(a);
    expect(granted).toEqual(["first"]);
    expect(budget.used).toBe(1);
  });

  it("drains the least recently used busy member for each waiter, so a slot comes free while all stay busy", () => {
    const budget = new SandboxBudget(2);
    const old = new FakeMember("old", budget, 1);
    const recent = new FakeMember("recent", budget, 5);
    const granted: string[] = [];
    budget.wait({
      granted: () => {
        granted.push("c");
        if (budget.take(true)) new FakeMember("c", budget, 10);
      },
    });
    expect([old.draining, recent.draining]).toEqual([true, false]);
    // A second waiter drains the next one; a third has none left to drain.
    budget.wait({ granted: () => granted.push("d") });
    expect(recent.draining).toBe(true);
    old.finish();
    expect(old.reaped).toBe(true);
    expect(granted).toEqual(["c"]);
  });

  it("grants nothing to a waiter that no longer waits", () => {
    const budget = new SandboxBudget(1);
    const busy = new FakeMember("busy", budget, 1);
    let granted = 0;
    const waiter = { granted: () => granted++ };
    budget.wait(waiter);
    budget.unwait(waiter);
    busy.finish();
    expect([busy.reaped, granted, budget.isWaiting(waiter)]).toEqual([true, 0, false]);
  });

  it("leases slots to describes, waiting when none is free", async () => {
    const budget = new SandboxBudget(1);
    const release = await budget.lease();
    expect(budget.used).toBe(1);
    let second: (() => void) | undefined;
    const waiting = budget.lease().then((release2) => {
      second = release2;
    });
    await Promise.resolve();
    expect(second).toBeUndefined();
    release();
    release();
    await waiting;
    expect(budget.used).toBe(1);
    second?.();
    expect(budget.used).toBe(0);
  });
});
