import { Duration } from "aws-cdk-lib";
import type { ITableV2 } from "aws-cdk-lib/aws-dynamodb";
import { Rule, Schedule } from "aws-cdk-lib/aws-events";
import { LambdaFunction as LambdaTarget } from "aws-cdk-lib/aws-events-targets";
import type { RetentionDays } from "aws-cdk-lib/aws-logs";
import { Construct } from "constructs";
import { ENV } from "#config/env";
import type { EventFanout } from "./event-fanout.ts";
import { type BundledTree, SluiceFunction } from "./sluice-function.ts";
import type { SourceCompute } from "./source-compute.ts";
import { grantTableAccess } from "./table-access.ts";

/** How often the refresher runs; tokens expiring within ten minutes are renewed (REFRESH_AHEAD_MS). */
export const ACCOUNT_REFRESH_INTERVAL = Duration.minutes(5);

export interface AccountRefresherProps {
  readonly resourcesTable: ITableV2;
  /** Its `attachSecrets`: the key the accounts' credentials are sealed with. */
  readonly sources: SourceCompute;
  /** Its `attachPublisher`: a refusal's notice on the sources' `$errors` is published. */
  readonly eventFanout: EventFanout;
  /** The app catalog (token URLs, client ids and secrets), as the account routes carry it. */
  readonly apps: BundledTree;
  readonly logRetention?: RetentionDays;
}

/**
 * The background refresh of OAuth accounts on AWS (docs/accounts.md "Refresh"): a function
 * (functions/internal/account-refresher.ts) run by an EventBridge schedule every
 * {@link ACCOUNT_REFRESH_INTERVAL}. It reads and writes the accounts, opens and seals their
 * credentials with the stack's key, calls the apps' token and test endpoints, and stores and
 * publishes a refusal's notice on the `$errors` of the sources using the account; nothing else.
 */
export class AccountRefresher extends Construct {
  readonly refresher: SluiceFunction;
  readonly rule: Rule;

  constructor(scope: Construct, id: string, props: AccountRefresherProps) {
    super(scope, id);
    this.refresher = new SluiceFunction(this, "Refresher", {
      entry: "functions/internal/account-refresher.ts",
      description: "Renews OAuth tokens before they expire (functions/internal/account-refresher.ts)",
      // Up to 100 accounts, each a token request and a test request of at most 10 s: a run cut
      // short by its timeout leaves the rest to the next.
      timeout: ACCOUNT_REFRESH_INTERVAL,
      logRetention: props.logRetention,
      copyTrees: [props.apps],
      environment: { [ENV.resourcesTable]: props.resourcesTable.tableName },
    });
    const fn = this.refresher.lambdaFunction;
    grantTableAccess(props.resourcesTable, fn, "write");
    props.sources.attachSecrets(fn, { seal: true });
    props.eventFanout.attachPublisher(fn);
    // A missed run changes nothing the next one does not do.
    fn.configureAsyncInvoke({ retryAttempts: 0 });
    this.rule = new Rule(this, "Schedule", {
      schedule: Schedule.rate(ACCOUNT_REFRESH_INTERVAL),
      description: "Runs the account refresher (docs/accounts.md, Refresh)",
      targets: [new LambdaTarget(fn, { retryAttempts: 0 })],
    });
  }
}
