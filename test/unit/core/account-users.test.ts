import { describe, expect, it } from "vitest";
import { accountUsers, namesAccount } from "#core/account-users";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { sourceRecord } from "../../support/source-record.ts";
import { workflowRecord } from "../../support/workflow-record.ts";

const ACCOUNT = "apn_01kab00000account00000";

describe("accountUsers", () => {
  it("finds the sources and workflow steps whose props name the account, past the first page of each list", async () => {
    const deps = memoryDeps();
    const ada = await accountIn(deps, "ada");
    const eve = await accountIn(deps, "eve");
    const id = (n: number) => `dc_01kab${String(n).padStart(17, "0")}`;
    // The oldest source uses it: newest first, it is on the second page of 100.
    await deps.sources.createSource({
      ...sourceRecord(ada, id(0)),
      name: "oldest",
      configuredProps: { github: { authProvisionId: ACCOUNT }, other: "x" },
    });
    for (let n = 1; n <= 100; n++) {
      await deps.sources.createSource({
        ...sourceRecord(ada, id(n)),
        nameSlug: `feed-${n}`,
        configuredProps: { github: { authProvisionId: "apn_other" }, list: [{ authProvisionId: ACCOUNT }] },
      });
    }
    // Another workspace's source naming the same id is not this workspace's user.
    await deps.sources.createSource({
      ...sourceRecord(eve, "dc_01kab00000000000000eve"),
      configuredProps: { github: { authProvisionId: ACCOUNT } },
    });
    const step = (props: Record<string, unknown>) => ({
      id: "c_1",
      namespace: "s",
      disabled: false,
      origin: "code" as const,
      componentId: "sc_1",
      configuredProps: props as never,
    });
    await deps.workflows.createWorkflow({
      ...workflowRecord(ada, "p_01kab00000000000000use"),
      steps: [step({}), step({ github: { authProvisionId: ACCOUNT } })],
    });
    await deps.workflows.createWorkflow({ ...workflowRecord(ada, "p_01kab0000000000000none"), steps: [step({})] });

    expect(await accountUsers(deps, ada.workspace.id, ACCOUNT)).toEqual({
      sources: [{ id: id(0), name: "oldest" }],
      workflows: [{ id: "p_01kab00000000000000use", name: "flow" }],
    });
    expect(await accountUsers(deps, ada.workspace.id, "apn_unused")).toEqual({ sources: [], workflows: [] });
  });

  it("counts only an object prop holding exactly that authProvisionId", () => {
    expect(namesAccount({ authProvisionId: ACCOUNT }, ACCOUNT)).toBe(true);
    for (const value of [ACCOUNT, [{ authProvisionId: ACCOUNT }], null, { authProvisionId: `${ACCOUNT}x` }, {}]) {
      expect(namesAccount(value, ACCOUNT)).toBe(false);
    }
  });
});
