import type { SourceRecord } from "#core/component-model";

/**
 * A source of `owner` (as `createAccount` or `accountIn` return it) in its default workspace, for
 * tests that need a stored source without deploying code: pass it to `SourceStore.createSource`.
 */
export function sourceRecord(
  owner: { user: { id: string }; workspace: { id: string } },
  id: string,
  nowMs = 0,
): SourceRecord {
  return {
    id,
    userId: owner.user.id,
    workspaceId: owner.workspace.id,
    componentId: "sc_01kab00000abcdefghjkmn",
    name: "feed",
    nameSlug: "feed",
    configuredProps: {},
    active: true,
    createdAt: nowMs,
    updatedAt: nowMs,
  };
}
