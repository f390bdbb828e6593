import { describe, expect, it } from "vitest";
import { channelName, requireChannelName } from "#core/channels";
import { isDomainError } from "#core/errors";

describe("channel names", () => {
  it("reads absent, empty and `default` as the default channel and keeps other names", () => {
    expect([undefined, "", "default"].map(channelName)).toEqual(["", "", ""]);
    expect(["ticks", "$logs", "Default"].map(channelName)).toEqual(["ticks", "$logs", "Default"]);
  });

  it("refuses a parameter that is too long or holds control characters, naming the field", () => {
    expect(requireChannelName("x".repeat(128))).toHaveLength(128);
    for (const bad of ["x".repeat(129), "a\nb", "tab\there", "nul\u0000"]) {
      let caught: unknown;
      try {
        requireChannelName(bad, "event_name");
      } catch (error) {
        caught = error;
      }
      expect(isDomainError(caught) && caught.code === "validation" && caught.message.includes("event_name")).toBe(true);
    }
  });
});
