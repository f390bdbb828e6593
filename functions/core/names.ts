/**
 * Names people give things (a source's name, a webhook's name and description, a channel, a
 * component's name and key, an e-mail address) are shown back in listings, terminals and UIs. Two
 * kinds of character in them are refused everywhere (issue 12):
 * - NUL, which C-based tools, logs and some databases cut a string at;
 * - the Unicode bidirectional controls (embeddings and overrides U+202A to U+202E, isolates
 *   U+2066 to U+2069, the marks U+200E, U+200F and U+061C), which make text display in another
 *   order than it is stored: `invoice\u202Egpj.exe` shows as `invoiceexe.jpg` ("Trojan Source",
 *   CVE-2021-42574).
 */
import { invalid } from "./errors.ts";

// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is what this refuses
const FORBIDDEN = /[\u0000\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

/** The first forbidden character of `value` as `U+XXXX`, or undefined when there is none. */
export function forbiddenCharacterIn(value: string): string | undefined {
  const found = FORBIDDEN.exec(value);
  if (!found) return undefined;
  return `U+${(found[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}`;
}

/** `value` unchanged, or a 400 naming `field` and the first forbidden character. */
export function requireDisplayableName(field: string, value: string): string {
  const found = forbiddenCharacterIn(value);
  if (found) {
    throw invalid(field, `must not contain NUL or Unicode bidirectional control characters (found ${found})`);
  }
  return value;
}
