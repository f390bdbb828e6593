import { describe, expect, it } from "vitest";
import { withUnsentStepBundles } from "#adapters/local/sandbox-owner-process";
import type { Invocation, WorkflowInvocation } from "#runtime/protocol";
import type { InvokeRequest } from "#runtime/sandbox-channel";

const run = (stepBundles: Record<string, string>): InvokeRequest => ({
  type: "invoke",
  stepBundles,
  invocation: { invocationId: "i", kind: "workflow" } as WorkflowInvocation,
});

describe("withUnsentStepBundles: a child is sent each step bundle path once", () => {
  it("sends every path the first time, none the next, and a hash's new path when it moved", () => {
    const sent = new Map<string, string>();
    const first = run({ h1: "/d1/steps/h1.mjs", h2: "/d1/steps/h2.mjs" });
    expect(withUnsentStepBundles(first, sent)).toEqual(first);
    expect(withUnsentStepBundles(run({ h1: "/d1/steps/h1.mjs", h2: "/d1/steps/h2.mjs" }), sent)).toEqual(run({}));
    // A new deployment: same code for h1 in a new folder, and a new step h3.
    expect(withUnsentStepBundles(run({ h1: "/d2/steps/h1.mjs", h3: "/d2/steps/h3.mjs" }), sent)).toEqual(
      run({ h1: "/d2/steps/h1.mjs", h3: "/d2/steps/h3.mjs" }),
    );
    expect(sent).toEqual(
      new Map([
        ["h1", "/d2/steps/h1.mjs"],
        ["h2", "/d1/steps/h2.mjs"],
        ["h3", "/d2/steps/h3.mjs"],
      ]),
    );
  });

  it("leaves the task's own request as it is (another child may be sent it whole) and a source's request alone", () => {
    const sent = new Map([["h1", "/d1/steps/h1.mjs"]]);
    const request = run({ h1: "/d1/steps/h1.mjs" });
    withUnsentStepBundles(request, sent);
    expect(request).toEqual(run({ h1: "/d1/steps/h1.mjs" }));
    const source: InvokeRequest = { type: "invoke", bundlePath: "/s/b.mjs", invocation: {} as Invocation };
    expect(withUnsentStepBundles(source, sent)).toBe(source);
  });
});
