/**
 * Deepest nesting of arrays and objects accepted in JSON that Sluice parses from a client: a REST
 * API body (400 beyond) or an HTTP interface body (kept as its raw text beyond). Bodies are stored
 * and sent on as JSON, and `JSON.stringify` recurses: a body nested some thousands deep would
 * overflow the stack there. 100 is the default of Ruby's JSON parser, far beyond any real value.
 */
export const MAX_JSON_DEPTH = 100;

/**
 * Whether arrays and objects in a JSON text nest deeper than `limit` (brackets inside strings do
 * not count). Stops at the first level past the limit; a text no longer than the limit cannot
 * nest deeper than it and is not read at all.
 */
export function nestsTooDeep(text: string, limit = MAX_JSON_DEPTH): boolean {
  if (text.length <= limit) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (inString) {
      if (char === 0x5c) i++;
      else if (char === 0x22) inString = false;
    } else if (char === 0x22) inString = true;
    else if (char === 0x5b || char === 0x7b) {
      if (++depth > limit) return true;
    } else if (char === 0x5d || char === 0x7d) depth--;
  }
  return false;
}
