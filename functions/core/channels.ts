/**
 * Channel names (rest-api.md "Events"; real-behaviour.md §1.6). A source emits on the default
 * channel (stored as `""`; `name: "default"` means it too), on custom channels named by `$emit`'s
 * `name`, and Sluice writes its console output to `$logs` and its thrown errors to `$errors`.
 * Every endpoint that takes an `event_name` reads it with {@link requireChannelName}.
 */
import { invalid } from "./errors.ts";

/** Longest channel name accepted in an `event_name` parameter. */
export const CHANNEL_NAME_MAX_LENGTH = 128;

/** The stored channel of a name: absent, empty and `default` are the default channel `""`. */
export function channelName(name: string | undefined): string {
  return name === undefined || name === "default" ? "" : name;
}

/** {@link channelName} of an `event_name` parameter, or a 400 naming `field`. */
export function requireChannelName(name: string, field = "event_name"): string {
  if (name.length > CHANNEL_NAME_MAX_LENGTH) {
    throw invalid(field, `must be at most ${CHANNEL_NAME_MAX_LENGTH} characters`);
  }
  if (/\p{Cc}/u.test(name)) throw invalid(field, "must not contain control characters");
  return channelName(name);
}
