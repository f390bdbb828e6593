import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LocalSecrets, SECRET_KEY_FILE } from "#adapters/local/local-secrets";

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-secrets-"));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const keyBase64 = () => randomBytes(32).toString("base64");

/** Flips one bit of the character at `index` of a base64url segment, keeping it base64url. */
function flip(sealed: string, part: number): string {
  const parts = sealed.split(".");
  const bytes = Buffer.from(parts[part] as string, "base64url");
  bytes[0] = (bytes[0] as number) ^ 1;
  parts[part] = bytes.toString("base64url");
  return parts.join(".");
}

describe("LocalSecrets", () => {
  it("round-trips text, including unicode and the empty string", async () => {
    const secrets = await LocalSecrets.fromDataDir(dir, keyBase64());
    for (const text of ["s3cr3t", "", "päss wörd ✓ 🔑", "x".repeat(70_000)]) {
      const sealed = await secrets.seal(text);
      expect(await secrets.open(sealed)).toBe(text);
    }
  });

  it("writes v1.<iv>.<ciphertext+tag> with a fresh 12-byte IV each time, never the plaintext", async () => {
    const secrets = await LocalSecrets.fromDataDir(dir, keyBase64());
    const a = await secrets.seal("hunter2");
    const b = await secrets.seal("hunter2");
    expect(a).toMatch(/^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+$/);
    expect(a).not.toBe(b);
    expect(a).not.toContain("hunter2");
    // 7 bytes of text + 16 bytes of tag.
    expect(Buffer.from(a.split(".")[2] as string, "base64url")).toHaveLength(23);
  });

  it("creates <dataDir>/secret-key with mode 0600 and reuses it on the next start", async () => {
    const dataDir = join(dir, "nested", "data");
    const first = await LocalSecrets.fromDataDir(dataDir);
    const path = join(dataDir, SECRET_KEY_FILE);
    const info = await stat(path);
    expect(info.mode & 0o777).toBe(0o600);
    expect(Buffer.from((await readFile(path, "utf8")).trim(), "base64")).toHaveLength(32);

    const sealed = await first.seal("kept across restarts");
    const second = await LocalSecrets.fromDataDir(dataDir);
    expect(await second.open(sealed)).toBe("kept across restarts");
  });

  it("prefers the given key over the key file", async () => {
    const fromFile = await LocalSecrets.fromDataDir(dir);
    const fromEnv = await LocalSecrets.fromDataDir(dir, keyBase64());
    await expect(fromEnv.open(await fromFile.seal("x"))).rejects.toThrow(/tampered with or sealed under another key/);
  });

  it("accepts the key in base64url as well", async () => {
    const key = randomBytes(32);
    const a = await LocalSecrets.fromDataDir(dir, key.toString("base64"));
    const b = await LocalSecrets.fromDataDir(dir, key.toString("base64url"));
    expect(await b.open(await a.seal("same key"))).toBe("same key");
  });

  it.each([
    [
      "a 16-byte key",
      randomBytes(16).toString("base64"),
      /SLUICE_SECRET_KEY must hold a 32-byte key in base64.*got 16 bytes/,
    ],
    ["text that is not base64", "not base64 at all!", /SLUICE_SECRET_KEY must hold a 32-byte key.*not base64/],
  ])("refuses %s with a clear error", async (_, key, message) => {
    await expect(LocalSecrets.fromDataDir(dir, key)).rejects.toThrow(message);
  });

  it("refuses a key file that does not hold 32 bytes, naming the file", async () => {
    await writeFile(join(dir, SECRET_KEY_FILE), "c2hvcnQ=\n");
    await expect(LocalSecrets.fromDataDir(dir)).rejects.toThrow(
      `${join(dir, SECRET_KEY_FILE)} must hold a 32-byte key`,
    );
  });

  it.each([
    ["a flipped ciphertext bit", (s: string) => flip(s, 2)],
    ["a flipped IV bit", (s: string) => flip(s, 1)],
    ["a cut tag", (s: string) => s.slice(0, -4)],
    ["another version prefix", (s: string) => s.replace(/^v1\./, "v2.")],
    ["a KMS value", () => "kms1.AAAA.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA"],
    ["characters outside base64url", (s: string) => `${s.slice(0, -1)}*`],
    ["plain text", () => "hunter2"],
  ])("refuses to open %s", async (_, tamper) => {
    const secrets = await LocalSecrets.fromDataDir(dir, keyBase64());
    const sealed = await secrets.seal("hunter2");
    await expect(secrets.open(tamper(sealed))).rejects.toMatchObject({ name: "SealedSecretError" });
  });
});
