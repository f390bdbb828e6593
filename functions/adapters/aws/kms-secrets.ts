import { DecryptCommand, GenerateDataKeyCommand, type KMSClient } from "@aws-sdk/client-kms";
import type { Secrets } from "#core/ports/secrets";
import {
  AES_KEY_BYTES,
  checkGcmBox,
  fromBase64Url,
  gcmOpen,
  gcmSeal,
  SealedSecretError,
  toBase64Url,
} from "../aes-gcm.ts";
import { hasErrorName } from "./sdk-errors.ts";

const PREFIX = "kms1";
const AAD = "sluice-secret-prop:kms1";
/** Bound to every data key: a key made for another purpose does not decrypt here, and CloudTrail shows why. */
const KMS_ENCRYPTION_CONTEXT = { purpose: "sluice-secret-prop" } as const;
/** KMS's largest ciphertext blob: a longer "encrypted data key" is refused without asking KMS. */
const MAX_ENCRYPTED_KEY_BYTES = 6144;
/** Plaintext data keys kept in memory, most recently used last. */
export const DATA_KEY_CACHE_SIZE = 100;

export interface KmsSecretsProps {
  readonly kms: KMSClient;
  /** Key id, key ARN, alias name (`alias/...`) or alias ARN of a symmetric KMS key. */
  readonly keyId: string;
}

/**
 * `Secrets` on AWS: envelope encryption. Each `seal` asks KMS for a fresh AES-256 data key and
 * encrypts locally with AES-256-GCM; the value carries the encrypted data key:
 * `kms1.<base64url encrypted data key>.<base64url iv>.<base64url ciphertext+tag>`. `open` has KMS
 * decrypt the data key, and keeps up to {@link DATA_KEY_CACHE_SIZE} plaintext data keys in memory
 * so that opening a source's secrets on every run costs no KMS call once the container is warm.
 */
export class KmsSecrets implements Secrets {
  readonly #kms: KMSClient;
  readonly #keyId: string;
  /** Keyed by the encrypted data key (base64url); a promise so that concurrent opens share one call. */
  readonly #dataKeys = new Map<string, Promise<Uint8Array>>();

  constructor(props: KmsSecretsProps) {
    this.#kms = props.kms;
    this.#keyId = props.keyId;
  }

  async seal(plaintext: string): Promise<string> {
    const out = await this.#kms.send(
      new GenerateDataKeyCommand({
        KeyId: this.#keyId,
        KeySpec: "AES_256",
        EncryptionContext: { ...KMS_ENCRYPTION_CONTEXT },
      }),
    );
    if (!out.Plaintext || !out.CiphertextBlob || out.Plaintext.length !== AES_KEY_BYTES) {
      throw new Error("KMS GenerateDataKey returned no 256-bit data key");
    }
    const encryptedKey = toBase64Url(out.CiphertextBlob);
    const { iv, data } = gcmSeal(out.Plaintext, plaintext, AAD);
    this.#remember(encryptedKey, Promise.resolve(out.Plaintext));
    return `${PREFIX}.${encryptedKey}.${toBase64Url(iv)}.${toBase64Url(data)}`;
  }

  async open(sealed: string): Promise<string> {
    const parts = sealed.split(".");
    if (parts.length !== 4 || parts[0] !== PREFIX) {
      throw new SealedSecretError(`sealed secret is not in the ${PREFIX} format of KMS envelope encryption`);
    }
    const [, encryptedKey, ivText, dataText] = parts as [string, string, string, string];
    const iv = fromBase64Url(ivText, "the IV");
    const data = fromBase64Url(dataText, "the ciphertext");
    // Every check that needs no key comes first: a malformed value costs no KMS call.
    checkGcmBox({ iv, data });
    const blob = fromBase64Url(encryptedKey, "the encrypted data key");
    if (blob.length === 0 || blob.length > MAX_ENCRYPTED_KEY_BYTES) {
      throw new SealedSecretError("sealed secret is malformed: the encrypted data key has an impossible length");
    }
    const key = await this.#dataKey(encryptedKey);
    return gcmOpen(key, { iv, data }, AAD);
  }

  #dataKey(encryptedKey: string): Promise<Uint8Array> {
    const cached = this.#dataKeys.get(encryptedKey);
    if (cached) {
      this.#remember(encryptedKey, cached);
      return cached;
    }
    const pending = this.#decrypt(encryptedKey);
    this.#remember(encryptedKey, pending);
    // A failed decryption is not cached: the next open tries KMS again.
    pending.catch(() => {
      if (this.#dataKeys.get(encryptedKey) === pending) this.#dataKeys.delete(encryptedKey);
    });
    return pending;
  }

  async #decrypt(encryptedKey: string): Promise<Uint8Array> {
    const blob = fromBase64Url(encryptedKey, "the encrypted data key");
    try {
      const out = await this.#kms.send(
        new DecryptCommand({
          KeyId: this.#keyId,
          CiphertextBlob: blob,
          EncryptionContext: { ...KMS_ENCRYPTION_CONTEXT },
        }),
      );
      if (!out.Plaintext || out.Plaintext.length !== AES_KEY_BYTES) {
        throw new SealedSecretError("KMS Decrypt returned no 256-bit data key");
      }
      return out.Plaintext;
    } catch (error) {
      if (hasErrorName(error, "InvalidCiphertextException") || hasErrorName(error, "IncorrectKeyException")) {
        throw new SealedSecretError(
          "sealed secret could not be opened: KMS refused its data key (tampered with, or sealed under another key or context)",
          {
            cause: error,
          },
        );
      }
      throw error;
    }
  }

  #remember(encryptedKey: string, key: Promise<Uint8Array>): void {
    this.#dataKeys.delete(encryptedKey);
    this.#dataKeys.set(encryptedKey, key);
    while (this.#dataKeys.size > DATA_KEY_CACHE_SIZE) {
      const oldest = this.#dataKeys.keys().next().value as string;
      this.#dataKeys.delete(oldest);
    }
  }
}
