/**
 * The bound on live sandbox processes of a host, across all its sources
 * (`SLUICE_SANDBOX_MAX_PROCESSES`): each source has processes of its own, and 1,000 deployed
 * sources must not cost 1,000 processes.
 *
 * A process about to start takes a slot. At the bound, a start that is needed (its source has no
 * process that could take the run) stops the least recently used idle process of any source; when
 * none is idle it waits, first come first served, and the least recently used busy process is
 * drained (it takes no new work and stops once its runs have ended), so a slot comes free even
 * while every source keeps its process busy. A start that is only wanted (a second process for a
 * busy source) happens only below the bound.
 */

/** A live process, as the budget sees it. */
export interface BudgetMember {
  /** When it was last given work (`performance.now()`): the least recent is drained first. */
  readonly lastUsedAt: number;
  /** Whether it was asked to drain already. */
  readonly draining: boolean;
  /** Stops it now: it is idle, and its slot is needed. */
  reap(): void;
  /** It takes no new work and stops once idle: a waiter needs its slot. */
  drain(): void;
}

/** Someone waiting for a slot: called once one can be taken (`take(true)` succeeds then). */
export interface BudgetWaiter {
  granted(): void;
}

export class SandboxBudget {
  private readonly members = new Set<BudgetMember>();
  /** Idle members, least recently idle first. */
  private readonly idle = new Set<BudgetMember>();
  private readonly waiters = new Set<BudgetWaiter>();
  /** Slots held by something other than a member (a describe's short-lived process). */
  private leases = 0;
  /** Set while a member is being reaped for a slot that is already spoken for. */
  private reaping = false;

  /** @param max live processes at most (at least 1). */
  constructor(readonly max: number) {}

  /** Slots in use. */
  get used(): number {
    return this.members.size + this.leases;
  }

  /**
   * Whether a process may start now. `needed`: the run has nowhere else to go, so an idle process
   * may be stopped to make room. The caller starts its process at once and `join`s it.
   */
  take(needed: boolean): boolean {
    if (this.used < this.max) return true;
    if (!needed) return false;
    const victim = this.idle.values().next().value;
    if (!victim) return false;
    this.reaping = true;
    try {
      this.idle.delete(victim);
      victim.reap();
    } finally {
      this.reaping = false;
    }
    return true;
  }

  /** `waiter` gets `granted()` once a slot can be taken; waiting twice is waiting once. */
  wait(waiter: BudgetWaiter): void {
    this.waiters.add(waiter);
    this.serve();
  }

  /** `waiter` needs no slot any more. */
  unwait(waiter: BudgetWaiter): void {
    this.waiters.delete(waiter);
  }

  isWaiting(waiter: BudgetWaiter): boolean {
    return this.waiters.has(waiter);
  }

  join(member: BudgetMember): void {
    this.members.add(member);
  }

  /** The member stopped (or was reaped): its slot is free. */
  leave(member: BudgetMember): void {
    if (!this.members.delete(member)) return;
    this.idle.delete(member);
    if (!this.reaping) this.serve();
  }

  /** The member has nothing in flight: it may be reaped, least recently idle first. */
  setIdle(member: BudgetMember, idle: boolean): void {
    this.idle.delete(member);
    if (!idle || !this.members.has(member)) return;
    this.idle.add(member);
    this.serve();
  }

  /** A slot for something that is not a member (a describe); resolves with its release. */
  async lease(): Promise<() => void> {
    if (!this.take(true)) {
      await new Promise<void>((resolve) => {
        const waiter: BudgetWaiter = {
          granted: () => {
            if (this.take(true)) resolve();
            else this.wait(waiter);
          },
        };
        this.wait(waiter);
      });
    }
    this.leases += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.leases -= 1;
      this.serve();
    };
  }

  /** Hands free or reapable slots to waiters in order; drains busy members for the rest. */
  private serve(): void {
    for (const waiter of [...this.waiters]) {
      if (this.used >= this.max && this.idle.size === 0) break;
      this.waiters.delete(waiter);
      waiter.granted();
    }
    let wanted = this.waiters.size;
    for (const member of this.members) if (member.draining) wanted -= 1;
    while (wanted > 0) {
      let oldest: BudgetMember | undefined;
      for (const member of this.members) {
        if (!member.draining && (!oldest || member.lastUsedAt < oldest.lastUsedAt)) oldest = member;
      }
      if (!oldest) return;
      oldest.drain();
      wanted -= 1;
    }
  }
}
