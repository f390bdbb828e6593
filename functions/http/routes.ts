import { route as clearDataStore } from "./clear-data-store.ts";
import { route as configureComponentProp } from "./configure-component-prop.ts";
import { route as connectAccount } from "./connect-account.ts";
import { route as connectConfigureComponentProp } from "./connect-configure-component-prop.ts";
import { route as connectGetComponent } from "./connect-get-component.ts";
import { route as connectReloadComponentProps } from "./connect-reload-component-props.ts";
import { route as connectRunAction } from "./connect-run-action.ts";
import { route as createAccount } from "./create-account.ts";
import { route as createAutoSubscription } from "./create-auto-subscription.ts";
import { route as createComponent } from "./create-component.ts";
import { route as createSource } from "./create-source.ts";
import { route as createSubscription } from "./create-subscription.ts";
import { route as createWebhook } from "./create-webhook.ts";
import { route as createWorkflow } from "./create-workflow.ts";
import { route as deleteAccount } from "./delete-account.ts";
import { route as deleteDataStore } from "./delete-data-store.ts";
import { route as deleteSource } from "./delete-source.ts";
import { route as deleteSourceEvents } from "./delete-source-events.ts";
import { route as deleteSubscription } from "./delete-subscription.ts";
import { route as deleteWebhook } from "./delete-webhook.ts";
import { route as deleteWorkflow } from "./delete-workflow.ts";
import { route as finishAccountConnect } from "./finish-account-connect.ts";
import { route as getAccount } from "./get-account.ts";
import { route as getApp } from "./get-app.ts";
import { route as getComponent } from "./get-component.ts";
import { route as getMe } from "./get-me.ts";
import { route as getOpenApi } from "./get-openapi.ts";
import { route as getRegistryComponent } from "./get-registry-component.ts";
import { route as getSource } from "./get-source.ts";
import { route as getWebhook } from "./get-webhook.ts";
import { route as getWorkflow } from "./get-workflow.ts";
import { route as getWorkspace } from "./get-workspace.ts";
import { route as listApps } from "./list-apps.ts";
import { route as listDataStoreRecords } from "./list-data-store-records.ts";
import { route as listDeadLetters } from "./list-dead-letters.ts";
import { route as listSourceEvents } from "./list-source-events.ts";
import { route as listUserAccounts } from "./list-user-accounts.ts";
import { route as listUserSources } from "./list-user-sources.ts";
import { route as listUserSubscriptions } from "./list-user-subscriptions.ts";
import { route as listUserWebhooks } from "./list-user-webhooks.ts";
import { route as listUserWorkflows } from "./list-user-workflows.ts";
import { route as listWorkflowDeadLetters } from "./list-workflow-dead-letters.ts";
import { route as listWorkflowErrors } from "./list-workflow-errors.ts";
import { route as listWorkflowEvents } from "./list-workflow-events.ts";
import { route as listWorkflowRuns } from "./list-workflow-runs.ts";
import { route as listWorkspaceAccounts } from "./list-workspace-accounts.ts";
import { route as listWorkspaceDataStores } from "./list-workspace-data-stores.ts";
import { route as listWorkspaceProjects } from "./list-workspace-projects.ts";
import { route as listWorkspaceSources } from "./list-workspace-sources.ts";
import { route as listWorkspaceSubscriptions } from "./list-workspace-subscriptions.ts";
import { route as listWorkspaceWorkflows } from "./list-workspace-workflows.ts";
import { route as reloadComponentProps } from "./reload-component-props.ts";
import { route as replayDeadLetter } from "./replay-dead-letter.ts";
import { route as replayDeadLetters } from "./replay-dead-letters.ts";
import { route as replayWorkflowDeadLetter } from "./replay-workflow-dead-letter.ts";
import { route as replayWorkflowDeadLetters } from "./replay-workflow-dead-letters.ts";
import { route as rotateWebhookSecret } from "./rotate-webhook-secret.ts";
import type { AnyRoute } from "./route.ts";
import { route as serveDataStoreCall } from "./serve-data-store-call.ts";
import { route as testAccount } from "./test-account.ts";
import { route as updateAccount } from "./update-account.ts";
import { route as updateSource } from "./update-source.ts";
import { route as updateWorkflow } from "./update-workflow.ts";

/**
 * The route manifest: every REST endpoint. Local mode serves these, the service stack makes one
 * Lambda and one API Gateway route of each, and the OpenAPI document lists them.
 */
export const routes: readonly AnyRoute[] = [
  getMe,
  getWorkspace,
  listWorkspaceProjects,
  createComponent,
  getComponent,
  getRegistryComponent,
  configureComponentProp,
  reloadComponentProps,
  connectConfigureComponentProp,
  connectReloadComponentProps,
  connectRunAction,
  connectGetComponent,
  createSource,
  updateSource,
  deleteSource,
  getSource,
  listUserSources,
  listWorkspaceSources,
  listSourceEvents,
  deleteSourceEvents,
  createWebhook,
  listUserWebhooks,
  getWebhook,
  rotateWebhookSecret,
  deleteWebhook,
  createSubscription,
  deleteSubscription,
  listUserSubscriptions,
  listWorkspaceSubscriptions,
  createAutoSubscription,
  createWorkflow,
  getWorkflow,
  updateWorkflow,
  deleteWorkflow,
  listUserWorkflows,
  listWorkspaceWorkflows,
  listWorkflowEvents,
  listWorkflowErrors,
  listDeadLetters,
  replayDeadLetter,
  replayDeadLetters,
  getOpenApi,
  listWorkflowRuns,
  listWorkflowDeadLetters,
  replayWorkflowDeadLetter,
  replayWorkflowDeadLetters,
  listWorkspaceDataStores,
  listDataStoreRecords,
  clearDataStore,
  deleteDataStore,
  serveDataStoreCall,
  listApps,
  getApp,
  createAccount,
  getAccount,
  updateAccount,
  deleteAccount,
  listWorkspaceAccounts,
  listUserAccounts,
  connectAccount,
  finishAccountConnect,
  testAccount,
];
