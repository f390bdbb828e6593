import { describe, expect, it } from "vitest";
import { PROBE_ID_TIME } from "#config/shared-names";
import { probeWorkflowId } from "#core/run-action";

describe("probeWorkflowId", () => {
  it("is a workflow id of time 0, which the stack's rights for run-action functions match, and no real workflow has", () => {
    const id = probeWorkflowId("o_one", "sc_component");
    expect(id.startsWith(`p_${PROBE_ID_TIME}`)).toBe(true);
    expect(probeWorkflowId("o_one", "sc_component")).toBe(id);
    expect(probeWorkflowId("o_two", "sc_component")).not.toBe(id);
    expect(probeWorkflowId("o_one", "sc_other")).not.toBe(id);
  });
});
