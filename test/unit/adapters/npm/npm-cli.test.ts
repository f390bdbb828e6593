import { describe, expect, it } from "vitest";
import { npmReason } from "#adapters/npm/npm-cli";

describe("npmReason", () => {
  it("keeps npm's error code and first message line", () => {
    const stderr = [
      'npm warn Unknown user config "nodedir".',
      "npm error code E404",
      "npm error 404 Not Found - GET http://127.0.0.1:4873/nope - Not found",
      "npm error 404",
      "npm error A complete log of this run can be found in: /root/.npm/_logs/x.log",
    ].join("\n");
    expect(npmReason(stderr)).toBe("E404 404 Not Found - GET http://127.0.0.1:4873/nope - Not found");
  });

  it("skips errno and syscall lines and reads the old ERR! prefix", () => {
    const stderr = [
      "npm ERR! code ECONNREFUSED",
      "npm ERR! syscall connect",
      "npm ERR! errno ECONNREFUSED",
      "npm ERR! FetchError: request to http://127.0.0.1:9/x failed, reason: connect ECONNREFUSED",
    ].join("\n");
    expect(npmReason(stderr)).toBe(
      "ECONNREFUSED FetchError: request to http://127.0.0.1:9/x failed, reason: connect ECONNREFUSED",
    );
  });

  it("caps long output and has a fallback for silent failures", () => {
    expect(npmReason(`npm error ${"x".repeat(1000)}`).length).toBe(300);
    expect(npmReason("")).toBe("npm install failed");
  });
});
