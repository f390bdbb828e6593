import type { EventPurger } from "#ports/event-purger";
import type { EventStore } from "#ports/event-store";
import type { Logger } from "#ports/logger";

/**
 * `EventPurger` of local mode: runs `purgeDeletedEvents` in the background in this process.
 * Purges of one source never overlap; a purge asked for while one runs is run once after it.
 * `drain()` waits for every purge (shutdown and tests).
 */
export class InProcessEventPurger implements EventPurger {
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();

  constructor(
    private readonly events: Pick<EventStore, "purgeDeletedEvents">,
    private readonly log: Logger,
  ) {}

  async purgeLater(sourceId: string): Promise<void> {
    if (this.running.has(sourceId)) {
      this.again.add(sourceId);
      return;
    }
    const run = (async () => {
      do {
        this.again.delete(sourceId);
        try {
          await this.events.purgeDeletedEvents(sourceId);
        } catch (error) {
          this.log.error("event purge failed", { source_id: sourceId, error: String(error) });
        }
      } while (this.again.has(sourceId));
    })().finally(() => this.running.delete(sourceId));
    this.running.set(sourceId, run);
  }

  async drain(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()]);
  }
}
