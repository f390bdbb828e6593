/**
 * Encrypts secret prop values at rest. Adapters: `LocalSecrets` (AES-256-GCM with a key file in the
 * data dir, or `SLUICE_SECRET_KEY`) and `KmsSecrets` (envelope encryption with a KMS data key).
 */
export interface Secrets {
  /** Returns an opaque, self-describing ciphertext of `plaintext`. */
  seal(plaintext: string): Promise<string>;
  /** Reverses `seal`. Throws when the ciphertext was tampered with or sealed under another key. */
  open(sealed: string): Promise<string>;
}
