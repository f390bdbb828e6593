/**
 * AES-256-GCM, shared by the `Secrets` adapters (`LocalSecrets`, `KmsSecrets`). A fresh random
 * 12-byte IV per message; the 16-byte tag is appended to the ciphertext.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

export const AES_KEY_BYTES = 32;
const GCM_IV_BYTES = 12;
const GCM_TAG_BYTES = 16;

/** A sealed value that cannot be opened: malformed, tampered with, or sealed under another key. */
export class SealedSecretError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "SealedSecretError";
  }
}

export interface GcmBox {
  iv: Buffer;
  /** Ciphertext followed by the tag. */
  data: Buffer;
}

/**
 * @param aad additional authenticated data: binds the ciphertext to its format, so a value of one
 *   format cannot be passed off as another.
 */
export function gcmSeal(key: Uint8Array, plaintext: string, aad: string): GcmBox {
  const iv = randomBytes(GCM_IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: GCM_TAG_BYTES });
  cipher.setAAD(Buffer.from(aad, "utf8"));
  const data = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
  return { iv, data };
}

/** @throws SealedSecretError when the IV or the ciphertext cannot be a box's: checked before a key is fetched. */
export function checkGcmBox(box: GcmBox): void {
  if (box.iv.length !== GCM_IV_BYTES || box.data.length < GCM_TAG_BYTES) {
    throw new SealedSecretError("sealed secret is malformed: wrong IV or ciphertext length");
  }
}

/** @throws SealedSecretError when the box was tampered with or sealed under another key. */
export function gcmOpen(key: Uint8Array, box: GcmBox, aad: string): string {
  checkGcmBox(box);
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, box.iv, { authTagLength: GCM_TAG_BYTES });
    decipher.setAAD(Buffer.from(aad, "utf8"));
    decipher.setAuthTag(box.data.subarray(box.data.length - GCM_TAG_BYTES));
    const plain = Buffer.concat([
      decipher.update(box.data.subarray(0, box.data.length - GCM_TAG_BYTES)),
      decipher.final(),
    ]);
    return plain.toString("utf8");
  } catch (error) {
    throw new SealedSecretError("sealed secret could not be opened: it was tampered with or sealed under another key", {
      cause: error,
    });
  }
}

const BASE64URL = /^[A-Za-z0-9_-]*$/;

export const toBase64Url = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url");

/** Strict base64url decoding (Node's decoder silently skips foreign characters). */
export function fromBase64Url(text: string, what: string): Buffer {
  if (!BASE64URL.test(text)) throw new SealedSecretError(`sealed secret is malformed: ${what} is not base64url`);
  return Buffer.from(text, "base64url");
}
