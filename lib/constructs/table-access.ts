import type { ITableV2 } from "aws-cdk-lib/aws-dynamodb";
import type { IGrantable } from "aws-cdk-lib/aws-iam";
import type { TableAccess } from "#http/route";

/**
 * The DynamoDB actions of the requests Sluice's stores send (functions/adapters/aws/dynamodb-*.ts:
 * Get, BatchGet, Query; Put, Update, Delete, BatchWrite, and TransactWrite, which IAM authorises
 * as the Put, Update and Delete it holds). CDK's `grantReadData` would add Scan, DescribeTable,
 * ConditionCheckItem and the stream reads, which no store sends (function-rights.test.ts checks
 * the stores' commands against these lists).
 */
export const TABLE_ACTIONS: Readonly<Record<TableAccess, readonly string[]>> = {
  read: ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"],
  write: [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
  ],
};

/** Lets `grantee` read, or read and write, the items of `table` (no index, no stream: it has neither). */
export function grantTableAccess(table: ITableV2, grantee: IGrantable, access: TableAccess): void {
  table.grant(grantee, ...TABLE_ACTIONS[access]);
}
