import type { StoredEvent } from "#core/component-model";
import type { EmitterOwner, EventBus } from "#core/ports/event-bus";
import type { Logger } from "#core/ports/logger";

/**
 * Receives the events of one `publish` call (one source, id order) and the source's owner, when
 * the publisher gave it. Must not block.
 */
export type EventListener = (events: readonly StoredEvent[], owner?: EmitterOwner) => void;

/**
 * `EventBus` of local mode: listeners in this process, called synchronously in `publish`, so
 * every listener sees a source's events in id order. Listeners of one source (live streams) are
 * kept apart from listeners of every source, so a publish costs nothing for sources nobody
 * follows. A listener that throws is logged and does not stop the others. `owner` may be left out
 * (the live stream does not need it; the dispatcher then reads the source).
 */
export class InProcessEventBus implements EventBus {
  private readonly bySource = new Map<string, Set<EventListener>>();
  private readonly everySource = new Set<EventListener>();

  constructor(private readonly log?: Logger) {}

  async publish(events: readonly StoredEvent[], owner?: EmitterOwner): Promise<void> {
    const first = events[0];
    if (!first) return;
    const listeners = this.bySource.get(first.sourceId);
    if (listeners) for (const listener of [...listeners]) this.call(listener, events, owner);
    for (const listener of [...this.everySource]) this.call(listener, events, owner);
  }

  /** Follows one source's events; returns the function that stops following. */
  subscribe(sourceId: string, listener: EventListener): () => void {
    let listeners = this.bySource.get(sourceId);
    if (!listeners) {
      listeners = new Set();
      this.bySource.set(sourceId, listeners);
    }
    listeners.add(listener);
    return () => {
      const current = this.bySource.get(sourceId);
      if (!current?.delete(listener)) return;
      if (current.size === 0) this.bySource.delete(sourceId);
    };
  }

  /** Follows every source's events; returns the function that stops following. */
  subscribeAll(listener: EventListener): () => void {
    this.everySource.add(listener);
    return () => {
      this.everySource.delete(listener);
    };
  }

  /** Listeners of one source (for tests and the stream's own accounting). */
  listenerCount(sourceId: string): number {
    return this.bySource.get(sourceId)?.size ?? 0;
  }

  private call(listener: EventListener, events: readonly StoredEvent[], owner: EmitterOwner | undefined): void {
    try {
      listener(events, owner);
    } catch (error) {
      this.log?.error("event listener failed", { source_id: events[0]?.sourceId, error: String(error) });
    }
  }
}
