export interface BatchBounds<T> {
  /** Most items in one batch. */
  readonly maxItems: number;
  /** Most bytes in one batch, the sum of `sizeOf` over its items. */
  readonly maxBytes: number;
  readonly sizeOf: (item: T) => number;
}

/**
 * `items` cut into consecutive batches, order kept, each of at most `maxItems` items and
 * `maxBytes` bytes. An item larger than `maxBytes` by itself gets a batch of its own (callers
 * that cannot send it refuse it first); no batch is empty, and empty input gives no batch.
 */
export function consecutiveBatches<T>(items: readonly T[], bounds: BatchBounds<T>): T[][] {
  const batches: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = bounds.sizeOf(item);
    if (current.length === bounds.maxItems || (current.length > 0 && bytes + size > bounds.maxBytes)) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}
