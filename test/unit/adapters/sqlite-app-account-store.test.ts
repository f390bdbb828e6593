import { describe } from "vitest";
import { SqliteAppAccountStore } from "#adapters/local/sqlite-app-account-store";
import { openSqlite } from "#adapters/local/sqlite-database";
import { appAccountStoreContract } from "../../contract/app-account-store.contract.ts";

// The contract's DynamoDB run is test/contract/app-account-stores.test.ts (it needs DynamoDB Local).
describe("SqliteAppAccountStore", () => {
  appAccountStoreContract(async () => new SqliteAppAccountStore(openSqlite(":memory:")));
});
