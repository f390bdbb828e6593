/**
 * A string cut to `max` characters (never inside a surrogate pair), saying how long it was: for
 * text that can quote untrusted input (an error message, a path) where it is shown or logged.
 */
export function clipText(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}... (${text.length} characters)`;
}
