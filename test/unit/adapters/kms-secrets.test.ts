import { randomBytes } from "node:crypto";
import {
  DecryptCommand,
  GenerateDataKeyCommand,
  InvalidCiphertextException,
  KMSClient,
  KMSInvalidStateException,
} from "@aws-sdk/client-kms";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { DATA_KEY_CACHE_SIZE, KmsSecrets } from "#adapters/aws/kms-secrets";

const KEY_ID = "alias/sluice-secrets";
const CONTEXT = { purpose: "sluice-secret-prop" };
const kms = mockClient(KMSClient);
const client = new KMSClient({ region: "us-east-1" });

/**
 * A fake KMS: each GenerateDataKey returns a new random key and an "encrypted" blob that names it;
 * Decrypt maps the blob back, and refuses unknown blobs or another context like KMS does.
 */
function fakeKms() {
  const keys = new Map<string, Uint8Array>();
  let n = 0;
  kms.on(GenerateDataKeyCommand).callsFake(async () => {
    const plaintext = new Uint8Array(randomBytes(32));
    const blob = new Uint8Array(Buffer.from(`encrypted-data-key-${++n}`));
    keys.set(Buffer.from(blob).toString("hex"), plaintext);
    return { KeyId: "arn:aws:kms:us-east-1:111122223333:key/k", Plaintext: plaintext, CiphertextBlob: blob };
  });
  kms.on(DecryptCommand).callsFake(async (input: { CiphertextBlob: Uint8Array; EncryptionContext?: unknown }) => {
    const plaintext = keys.get(Buffer.from(input.CiphertextBlob).toString("hex"));
    if (!plaintext || JSON.stringify(input.EncryptionContext) !== JSON.stringify(CONTEXT)) {
      throw new InvalidCiphertextException({ message: "invalid ciphertext", $metadata: {} });
    }
    return { Plaintext: plaintext };
  });
}

const make = () => new KmsSecrets({ kms: client, keyId: KEY_ID });

beforeEach(() => {
  kms.reset();
  fakeKms();
});

describe("KmsSecrets", () => {
  it("asks KMS for an AES_256 data key with the purpose context on each seal", async () => {
    const secrets = make();
    await secrets.seal("a");
    await secrets.seal("b");
    const calls = kms.commandCalls(GenerateDataKeyCommand);
    expect(calls).toHaveLength(2);
    expect(calls[0]?.args[0].input).toEqual({ KeyId: KEY_ID, KeySpec: "AES_256", EncryptionContext: CONTEXT });
  });

  it("writes kms1.<encrypted data key>.<iv>.<ciphertext+tag>, never the plaintext", async () => {
    const sealed = await make().seal("hunter2");
    const parts = sealed.split(".");
    expect(parts).toHaveLength(4);
    expect(parts[0]).toBe("kms1");
    expect(Buffer.from(parts[1] as string, "base64url").toString()).toBe("encrypted-data-key-1");
    expect(Buffer.from(parts[2] as string, "base64url")).toHaveLength(12);
    expect(Buffer.from(parts[3] as string, "base64url")).toHaveLength(7 + 16);
    expect(sealed).not.toContain("hunter2");
  });

  it("opens in another instance by decrypting the data key with the same key id and context", async () => {
    const sealed = await make().seal("päss wörd ✓");
    const reader = make();
    expect(await reader.open(sealed)).toBe("päss wörd ✓");
    const calls = kms.commandCalls(DecryptCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.args[0].input).toEqual({
      KeyId: KEY_ID,
      CiphertextBlob: Buffer.from("encrypted-data-key-1"),
      EncryptionContext: CONTEXT,
    });
  });

  it("calls Decrypt once per data key: later opens, concurrent ones included, use the cache", async () => {
    const sealed = await make().seal("cached");
    const reader = make();
    const opened = await Promise.all([reader.open(sealed), reader.open(sealed)]);
    expect(opened).toEqual(["cached", "cached"]);
    expect(await reader.open(sealed)).toBe("cached");
    expect(kms.commandCalls(DecryptCommand)).toHaveLength(1);
  });

  it("opens what it sealed itself without a Decrypt call", async () => {
    const secrets = make();
    expect(await secrets.open(await secrets.seal("mine"))).toBe("mine");
    expect(kms.commandCalls(DecryptCommand)).toHaveLength(0);
  });

  it(`keeps at most ${DATA_KEY_CACHE_SIZE} data keys, evicting the least recently used`, async () => {
    const writer = make();
    const sealed = [];
    for (let i = 0; i <= DATA_KEY_CACHE_SIZE; i++) sealed.push(await writer.seal(`value ${i}`));
    const reader = make();
    for (const value of sealed) await reader.open(value);
    expect(kms.commandCalls(DecryptCommand)).toHaveLength(DATA_KEY_CACHE_SIZE + 1);
    // The first key was evicted by the 101st; the last one is still cached.
    await reader.open(sealed.at(-1) as string);
    expect(kms.commandCalls(DecryptCommand)).toHaveLength(DATA_KEY_CACHE_SIZE + 1);
    await reader.open(sealed[0] as string);
    expect(kms.commandCalls(DecryptCommand)).toHaveLength(DATA_KEY_CACHE_SIZE + 2);
  });

  it.each([
    ["a flipped ciphertext bit", 3],
    ["a flipped IV bit", 2],
  ])("refuses %s", async (_, part) => {
    const sealed = await make().seal("hunter2");
    const parts = sealed.split(".");
    const bytes = Buffer.from(parts[part] as string, "base64url");
    bytes[0] = (bytes[0] as number) ^ 1;
    parts[part] = bytes.toString("base64url");
    await expect(make().open(parts.join("."))).rejects.toMatchObject({ name: "SealedSecretError" });
  });

  it("refuses a data key KMS will not decrypt, and asks KMS again next time", async () => {
    const sealed = await make().seal("hunter2");
    const parts = sealed.split(".");
    parts[1] = Buffer.from("some-other-key").toString("base64url");
    const reader = make();
    await expect(reader.open(parts.join("."))).rejects.toMatchObject({
      name: "SealedSecretError",
      message: expect.stringMatching(/KMS refused its data key/),
    });
    await expect(reader.open(parts.join("."))).rejects.toMatchObject({ name: "SealedSecretError" });
    expect(kms.commandCalls(DecryptCommand)).toHaveLength(2);
  });

  it.each([
    ["a local-mode value", "v1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA"],
    ["plain text", "hunter2"],
    ["a value with characters outside base64url", "kms1.a+b.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA"],
  ])("refuses %s without calling KMS", async (_, sealed) => {
    await expect(make().open(sealed)).rejects.toMatchObject({ name: "SealedSecretError" });
    expect(kms.commandCalls(DecryptCommand)).toHaveLength(0);
  });

  it("lets other KMS failures through unchanged", async () => {
    const sealed = await make().seal("x");
    kms.on(DecryptCommand).rejects(new KMSInvalidStateException({ message: "key is disabled", $metadata: {} }));
    await expect(make().open(sealed)).rejects.toMatchObject({ name: "KMSInvalidStateException" });
  });
});

describe("data store grants sealed with KMS", () => {
  beforeEach(() => {
    kms.reset();
    fakeKms();
  });

  it("refuses a malformed, expired or changed grant with no KMS call, and opens a good one once", async () => {
    const { accountIn, memoryDeps } = await import("../../support/memory-deps.ts");
    const { bindDataStoreProps, grantDataStores, serveGrantedCall } = await import("#core/data-stores");
    const start = Date.UTC(2026, 10, 26, 12);
    const deps = memoryDeps(start);
    deps.secrets = make();
    const owner = await accountIn(deps, "granted");
    const stores = new Set<string>();
    const props = await bindDataStoreProps(deps, owner.workspace.id, "dc_x", {}, { s: "data_store" }, stores);
    const id = (props.s as { id: string }).id;
    const { grant } = await grantDataStores(deps, "inv_1", stores, 30_000);
    // Served by another container than the one that sealed it (the route's, on AWS): no cached data key.
    deps.secrets = make();
    const [, expiry, sealed] = /^g1\.(\d+)\.(.+)$/.exec(grant) ?? [];
    const get = { store: id, op: "get", key: "k" };
    const decrypts = () => kms.commandCalls(DecryptCommand).length;
    const refused = (message: string) => ({ ok: false, error: { name: "DataStoreError", message } });
    const invalid = refused("the data store grant is not valid");

    // Garbage, a sealed value without the grant's clear expiry, an envelope of the wrong shape.
    const bogus = [
      "x",
      sealed ?? "",
      `g1.${expiry}.kms1.${"A".repeat(40)}.AAAA.AAAA`,
      `g1.${expiry}.kms1.${"A".repeat(9000)}.${"A".repeat(16)}.${"A".repeat(30)}`,
      `g1.${expiry}.kms1.not base64.${"A".repeat(16)}.${"A".repeat(30)}`,
      `g1.${expiry}.local1.${"A".repeat(16)}.${"A".repeat(30)}`,
    ];
    for (const grantText of bogus) expect(await serveGrantedCall(deps, grantText, get), grantText).toEqual(invalid);
    // Past its clear expiry: refused before it is opened.
    deps.clock.set(Number(expiry) + 1);
    expect(await serveGrantedCall(deps, grant, get)).toEqual(
      refused("the data store grant has expired: its run has ended"),
    );
    expect(decrypts()).toBe(0);

    deps.clock.set(start);
    // A later clear expiry does not extend the grant: the sealed one disagrees.
    expect(await serveGrantedCall(deps, `g1.${Number(expiry) + 60_000}.${sealed}`, get)).toEqual(invalid);
    expect(await serveGrantedCall(deps, grant, { ...get, op: "set", value: 1 })).toEqual({ ok: true });
    expect(await serveGrantedCall(deps, grant, get)).toEqual({ ok: true, value: 1 });
    // One KMS call for the good grant's data key (the disagreeing copy opened it first, then cached).
    expect(decrypts()).toBe(1);
  });
});
