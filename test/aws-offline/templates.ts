/**
 * The two stacks' templates, synthesized as `cdk synth` writes them, and the one transform that
 * makes them deployable into moto's CloudFormation (docs/aws.md, "The offline deployment test").
 */
import { App, type Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import type { RouteSpec } from "../../lib/constructs/api-route-function.ts";
import { ServiceStack } from "../../lib/service-stack.ts";
import { StatefulStack } from "../../lib/stateful-stack.ts";

export interface CfnResource {
  Type: string;
  Properties?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface CfnTemplate {
  Resources: Record<string, CfnResource>;
  Parameters?: Record<string, unknown>;
  Rules?: Record<string, unknown>;
  Outputs?: Record<string, unknown>;
  [key: string]: unknown;
}

export const STATEFUL_STACK = "SluiceStateful";
export const SERVICE_STACK = "SluiceService";

export interface SluiceApp {
  app: App;
  stateful: StatefulStack;
  service: ServiceStack;
}

/**
 * Both stacks as `bin/app.ts` makes them (default stage and context). `bundle: false` skips the
 * functions' bundling (as `cdk synth --exclusively` of another stack does), which leaves the
 * template as it is but for the assets' hashes; `routes` narrows the REST routes; `npmRegistry` is
 * `bin/app.ts`'s `-c npmRegistry`.
 */
export function synthSluice(options: {
  outdir?: string;
  bundle: boolean;
  routes?: readonly RouteSpec[];
  /** `-c npmRegistry=<url>`. */
  npmRegistry?: string;
}): SluiceApp {
  // The CloudFormation validation plugin is cfn-lint's job elsewhere.
  process.env.CDK_VALIDATION = "false";
  const app = new App({
    ...(options.outdir ? { outdir: options.outdir } : {}),
    ...(options.bundle ? {} : { context: { "aws:cdk:bundling-stacks": [] } }),
  });
  const stateful = new StatefulStack(app, STATEFUL_STACK);
  const service = new ServiceStack(app, SERVICE_STACK, {
    resourcesTable: stateful.resourcesTable,
    secretsKey: stateful.secretsKey,
    ...(options.routes ? { routes: options.routes } : {}),
    ...(options.npmRegistry ? { npmRegistry: options.npmRegistry } : {}),
  });
  return { app, stateful, service };
}

export function templateOf(stack: Stack): CfnTemplate {
  return Template.fromStack(stack).toJSON() as CfnTemplate;
}

/** What stands in for the resources {@link offlineTemplate} removes. */
export interface OfflineEndpoints {
  /** The HTTP API's `ApiEndpoint` (no trailing slash): the harness's gateway on 127.0.0.1. */
  apiEndpoint: string;
  /** A function URL's `FunctionUrl` (with its trailing slash, as Lambda gives it). */
  functionUrl: string;
  /** moto's endpoint: queue URLs point there (see {@link offlineTemplate}). */
  sqsEndpoint: string;
  /** Region and account moto answers with, for the ARNs of removed resources. */
  region: string;
  account: string;
}

/**
 * Resource types moto 5's CloudFormation cannot create, or (`AWS::S3::BucketPolicy`, the npm trees
 * bucket's SSL-only policy) creates but lists with an empty logical id; {@link offlineTemplate}
 * removes them. moto enforces no bucket policy either.
 */
export const NOT_IN_MOTO = [
  "AWS::ApiGatewayV2::Api",
  "AWS::ApiGatewayV2::Stage",
  "AWS::ApiGatewayV2::Integration",
  "AWS::ApiGatewayV2::Route",
  "AWS::Lambda::Url",
  "AWS::Lambda::EventInvokeConfig",
  "AWS::SQS::QueuePolicy",
  "AWS::S3::BucketPolicy",
  "AWS::Scheduler::ScheduleGroup",
] as const;

/**
 * The only changes made to a synthesized template before moto deploys it, each for something
 * moto 5 cannot create or evaluate (docs/aws.md, "The offline deployment test"):
 *
 * - the `BootstrapVersion` parameter and the `CheckBootstrapVersion` rule go: they read an SSM
 *   parameter of `cdk bootstrap`, and moto evaluates no rules;
 * - `AWS::DynamoDB::GlobalTable` (the resources table, `TableV2`) becomes an `AWS::DynamoDB::Table`
 *   with the same keys, indexes, stream, TTL and billing: moto's CloudFormation fails on global
 *   tables. Replicas, point-in-time recovery and deletion protection go with it;
 * - a queue without a `QueueName` gets one, its logical id (`.fifo` added for a FIFO queue:
 *   moto leaves the suffix out of the names it makes, and then refuses the queue), and its URL
 *   (`Ref`, `Fn::GetAtt QueueUrl`) points at moto: moto makes every queue's URL
 *   `https://sqs.<region>.amazonaws.com/...`, which the SQS client sends its calls to;
 * - a `Ref` to an `AWS::Events::EventBus` or an `AWS::Lambda::LayerVersion` becomes what it
 *   resolves to, the bus's name or the layer version's ARN (moto resolves both to an object, and
 *   then fails); a layer without a `LayerName` gets its logical id, so that the ARN is known
 *   (and the same name as a `LayerVersion` property, which is where moto reads a layer's name);
 * - the resources of {@link NOT_IN_MOTO} go, and every `Ref`, `Fn::GetAtt` and `DependsOn` naming
 *   one is replaced by what it would resolve to: the API's id and endpoint (the harness's gateway,
 *   which routes by the original template's routes and integrations), the function URL, the
 *   schedule group's name and ARN (the harness creates the group through moto's Scheduler API).
 *   Queue and bucket policies and async-invoke settings have no stand-in: moto enforces no policy
 *   and the harness's invoker makes no retries.
 *
 * Everything else (roles, policies, queues, bus, rule, functions, layer, mappings, permissions,
 * log groups, key) is deployed as synthesized.
 */
export function offlineTemplate(template: CfnTemplate, endpoints: OfflineEndpoints): CfnTemplate {
  const { Rules: _rules, ...rest } = structuredClone(template);
  const parameters = { ...rest.Parameters };
  delete parameters.BootstrapVersion;
  const removed = new Map(
    Object.entries(rest.Resources).filter(([, resource]) => (NOT_IN_MOTO as readonly string[]).includes(resource.Type)),
  );
  const standIn = (id: string, attribute?: string): unknown => {
    const resource = removed.get(id) as CfnResource;
    const name = resource.Properties?.Name;
    switch (`${resource.Type}.${attribute ?? "Ref"}`) {
      case "AWS::ApiGatewayV2::Api.Ref":
      case "AWS::ApiGatewayV2::Api.ApiId":
        return OFFLINE_API_ID;
      case "AWS::ApiGatewayV2::Api.ApiEndpoint":
        return endpoints.apiEndpoint;
      case "AWS::Lambda::Url.FunctionUrl":
        return endpoints.functionUrl;
      case "AWS::Scheduler::ScheduleGroup.Ref":
        return name;
      case "AWS::Scheduler::ScheduleGroup.Arn":
        return `arn:aws:scheduler:${endpoints.region}:${endpoints.account}:schedule-group/${name}`;
      default:
        throw new Error(`offlineTemplate: no stand-in for ${attribute ?? "Ref"} of ${resource.Type} ${id}`);
    }
  };
  const replace = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(replace);
    if (value === null || typeof value !== "object") return value;
    const object = value as Record<string, unknown>;
    if (typeof object.Ref === "string" && removed.has(object.Ref)) return standIn(object.Ref);
    const referred = typeof object.Ref === "string" ? rest.Resources[object.Ref] : undefined;
    if (referred?.Type === "AWS::Events::EventBus") return referred.Properties?.Name;
    if (referred?.Type === "AWS::SQS::Queue") return queueUrl(object.Ref as string, referred);
    if (referred?.Type === "AWS::Lambda::LayerVersion") {
      // The first version of a layer of that name: moto starts empty.
      return `arn:aws:lambda:${endpoints.region}:${endpoints.account}:layer:${layerNameOf(object.Ref as string, referred)}:1`;
    }
    const getAtt = object["Fn::GetAtt"];
    if (Array.isArray(getAtt)) {
      const [id, attribute] = getAtt as [string, string];
      if (removed.has(id)) return standIn(id, attribute);
      const queue = rest.Resources[id];
      if (queue?.Type === "AWS::SQS::Queue" && attribute === "QueueUrl") return queueUrl(id, queue);
    }
    return Object.fromEntries(Object.entries(object).map(([key, inner]) => [key, replace(inner)]));
  };
  const queueUrl = (id: string, queue: CfnResource) =>
    `${endpoints.sqsEndpoint}/${endpoints.account}/${queueNameOf(id, queue)}`;
  const resources: Record<string, CfnResource> = {};
  for (const [id, resource] of Object.entries(rest.Resources)) {
    if (removed.has(id)) continue;
    const kept = replace(motoCreatable(id, resource)) as CfnResource;
    const dependsOn = [kept.DependsOn ?? []].flat().filter((other) => !removed.has(other as string));
    if (kept.DependsOn !== undefined) kept.DependsOn = dependsOn;
    resources[id] = kept;
  }
  return {
    ...rest,
    Parameters: parameters,
    Resources: resources,
    Outputs: replace(rest.Outputs) as CfnTemplate["Outputs"],
  };
}

/** The id the HTTP API has offline (what its `Ref` resolves to). */
export const OFFLINE_API_ID = "offlineapi";

/** The resource itself, or what moto can create in its place (see {@link offlineTemplate}). */
function motoCreatable(id: string, resource: CfnResource): CfnResource {
  if (resource.Type === "AWS::DynamoDB::GlobalTable") return plainTable(resource);
  const properties = resource.Properties ?? {};
  if (resource.Type === "AWS::Lambda::LayerVersion") {
    // moto names a layer by a `LayerVersion` property (its name type), not by `LayerName`.
    const name = layerNameOf(id, resource);
    return { ...resource, Properties: { ...properties, LayerName: name, LayerVersion: name } };
  }
  if (resource.Type === "AWS::SQS::Queue") {
    return { ...resource, Properties: { ...properties, QueueName: queueNameOf(id, resource) } };
  }
  return resource;
}

const queueNameOf = (id: string, queue: CfnResource) =>
  (queue.Properties?.QueueName as string | undefined) ?? (queue.Properties?.FifoQueue === true ? `${id}.fifo` : id);

const layerNameOf = (id: string, layer: CfnResource) => (layer.Properties?.LayerName as string | undefined) ?? id;

/** A global table as the single-region table moto can create (see {@link offlineTemplate}). */
function plainTable(global: CfnResource): CfnResource {
  const properties = Object.fromEntries(
    PLAIN_TABLE_PROPERTIES.flatMap((name) => {
      const value = global.Properties?.[name];
      return value === undefined ? [] : [[name, value]];
    }),
  );
  return { ...global, Type: "AWS::DynamoDB::Table", Properties: properties };
}

/** What a global table and a table spell alike: name, keys, indexes, stream, TTL, billing. */
const PLAIN_TABLE_PROPERTIES = [
  "TableName",
  "KeySchema",
  "AttributeDefinitions",
  "GlobalSecondaryIndexes",
  "LocalSecondaryIndexes",
  "StreamSpecification",
  "TimeToLiveSpecification",
  "BillingMode",
];
