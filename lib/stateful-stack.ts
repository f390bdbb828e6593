import { CfnOutput, RemovalPolicy, Stack, type StackProps } from "aws-cdk-lib";
import { AttributeType, Billing, type CfnGlobalTable, TableV2 } from "aws-cdk-lib/aws-dynamodb";
import type { Construct } from "constructs";
import { RESOURCES_TABLE } from "#adapters/aws/table-design";

export interface StatefulStackProps extends StackProps {
  /**
   * Whether DynamoDB refuses to delete the tables, even when asked by CloudFormation or the console.
   * Turn it off only for a throwaway stage you mean to delete by hand.
   * @default true
   */
  readonly deletionProtection?: boolean;
}

/**
 * Everything that holds data: the DynamoDB tables (later also events and deliveries, and the
 * EventBridge bus). Kept apart from the service stack so a redeploy of the service never risks data.
 */
export class StatefulStack extends Stack {
  /** Users, API keys, workspaces, projects and usage: see docs/table-design.md. */
  readonly resourcesTable: TableV2;

  constructor(scope: Construct, id: string, props: StatefulStackProps = {}) {
    super(scope, id, props);
    const deletionProtection = props.deletionProtection ?? true;

    this.resourcesTable = new TableV2(this, RESOURCES_TABLE.id, {
      partitionKey: { name: RESOURCES_TABLE.partitionKey, type: AttributeType.STRING },
      sortKey: { name: RESOURCES_TABLE.sortKey, type: AttributeType.STRING },
      // On-demand: a self-hosted install has spiky, mostly idle traffic and nobody to tune capacity.
      billing: Billing.onDemand(),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection,
      // Deleting the stack leaves the table (and its data) in place.
      removalPolicy: RemovalPolicy.RETAIN,
    });
    // A fixed logical id: moving or renaming the construct must never make CloudFormation
    // replace the table.
    (this.resourcesTable.node.defaultChild as CfnGlobalTable).overrideLogicalId(RESOURCES_TABLE.id);

    new CfnOutput(this, "ResourcesTableName", {
      value: this.resourcesTable.tableName,
      description: "DynamoDB table of users, API keys, workspaces and projects (for `sluice create-user --table`)",
    });
  }
}
