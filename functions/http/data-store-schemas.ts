import * as z from "zod";
import { ID_PREFIXES } from "#core/ids";
import { idParam } from "./schemas.ts";

export const dataStoreIdParams = z.object({ id: idParam(ID_PREFIXES.dataStore) });

export const dataStoreSchema = z.object({
  id: z.string(),
  name: z.string(),
  workspace_id: z.string(),
  created_at: z.string(),
});

export const dataStoreRecordSchema = z.object({
  key: z.string(),
  value: z.unknown(),
  expires_at: z.string().nullable(),
});
