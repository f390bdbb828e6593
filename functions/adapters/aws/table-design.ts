/**
 * The DynamoDB table design, shared by the adapters, the stateful CDK stack and the test
 * harness that creates tables in DynamoDB Local, so the three cannot disagree.
 * docs/table-design.md explains it.
 */

/** The resources table: one item collection per owner record, generic `pk`/`sk` string keys. */
export const RESOURCES_TABLE = {
  /** Logical id and construct id in the stateful stack. */
  id: "Resources",
  partitionKey: "pk",
  sortKey: "sk",
} as const;

/** Key builders: the only place item keys are spelled. */
export const resourceKeys = {
  user: (userId: string) => ({ pk: `USER#${userId}`, sk: "USER" }),
  username: (username: string) => ({ pk: `USERNAME#${username}`, sk: "USERNAME" }),
  apiKey: (hash: string) => ({ pk: `APIKEY#${hash}`, sk: "APIKEY" }),
  workspace: (workspaceId: string) => ({ pk: `WS#${workspaceId}`, sk: "WS" }),
  /** The membership as seen from the workspace. */
  member: (workspaceId: string, userId: string) => ({ pk: `WS#${workspaceId}`, sk: `MEMBER#${userId}` }),
  /** The same membership as seen from the user, so "my workspaces" is one Query. */
  membershipOfUser: (userId: string, workspaceId: string) => ({ pk: `USER#${userId}`, sk: `WS#${workspaceId}` }),
  project: (workspaceId: string, projectId: string) => ({ pk: `WS#${workspaceId}`, sk: `PROJ#${projectId}` }),
  workspaceCounter: () => ({ pk: "COUNTER", sk: "WORKSPACE_NUMBER" }),
  usage: (ownerId: string, day: string) => ({ pk: `USAGE#${ownerId}`, sk: `DAY#${day}` }),
} as const;

export const SORT_KEY_PREFIX = {
  membershipOfUser: "WS#",
  project: "PROJ#",
} as const;

/** CreateTable input for DynamoDB Local; the stateful stack declares the same keys with TableV2. */
export function resourcesTableCreateInput(tableName: string) {
  return {
    TableName: tableName,
    BillingMode: "PAY_PER_REQUEST" as const,
    AttributeDefinitions: [
      { AttributeName: RESOURCES_TABLE.partitionKey, AttributeType: "S" as const },
      { AttributeName: RESOURCES_TABLE.sortKey, AttributeType: "S" as const },
    ],
    KeySchema: [
      { AttributeName: RESOURCES_TABLE.partitionKey, KeyType: "HASH" as const },
      { AttributeName: RESOURCES_TABLE.sortKey, KeyType: "RANGE" as const },
    ],
  };
}
