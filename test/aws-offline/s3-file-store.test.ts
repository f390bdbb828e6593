import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { S3FileStore } from "#adapters/aws/s3-file-store";
import { MOTO_CREDENTIALS, MOTO_REGION, type Moto, startMoto } from "./moto.ts";

/**
 * `S3FileStore` on moto's S3: the URLs it signs are fetched as a run's `$.files` fetches them (a
 * PUT with the body's length, a GET), and listings and deletions are S3's own answers.
 */
describe("S3FileStore against moto's S3", () => {
  let moto: Moto;
  let s3: S3Client;
  let store: S3FileStore;
  const BUCKET = "sluice-file-stores";
  const now = () => Date.now();

  beforeAll(async () => {
    moto = await startMoto();
    s3 = new S3Client({
      region: MOTO_REGION,
      endpoint: moto.endpoint,
      forcePathStyle: true,
      credentials: MOTO_CREDENTIALS,
    });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    store = new S3FileStore({ s3, bucket: BUCKET, sign: getSignedUrl, now });
  }, 60_000);
  afterAll(() => moto?.close());

  const put = async (project: string, path: string, body: string) => {
    const { putUrl } = await store.urls(project, path, now() + 30 * 60_000);
    const answer = await fetch(putUrl, { method: "PUT", body, headers: { "content-length": String(body.length) } });
    expect(answer.status, await answer.text()).toBe(200);
  };

  it("signs a URL to write and one to read the project's key, each good for the time asked", async () => {
    const urls = await store.urls("proj_a", "notes/a b.txt", now() + 30 * 60_000);
    for (const url of [urls.getUrl, urls.putUrl]) {
      const parsed = new URL(url);
      expect(parsed.pathname).toBe(`/${BUCKET}/proj_a/notes/a%20b.txt`);
      expect(Number(parsed.searchParams.get("X-Amz-Expires"))).toBeGreaterThanOrEqual(1799);
      expect(Number(parsed.searchParams.get("X-Amz-Expires"))).toBeLessThanOrEqual(1800);
      expect(parsed.searchParams.get("X-Amz-Signature")).toMatch(/^[0-9a-f]{64}$/);
    }
    await put("proj_a", "notes/a b.txt", "hello s3");
    const read = await fetch(urls.getUrl);
    expect(read.status).toBe(200);
    expect(await read.text()).toBe("hello s3");
    // A missing file is S3's 404, which the runtime says as "there is no file".
    const missing = await store.urls("proj_a", "none.txt", now() + 60_000);
    expect((await fetch(missing.getUrl)).status).toBe(404);
  });

  it("lists a folder's files and folders in name order, within its project, and deletes", async () => {
    await put("proj_l", "b.txt", "bb");
    await put("proj_l", "a/one.txt", "1");
    await put("proj_l", "a/deep/two.txt", "22");
    await put("proj_other", "c.txt", "not yours");
    const root = await store.list("proj_l", "", undefined, 1000);
    expect(root.entries.map(({ path, name, type, size }) => [path, name, type, size])).toEqual([
      ["a", "a", "directory", undefined],
      ["b.txt", "b.txt", "file", 2],
    ]);
    const inner = await store.list("proj_l", "a", undefined, 1000);
    expect(inner.entries.map(({ path, type }) => [path, type])).toEqual([
      ["a/deep", "directory"],
      ["a/one.txt", "file"],
    ]);
    expect(inner.entries[1]?.modifiedAtMs).toBeGreaterThan(now() - 600_000);
    // Pages: one entry at a time, the rest after the page's token.
    const first = await store.list("proj_l", "", undefined, 1);
    expect(first.entries).toHaveLength(1);
    expect(first.next).toEqual(expect.any(String));
    const second = await store.list("proj_l", "", first.next, 1);
    expect([...first.entries, ...second.entries].map((entry) => entry.path).sort()).toEqual(["a", "b.txt"]);

    await store.remove("proj_l", "a/deep/two.txt");
    // A key that is no longer there: nothing happens, and nothing fails.
    await store.remove("proj_l", "a/deep/two.txt");
    expect((await store.list("proj_l", "a", undefined, 1000)).entries.map((entry) => entry.path)).toEqual([
      "a/one.txt",
    ]);
  });

  it("refuses a project id that could reach another's keys, and says when the stack has no bucket", async () => {
    await expect(store.urls("proj_a/../proj_b", "x", now() + 1000)).rejects.toThrow("not a project id");
    const none = new S3FileStore({ s3, bucket: undefined, sign: getSignedUrl, now });
    await expect(none.list("proj_a", "", undefined, 10)).rejects.toThrow(
      "this stack has no File Store bucket (SLUICE_FILE_STORE_BUCKET is not set)",
    );
  });
});
