/**
 * `wanted` when free, else `wanted-1`, `wanted-2`, ...: the lowest counter not in `taken`. Both
 * source stores give a user's sources unique slugs this way (`SourceStore.createSource`).
 */
export function lowestFreeSlug(wanted: string, taken: ReadonlySet<string>): string {
  if (!taken.has(wanted)) return wanted;
  for (let counter = 1; ; counter++) {
    const candidate = `${wanted}-${counter}`;
    if (!taken.has(candidate)) return candidate;
  }
}
