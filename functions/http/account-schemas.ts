/** Schemas of the connected-account routes this file's routes share (docs/accounts.md). */
import { z } from "zod";
import { ID_PREFIXES } from "#core/ids";
import { idParam } from "./schemas.ts";

export const accountIdParams = z.object({ id: idParam(ID_PREFIXES.account) });

/** An account's metadata (spec "Account"), without credentials. */
export const accountMetadataSchema = z.object({
  id: z.string(),
  name: z.string(),
  app: z.object({ id: z.string(), name: z.string() }),
  created_at: z.string(),
  updated_at: z.string(),
  healthy: z.boolean(),
});
