import { describe, expect, it } from "vitest";
import * as z from "zod";
import {
  decodeCursor,
  encodeCursor,
  type PageQuery,
  pageEnvelope,
  pageParamsSchema,
  slicePage,
  toPageQuery,
} from "#core/pagination";
import { paginated } from "#http/schemas";

const keys = Array.from({ length: 25 }, (_, i) => `k${String(i).padStart(2, "0")}`).reverse(); // newest first
const page = (query: PageQuery) => slicePage(keys, (k) => k, query);

describe("pagination", () => {
  it("round-trips any sort key through an opaque cursor", () => {
    for (const key of ["1790000000000-0", "dc_01m7xmwmfs3ewnbgqmt11g", "ünïcode:with:colons"]) {
      const cursor = encodeCursor(key);
      expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(decodeCursor(cursor, "after")).toBe(key);
    }
  });

  it.each([
    ["not base64!"],
    [""],
    [Buffer.from("2:future-version").toString("base64url")],
    [Buffer.from("1:").toString("base64url")],
    ["x".repeat(600)],
  ])("rejects the malformed cursor %j with a 400 naming the parameter", (cursor) => {
    expect(() => decodeCursor(cursor, "before")).toThrow(
      expect.objectContaining({ code: "validation", message: expect.stringMatching(/^before: /) }),
    );
  });

  it("takes the cursors of a list of longer keys, and of an empty key, where the list says so", () => {
    // A data store's record keys: up to 512 bytes, and "" is one.
    const long = "k".repeat(512);
    expect(() => decodeCursor(encodeCursor(long), "after")).toThrow(/not a valid cursor/);
    expect(decodeCursor(encodeCursor(long), "after", { maxKeyBytes: 512 })).toBe(long);
    expect(() => decodeCursor("k".repeat(1000), "after", { maxKeyBytes: 512 })).toThrow(/not a valid cursor/);
    expect(() => decodeCursor(encodeCursor(""), "after")).toThrow(/not a valid cursor/);
    expect(decodeCursor(encodeCursor(""), "after", { allowEmpty: true })).toBe("");
  });

  it("defaults the limit to 10 and accepts 1 to 100", () => {
    expect(toPageQuery(pageParamsSchema.parse({}))).toEqual({ limit: 10 });
    expect(pageParamsSchema.parse({ limit: "1" }).limit).toBe(1);
    expect(pageParamsSchema.parse({ limit: "100" }).limit).toBe(100);
    for (const limit of ["0", "101", "2.5", "ten", "-3"]) {
      expect(pageParamsSchema.safeParse({ limit }).success, `limit=${limit}`).toBe(false);
    }
  });

  it("refuses after and before together", () => {
    expect(() => toPageQuery({ after: encodeCursor("a"), before: encodeCursor("b") })).toThrow(
      /after: cannot be combined/,
    );
  });

  it("pages newest first: the first page, then after its end cursor, until the last item", () => {
    const seen: string[] = [];
    let query: PageQuery = { limit: 10 };
    for (;;) {
      const result = page(query);
      seen.push(...result.items);
      expect(result.totalCount).toBe(25);
      const envelope = pageEnvelope(
        result,
        (k) => k,
        (k) => k,
      );
      if (result.items.length < query.limit || envelope.page_info.end_cursor === null) break;
      query = { limit: 10, after: decodeCursor(envelope.page_info.end_cursor, "after") };
    }
    expect(seen).toEqual(keys);
  });

  it("pages back with before: the nearest newer items, in list order", () => {
    expect(page({ limit: 3, before: "k10" }).items).toEqual(["k13", "k12", "k11"]);
    expect(page({ limit: 30, before: "k20" }).items).toEqual(["k24", "k23", "k22", "k21"]);
    expect(page({ limit: 5, before: "k24" }).items).toEqual([]);
  });

  it("stays consistent when newer items arrive between pages", () => {
    const first = page({ limit: 5 });
    const grown = ["k99", "k98", ...keys];
    const next = slicePage(grown, (k) => k, { limit: 5, after: first.items.at(-1)! });
    expect(next.items).toEqual(["k19", "k18", "k17", "k16", "k15"]);
  });

  it("produces exactly the envelope the OpenAPI document declares for paginated lists", () => {
    const schema = paginated(z.object({ id: z.string() })).strict();
    expect(
      schema.safeParse(
        pageEnvelope(
          page({ limit: 3 }),
          (k) => k,
          (k) => ({ id: k }),
        ),
      ).success,
    ).toBe(true);
    expect(
      schema.safeParse(
        pageEnvelope(
          { items: [], totalCount: 0 },
          (k: string) => k,
          (k) => ({ id: k }),
        ),
      ).success,
    ).toBe(true);
  });

  it("reports counts and cursors in page_info, and null cursors for an empty page", () => {
    const envelope = pageEnvelope(
      page({ limit: 2 }),
      (k) => k,
      (k) => ({ id: k }),
    );
    expect(envelope).toEqual({
      page_info: { total_count: 25, count: 2, start_cursor: encodeCursor("k24"), end_cursor: encodeCursor("k23") },
      data: [{ id: "k24" }, { id: "k23" }],
    });
    expect(
      pageEnvelope(
        { items: [], totalCount: 0 },
        (k: string) => k,
        (k) => k,
      ).page_info,
    ).toEqual({
      total_count: 0,
      count: 0,
      start_cursor: null,
      end_cursor: null,
    });
  });
});
