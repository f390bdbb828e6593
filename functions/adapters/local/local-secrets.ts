import { randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ENV } from "#config/env";
import type { Secrets } from "#core/ports/secrets";
import { AES_KEY_BYTES, fromBase64Url, gcmOpen, gcmSeal, SealedSecretError, toBase64Url } from "../aes-gcm.ts";

const PREFIX = "v1";
/** Authenticated with every value, so a value of another format or purpose does not open. */
const AAD = "sluice-secret-prop:v1";
/** Name of the key file in the data dir. */
export const SECRET_KEY_FILE = "secret-key";

/**
 * `Secrets` for local mode: AES-256-GCM under one key, `v1.<base64url iv>.<base64url ciphertext+tag>`.
 * The key comes from `SLUICE_SECRET_KEY` or from `<data dir>/secret-key` (see {@link fromDataDir}).
 */
export class LocalSecrets implements Secrets {
  readonly #key: Buffer;

  /** @param key 32 bytes. */
  constructor(key: Uint8Array) {
    if (key.length !== AES_KEY_BYTES) throw new Error(`a secret key must be ${AES_KEY_BYTES} bytes, got ${key.length}`);
    this.#key = Buffer.from(key);
  }

  /**
   * Builds the adapter with the key given in base64 (32 bytes, e.g. `openssl rand -base64 32`),
   * else with the key in `<dataDir>/secret-key`, which is created (32 random bytes in base64, mode
   * 0600; an existing one is made 0600 too) when absent. Losing that file makes every stored secret unreadable.
   *
   * @throws Error naming the source of the key when it is not 32 bytes of base64.
   */
  static async fromDataDir(dataDir: string, keyBase64?: string): Promise<LocalSecrets> {
    if (keyBase64 !== undefined && keyBase64 !== "") {
      return new LocalSecrets(decodeKey(keyBase64, ENV.secretKey));
    }
    const path = join(dataDir, SECRET_KEY_FILE);
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    try {
      // `wx` fails when the file exists, so two processes starting at once never overwrite a key.
      await writeFile(path, `${randomBytes(AES_KEY_BYTES).toString("base64")}\n`, { flag: "wx", mode: 0o600 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      // `mode` applies only when the file is created: one an older version made keeps its own.
      await chmod(path, 0o600);
    }
    return new LocalSecrets(decodeKey(await readFile(path, "utf8"), path));
  }

  async seal(plaintext: string): Promise<string> {
    const { iv, data } = gcmSeal(this.#key, plaintext, AAD);
    return `${PREFIX}.${toBase64Url(iv)}.${toBase64Url(data)}`;
  }

  async open(sealed: string): Promise<string> {
    const parts = sealed.split(".");
    if (parts.length !== 3 || parts[0] !== PREFIX) {
      throw new SealedSecretError(`sealed secret is not in the ${PREFIX} format of local mode`);
    }
    const iv = fromBase64Url(parts[1] as string, "the IV");
    const data = fromBase64Url(parts[2] as string, "the ciphertext");
    return gcmOpen(this.#key, { iv, data }, AAD);
  }
}

const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

function decodeKey(text: string, source: string): Buffer {
  const trimmed = text.trim();
  // Node's base64 decoder reads the base64url alphabet too.
  const key = BASE64.test(trimmed) ? Buffer.from(trimmed, "base64") : undefined;
  if (!key || key.length !== AES_KEY_BYTES) {
    throw new Error(
      `${source} must hold a ${AES_KEY_BYTES}-byte key in base64 (make one with \`openssl rand -base64 32\`), got ${key ? `${key.length} bytes` : "text that is not base64"}`,
    );
  }
  return key;
}
