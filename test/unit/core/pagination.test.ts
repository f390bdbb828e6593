import { describe, expect, it } from "vitest";
import * as z from "zod";
import {
  decodeCursor,
  encodeCursor,
  PAGE_MAX_BYTES,
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
        query,
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
          {},
        ),
      ).success,
    ).toBe(true);
    expect(
      schema.safeParse(
        pageEnvelope(
          { items: [], totalCount: 0 },
          (k: string) => k,
          (k) => ({ id: k }),
          {},
        ),
      ).success,
    ).toBe(true);
  });

  it("reports counts and cursors in page_info, and null cursors for an empty page", () => {
    const envelope = pageEnvelope(
      page({ limit: 2 }),
      (k) => k,
      (k) => ({ id: k }),
      {},
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
        {},
      ).page_info,
    ).toEqual({
      total_count: 0,
      count: 0,
      start_cursor: null,
      end_cursor: null,
    });
  });

  describe("a page over its byte budget", () => {
    // Each view is {"id":"kNN","pad":"xxx..."}: 1,000 bytes of padding, about 1,021 bytes of JSON.
    const padded = (k: string) => ({ id: k, pad: "x".repeat(1000) });
    const viewBytes = Buffer.byteLength(JSON.stringify(padded("k24")));

    it("keeps the first items that fit, and its end cursor names the last kept one", () => {
      const envelope = pageEnvelope(page({ limit: 10 }), (k) => k, padded, {}, viewBytes * 3 + 10);
      expect(envelope.data.map((view) => view.id)).toEqual(["k24", "k23", "k22"]);
      expect(envelope.page_info).toEqual({
        total_count: 25,
        count: 3,
        start_cursor: encodeCursor("k24"),
        end_cursor: encodeCursor("k22"),
      });
    });

    it("pages through every item, in order, however the budget cuts the pages", () => {
      const seen: string[] = [];
      let query: PageQuery = { limit: 10 };
      for (let pages = 0; pages < 50; pages++) {
        const envelope = pageEnvelope(page(query), (k) => k, padded, query, viewBytes * 4);
        seen.push(...envelope.data.map((view) => view.id));
        if (envelope.page_info.end_cursor === null || seen.length === keys.length) break;
        query = { limit: 10, after: decodeCursor(envelope.page_info.end_cursor, "after") };
      }
      expect(seen).toEqual(keys);
    });

    it("with before, keeps the items nearest the cursor (the last ones), so paging back skips none", () => {
      const query = { limit: 5, before: "k10" };
      expect(page(query).items).toEqual(["k15", "k14", "k13", "k12", "k11"]);
      const envelope = pageEnvelope(page(query), (k) => k, padded, query, viewBytes * 2);
      expect(envelope.data.map((view) => view.id)).toEqual(["k12", "k11"]);
      expect(envelope.page_info.start_cursor).toBe(encodeCursor("k12"));
      expect(envelope.page_info.end_cursor).toBe(encodeCursor("k11"));
      const back = { limit: 5, before: decodeCursor(envelope.page_info.start_cursor as string, "before") };
      expect(page(back).items.at(-1)).toBe("k13");
    });

    it("answers one item even when it alone is over the budget", () => {
      const envelope = pageEnvelope(page({ limit: 3 }), (k) => k, padded, {}, 10);
      expect(envelope.data.map((view) => view.id)).toEqual(["k24"]);
      expect(envelope.page_info.count).toBe(1);
    });

    it("counts UTF-8 bytes, not characters", () => {
      const wide = (k: string) => ({ id: k, pad: "é".repeat(500) });
      const wideBytes = Buffer.byteLength(JSON.stringify(wide("k24")));
      expect(wideBytes).toBeGreaterThan(JSON.stringify(wide("k24")).length + 400);
      const envelope = pageEnvelope(page({ limit: 10 }), (k) => k, wide, {}, wideBytes * 2 + 5);
      expect(envelope.page_info.count).toBe(2);
    });

    it("is 2 MiB by default: 100 events of 100 KB are answered in pages of about 20", () => {
      expect(PAGE_MAX_BYTES).toBe(2 * 1024 * 1024);
      const big = (k: string) => ({ id: k, raw_event: "y".repeat(100 * 1024) });
      const envelope = pageEnvelope(page({ limit: 25 }), (k) => k, big, {});
      expect(envelope.page_info.count).toBe(20);
    });
  });
});
