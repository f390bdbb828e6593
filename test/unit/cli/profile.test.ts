import { chmodSync, mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { normalizeUrl, profileFile, readProfiles, resolveTarget, saveProfile } from "../../../bin/cli/profile.ts";

const home = () => mkdtempSync(join(tmpdir(), "sluice-cli-home-"));
const profile = { url: "http://127.0.0.1:4000", api_key: "sluice_secret-key-1234" };

describe("the profile file", () => {
  it("lives in ~/.config/sluice/config.json, or under XDG_CONFIG_HOME when set", () => {
    expect(profileFile("/home/ada", {})).toBe("/home/ada/.config/sluice/config.json");
    expect(profileFile("/home/ada", { XDG_CONFIG_HOME: "/cfg" })).toBe("/cfg/sluice/config.json");
  });

  it("is written readable by its owner only (0600 in a 0700 folder), whatever the umask", async () => {
    const file = profileFile(home(), {});
    const before = process.umask(0);
    try {
      await saveProfile(file, "default", profile);
    } finally {
      process.umask(before);
    }
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(file, "..")).mode & 0o777).toBe(0o700);
    expect(await readProfiles(file)).toEqual({ default: profile });
  });

  it("keeps the other profiles when one is saved, and replaces the one of that name", async () => {
    const file = profileFile(home(), {});
    await saveProfile(file, "default", profile);
    await saveProfile(file, "stack", { url: "https://api.example.com", api_key: "k2-0123456789abcdef" });
    await saveProfile(file, "default", { ...profile, api_key: "k3-0123456789abcdef" });
    expect(Object.keys(await readProfiles(file)).sort()).toEqual(["default", "stack"]);
    expect((await readProfiles(file)).default?.api_key).toBe("k3-0123456789abcdef");
  });

  it("reads as no profiles when missing, and says how to fix it when it is not JSON", async () => {
    const file = profileFile(home(), {});
    expect(await readProfiles(file)).toEqual({});
    await saveProfile(file, "default", profile);
    writeFileSync(file, "{not json");
    await expect(readProfiles(file)).rejects.toThrow(/not valid JSON.*sluice login/);
  });
});

describe("whom a command calls", () => {
  it("is the profile's URL and key, with SLUICE_URL and SLUICE_API_KEY over them", async () => {
    const dir = home();
    await saveProfile(profileFile(dir, {}), "default", profile);
    expect(await resolveTarget(dir, {})).toEqual({
      url: "http://127.0.0.1:4000",
      streamUrl: "http://127.0.0.1:4000",
      apiKey: profile.api_key,
      keyFrom: "profile",
    });
    expect(
      await resolveTarget(dir, { SLUICE_URL: "http://127.0.0.1:4100/v1/", SLUICE_API_KEY: "env-key-0123456789" }),
    ).toMatchObject({ url: "http://127.0.0.1:4100", apiKey: "env-key-0123456789", keyFrom: "SLUICE_API_KEY" });
  });

  it("uses a stack's stream URL from the profile, and the named profile", async () => {
    const dir = home();
    await saveProfile(profileFile(dir, {}), "stack", {
      url: "https://api.example.com",
      api_key: "k-0123456789abcdef",
      stream_url: "https://stream.example.com/",
    });
    expect(await resolveTarget(dir, {}, "stack")).toMatchObject({
      url: "https://api.example.com",
      streamUrl: "https://stream.example.com",
    });
    await expect(resolveTarget(dir, {}, "other")).rejects.toThrow(/no profile named "other".*--profile other/);
  });

  it("says to log in when nothing names a Sluice, or no key is known", async () => {
    await expect(resolveTarget(home(), {})).rejects.toThrow(/not logged in: run `sluice login`/);
    await expect(resolveTarget(home(), { SLUICE_URL: "http://127.0.0.1:4000" })).rejects.toThrow(/no API key/);
  });

  it("warns when the file has been made readable by others", async () => {
    const dir = home();
    const file = profileFile(dir, {});
    await saveProfile(file, "default", profile);
    expect((await resolveTarget(dir, {})).warning).toBeUndefined();
    chmodSync(file, 0o644);
    expect((await resolveTarget(dir, {})).warning).toMatch(/readable by others/);
  });
});

describe("a URL as the profile keeps it", () => {
  it("drops a trailing slash and /v1, and refuses what is not an http(s) base URL", () => {
    expect(normalizeUrl("http://127.0.0.1:4000/")).toBe("http://127.0.0.1:4000");
    expect(normalizeUrl("https://abc.execute-api.eu-west-1.amazonaws.com/v1")).toBe(
      "https://abc.execute-api.eu-west-1.amazonaws.com",
    );
    expect(() => normalizeUrl("127.0.0.1:4000")).toThrow(/not (a|an http)/);
    expect(() => normalizeUrl("ftp://host")).toThrow(/not an http/);
    expect(() => normalizeUrl("http://user:pw@host")).toThrow(/base URL only/);
  });
});
