import { CfnOutput, Duration, RemovalPolicy, Stack, type StackProps } from "aws-cdk-lib";
import { AttributeType, Billing, type CfnGlobalTable, TableV2 } from "aws-cdk-lib/aws-dynamodb";
import { AccountRootPrincipal, PolicyDocument, PolicyStatement } from "aws-cdk-lib/aws-iam";
import { type CfnKey, Key } from "aws-cdk-lib/aws-kms";
import { BlockPublicAccess, Bucket, BucketEncryption, type CfnBucket, ObjectOwnership } from "aws-cdk-lib/aws-s3";
import type { Construct } from "constructs";
import { RESOURCES_TABLE } from "#config/shared-names";

export interface StatefulStackProps extends StackProps {
  /**
   * Whether DynamoDB refuses to delete the tables, even when asked by CloudFormation or the console.
   * Turn it off only for a throwaway stage you mean to delete by hand.
   * @default true
   */
  readonly deletionProtection?: boolean;
  /** Stage of the deployment, part of the secrets key's alias. @default "default" */
  readonly stage?: string;
}

/** Logical id of the secrets key, fixed like the table's: a replaced key could open no sealed secret. */
export const SECRETS_KEY_ID = "SecretsKey";
/** Logical id of the File Store bucket, fixed: a replaced bucket would be an empty one. */
export const FILE_STORES_BUCKET_ID = "FileStores";

/**
 * Everything that holds data: the DynamoDB tables (later also events and deliveries, and the
 * EventBridge bus). Kept apart from the service stack so a redeploy of the service never risks data.
 */
export class StatefulStack extends Stack {
  /** Users, API keys, workspaces, projects and usage: see docs/table-design.md. */
  readonly resourcesTable: TableV2;
  /** Seals secret prop values (envelope encryption, `KmsSecrets`). */
  readonly secretsKey: Key;
  /** Projects' File Stores (`$.files`): the objects `<project id>/<path>` (`S3FileStore`). */
  readonly fileStoreBucket: Bucket;

  constructor(scope: Construct, id: string, props: StatefulStackProps = {}) {
    super(scope, id, props);
    const deletionProtection = props.deletionProtection ?? true;

    this.resourcesTable = new TableV2(this, RESOURCES_TABLE.id, {
      partitionKey: { name: RESOURCES_TABLE.partitionKey, type: AttributeType.STRING },
      sortKey: { name: RESOURCES_TABLE.sortKey, type: AttributeType.STRING },
      // On-demand: a self-hosted install has spiky, mostly idle traffic and nobody to tune capacity.
      billing: Billing.onDemand(),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      // Items with `expiresAt` (epoch seconds) are removed by DynamoDB after that time, at no cost:
      // the retention of events (docs/aws.md, "Event history, deletion and the live stream on AWS").
      timeToLiveAttribute: RESOURCES_TABLE.timeToLiveAttribute,
      deletionProtection,
      // Deleting the stack leaves the table (and its data) in place.
      removalPolicy: RemovalPolicy.RETAIN,
    });
    // A fixed logical id: moving or renaming the construct must never make CloudFormation
    // replace the table.
    (this.resourcesTable.node.defaultChild as CfnGlobalTable).overrideLogicalId(RESOURCES_TABLE.id);

    // Secret props in the table are sealed with data keys of this key, so it lives and dies with the
    // data: retained, and rotated yearly (old key material stays usable for decryption).
    this.secretsKey = new Key(this, SECRETS_KEY_ID, {
      description: "Sluice: seals secret prop values of sources",
      alias: `alias/sluice/${props.stage ?? "default"}/secrets`,
      enableKeyRotation: true,
      removalPolicy: RemovalPolicy.RETAIN,
      // The account's IAM policies decide who may use the key (the service stack grants its
      // functions on their roles), so the key policy never refers to the service stack.
      policy: new PolicyDocument({
        statements: [
          new PolicyStatement({ actions: ["kms:*"], principals: [new AccountRootPrincipal()], resources: ["*"] }),
        ],
      }),
    });
    (this.secretsKey.node.defaultChild as CfnKey).overrideLogicalId(SECRETS_KEY_ID);

    // Users' files: retained with the stack's deletion, as the table is; never public (files are
    // read and written through pre-signed URLs only).
    this.fileStoreBucket = new Bucket(this, FILE_STORES_BUCKET_ID, {
      encryption: BucketEncryption.S3_MANAGED,
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      objectOwnership: ObjectOwnership.BUCKET_OWNER_ENFORCED,
      enforceSSL: true,
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [{ id: "AbortIncompleteUploads", abortIncompleteMultipartUploadAfter: Duration.days(1) }],
    });
    (this.fileStoreBucket.node.defaultChild as CfnBucket).overrideLogicalId(FILE_STORES_BUCKET_ID);

    new CfnOutput(this, "ResourcesTableName", {
      value: this.resourcesTable.tableName,
      description: "DynamoDB table of users, API keys, workspaces and projects (for `sluice create-user --table`)",
    });
  }
}
