import { describe, expect, it } from "vitest";
import { applyFieldFilter, readFieldFilter } from "#http/field-filter";

describe("include and exclude", () => {
  const body = { data: { id: "o_1", name: "n", email: "e" } };

  it("keeps only the included fields of a single resource", () => {
    expect(applyFieldFilter(body, readFieldFilter({ include: "id, email" }, undefined))).toEqual({
      data: { id: "o_1", email: "e" },
    });
  });

  it("drops the excluded fields of every item of a list and leaves page_info alone", () => {
    const page = {
      page_info: { count: 2 },
      data: [
        { id: 1, secret: 1 },
        { id: 2, secret: 2 },
      ],
    };
    expect(applyFieldFilter(page, readFieldFilter({ exclude: "secret,page_info" }, undefined))).toEqual({
      page_info: { count: 2 },
      data: [{ id: 1 }, { id: 2 }],
    });
  });

  it("lets include win when both are given", () => {
    expect(applyFieldFilter(body, readFieldFilter({ include: "id", exclude: "id" }, undefined))).toEqual({
      data: { id: "o_1" },
    });
  });

  it("reads the parameters from a JSON body and removes them from it before validation", () => {
    const json: Record<string, unknown> = { name: "x", include: "id" };
    const filter = readFieldFilter({}, json);
    expect(json).toEqual({ name: "x" });
    expect(applyFieldFilter(body, filter)).toEqual({ data: { id: "o_1" } });
  });

  it("removes the parameters from the query and ignores empty lists", () => {
    const query: Record<string, string | undefined> = { include: " , ", limit: "5" };
    expect(readFieldFilter(query, undefined)).toBeUndefined();
    expect(query).toEqual({ limit: "5" });
  });
});
