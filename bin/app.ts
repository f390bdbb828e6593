#!/usr/bin/env node
import { App, Tags } from "aws-cdk-lib";
import { STAGE_PATTERN, STAGE_RULE } from "#config/aws-compute-env";
import type { LogLevel } from "#core/ports/logger";
import { bucketList } from "#core/ports/object-sink";
import { ServiceStack } from "../lib/service-stack.ts";
import { intContext, logRetentionOf } from "../lib/stack-settings.ts";
import { StatefulStack } from "../lib/stateful-stack.ts";

const app = new App();

// `cdk deploy -c stage=dev` deploys a second, independent copy (`dev-SluiceStateful`, ...).
const stage: unknown = app.node.tryGetContext("stage");
if (stage !== undefined && (typeof stage !== "string" || !STAGE_PATTERN.test(stage))) {
  throw new Error(`Invalid stage ${JSON.stringify(stage)}: use ${STAGE_RULE} (it prefixes the stack names).`);
}
// `-c npmRegistry=https://...`: where deploying functions install the npm packages components import.
const npmRegistry: unknown = app.node.tryGetContext("npmRegistry");
if (npmRegistry !== undefined && typeof npmRegistry !== "string") {
  throw new Error(`Invalid npmRegistry ${JSON.stringify(npmRegistry)}: use an http or https URL.`);
}
// `-c logLevel=warn`: SLUICE_LOG_LEVEL of every function (the stack refuses an unknown level).
const logLevel: unknown = app.node.tryGetContext("logLevel");
if (logLevel !== undefined && typeof logLevel !== "string") {
  throw new Error(`Invalid logLevel ${JSON.stringify(logLevel)}: use debug, info, warn, error or silent.`);
}
// `-c s3Buckets=a,b`: the buckets a workflow's `$.send.s3` may write to (none by default).
const s3Buckets: unknown = app.node.tryGetContext("s3Buckets");
if (s3Buckets !== undefined && typeof s3Buckets !== "string") {
  throw new Error(`Invalid s3Buckets ${JSON.stringify(s3Buckets)}: use bucket names separated by commas.`);
}
// `-c registryDir=./my-registry`: a components tree in the registry's layout, bundled at deploy and
// served by key (the stack refuses a path that is no folder).
const registryDir: unknown = app.node.tryGetContext("registryDir");
if (registryDir !== undefined && typeof registryDir !== "string") {
  throw new Error(`Invalid registryDir ${JSON.stringify(registryDir)}: use the path of a folder.`);
}
// `-c appsFile=./apps.json`: apps added to or replacing the shipped ones (docs/accounts.md "Apps"),
// checked at synth.
const appsFile: unknown = app.node.tryGetContext("appsFile");
if (appsFile !== undefined && typeof appsFile !== "string") {
  throw new Error(`Invalid appsFile ${JSON.stringify(appsFile)}: use the path of a JSON file.`);
}
// `-c logRetentionDays=90`, `-c maxStreams=100` (or `unreserved`), `-c maxDeliveryConcurrency=20`:
// defaults and rules in lib/stack-settings.ts.
const logRetention = logRetentionOf(app.node.tryGetContext("logRetentionDays"));
const maxStreamsValue: unknown = app.node.tryGetContext("maxStreams");
const maxStreams =
  maxStreamsValue === "unreserved" ? "unreserved" : intContext(maxStreamsValue, "maxStreams", { min: 1, max: 10_000 });
const maxDeliveryConcurrency = intContext(app.node.tryGetContext("maxDeliveryConcurrency"), "maxDeliveryConcurrency", {
  min: 2,
  max: 1000,
});
const prefix = stage ? `${stage}-` : "";
const where = stage ? ` (stage ${stage})` : "";

// No `env`: the stacks are environment-agnostic and deploy to the operator's account and region.
const stateful = new StatefulStack(app, `${prefix}SluiceStateful`, {
  description: `Sluice data${where}: DynamoDB tables and the secrets key, retained on stack deletion`,
  stage: stage || undefined,
});
new ServiceStack(app, `${prefix}SluiceService`, {
  description: `Sluice service${where}: HTTP API, one Lambda function per REST endpoint, and what sources run on`,
  resourcesTable: stateful.resourcesTable,
  secretsKey: stateful.secretsKey,
  fileStoreBucket: stateful.fileStoreBucket,
  stage: stage || undefined,
  npmRegistry: npmRegistry || undefined,
  logLevel: (logLevel || undefined) as LogLevel | undefined,
  s3Buckets: bucketList(s3Buckets),
  registryDir: registryDir || undefined,
  appsFile: appsFile || undefined,
  logRetention,
  maxStreams,
  maxDeliveryConcurrency,
});

Tags.of(app).add("sluice:stage", stage ? stage : "default");
