/**
 * Deepest nesting of arrays and objects accepted in JSON that Sluice parses from a client: a REST
 * API body (400 beyond) or an HTTP interface body (kept as its raw text beyond). Bodies are stored
 * and sent on as JSON, and `JSON.stringify` recurses: a body nested some thousands deep would
 * overflow the stack there. 100 is the default of Ruby's JSON parser, far beyond any real value.
 */
export const MAX_JSON_DEPTH = 100;

/** How deeply arrays and objects nest in a valid JSON text (0 for a scalar); strings are skipped. */
export function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (inString) {
      if (char === 0x5c) i++;
      else if (char === 0x22) inString = false;
    } else if (char === 0x22) inString = true;
    else if (char === 0x5b || char === 0x7b) deepest = Math.max(deepest, ++depth);
    else if (char === 0x5d || char === 0x7d) depth--;
  }
  return deepest;
}
