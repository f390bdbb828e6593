import { describe, expect, it } from "vitest";
import { PROBE_ID_TIME } from "#config/shared-names";
import { formatId, probeIdOf } from "#core/ids";
import { probeWorkflowId } from "#core/run-action";
import { sha256Hex } from "#core/sha256";

describe("probeWorkflowId", () => {
  it("is a workflow id of time 0, which the stack's rights for run-action functions match, and no real workflow has", () => {
    const id = probeWorkflowId("o_one", "sc_component");
    expect(id.startsWith(`p_${PROBE_ID_TIME}`)).toBe(true);
    expect(probeWorkflowId("o_one", "sc_component")).toBe(id);
    expect(probeWorkflowId("o_two", "sc_component")).not.toBe(id);
    expect(probeWorkflowId("o_one", "sc_other")).not.toBe(id);
  });
});

describe("probeIdOf", () => {
  it("keeps the ids probes had before it was shared (their AWS functions are named after them)", () => {
    // The run action's and the configure probe's ids as first written: sha256 of the parts joined by new lines.
    const legacy = (kind: "workflow" | "source", text: string) =>
      formatId(kind, 0, Buffer.from(sha256Hex(text), "hex"));
    expect(probeWorkflowId("o_1", "sc_1")).toBe(legacy("workflow", "run action\no_1\nsc_1"));
    expect(probeIdOf("source", "configure", "o_1", "sc_1")).toBe(legacy("source", "configure\no_1\nsc_1"));
  });
});
