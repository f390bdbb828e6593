import type { Page, PageQuery } from "#core/pagination";
import type { DeadLetterRecord } from "#core/subscription-model";

/** Deliveries that failed every attempt, listed per webhook newest first by delivery id (cursors are ids). */
export interface DeadLetterStore {
  putDeadLetter(deadLetter: DeadLetterRecord): Promise<void>;
  getDeadLetter(webhookId: string, id: string): Promise<DeadLetterRecord | undefined>;
  listDeadLetters(webhookId: string, page: PageQuery): Promise<Page<DeadLetterRecord>>;
  /** Returns false when it was not there (already replayed or deleted). */
  deleteDeadLetter(webhookId: string, id: string): Promise<boolean>;
  deleteDeadLettersOf(webhookId: string): Promise<void>;
}
