/**
 * Finds the deployed API's URL and the resources table of a stage from what the stack gave its
 * functions (`SLUICE_PUBLIC_URL`, `SLUICE_RESOURCES_TABLE`), through the Lambda API, a client
 * Sluice already depends on (the stacks' outputs would need CloudFormation's).
 */
import { LambdaClient, paginateListFunctions } from "@aws-sdk/client-lambda";
import { ENV } from "#config/env";

export interface Deployment {
  /** The REST API's base URL, ending in `/v1` (the `ApiUrl` output). */
  readonly apiUrl: string;
  /** The resources table (the `ResourcesTableName` output). */
  readonly table: string;
}

/** What {@link deploymentOf} reads of a function (a `ListFunctions` entry). */
export interface ListedFunction {
  readonly FunctionName?: string;
  readonly Environment?: { readonly Variables?: Record<string, string> };
}

/**
 * The deployment of `serviceStack` from its functions: CloudFormation names them
 * `<stack>-<logical id>-<suffix>`, and every route with table access carries both settings.
 */
export function deploymentOf(functions: readonly ListedFunction[], serviceStack: string): Deployment {
  const own = functions.filter((fn) => fn.FunctionName?.startsWith(`${serviceStack}-`));
  const values = (name: string) =>
    new Set(own.flatMap((fn) => fn.Environment?.Variables?.[name] ?? []).filter((value) => value !== ""));
  const urls = values(ENV.publicUrl);
  const tables = values(ENV.resourcesTable);
  if (own.length === 0) {
    throw new Error(`no function of the stack ${serviceStack} in this account and region: is it deployed here?`);
  }
  if (urls.size !== 1 || tables.size !== 1) {
    throw new Error(
      `the functions of ${serviceStack} name ${urls.size} API URLs and ${tables.size} tables, not one each: ${JSON.stringify({ urls: [...urls], tables: [...tables] })}`,
    );
  }
  return { apiUrl: `${[...urls][0]?.replace(/\/$/, "")}/v1`, table: [...tables][0] ?? "" };
}

/** The deployment of `serviceStack` in the account and region of the SDK's configuration. */
export async function findDeployment(serviceStack: string, region: string | undefined): Promise<Deployment> {
  const functions: ListedFunction[] = [];
  for await (const page of paginateListFunctions({ client: new LambdaClient({ region }) }, {})) {
    functions.push(...(page.Functions ?? []));
  }
  return deploymentOf(functions, serviceStack);
}
