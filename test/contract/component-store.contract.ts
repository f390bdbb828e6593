import { describe, expect, it } from "vitest";
import type { ComponentRecord } from "#core/component-model";
import { formatId } from "#core/ids";
import type { ComponentStore } from "#core/ports/component-store";
import { sha256Hex } from "#core/sha256";

let sequence = 0;
/** Distinct component ids that sort by creation, without randomness. */
function nextComponentId(): string {
  sequence += 1;
  return formatId("component", 1_790_000_000_000 + sequence, new Uint8Array(12).fill(sequence % 256));
}

function component(overrides: Partial<ComponentRecord> = {}): ComponentRecord {
  const code =
    overrides.code ??
    `export default { name: "Tick", version: "0.0.1", async run() { this.$emit({ n: ${sequence} }); } };`;
  return {
    id: nextComponentId(),
    ownerId: "u_owner",
    key: "tick",
    name: "Tick",
    version: "0.0.1",
    code,
    codeHash: sha256Hex(code),
    componentUrl: "https://example.com/tick.mjs",
    metadata: {
      key: "tick",
      name: "Tick",
      version: "0.0.1",
      type: "source",
      hooks: ["deploy"],
      methods: ["helper"],
      hasRun: true,
      hasAdditionalProps: false,
      props: [{ name: "timer", type: "$.interface.timer" }],
    },
    createdAt: 1_790_000_000_000,
    updatedAt: 1_790_000_000_001,
    ...overrides,
  };
}

/** JavaScript-like text of about `bytes` bytes: repetitive the way real bundles are, so it compresses. */
function largeCode(bytes: number): string {
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const line = `export const handler${i} = async (event) => ({ statusCode: ${200 + (i % 7)}, body: JSON.stringify({ id: "${i.toString(36)}", event }) });\n`;
    lines.push(line);
    size += line.length;
  }
  return lines.join("");
}

/** Behaviour every `ComponentStore` adapter must have. `makeStore` returns an empty store. */
export function componentStoreContract(makeStore: () => Promise<ComponentStore>) {
  describe("ComponentStore", () => {
    it("reads back a saved component exactly as written", async () => {
      const store = await makeStore();
      const saved = component();
      await store.putComponent(saved);
      expect(await store.getComponent(saved.id)).toStrictEqual(saved);
    });

    it("reads back a component without key or URL without inventing those fields", async () => {
      const store = await makeStore();
      const { key: _key, componentUrl: _url, ...rest } = component();
      const saved: ComponentRecord = rest;
      await store.putComponent(saved);
      expect(await store.getComponent(saved.id)).toStrictEqual(saved);
    });

    it("refuses a second component with the same id as a conflict and keeps the first", async () => {
      const store = await makeStore();
      const first = component();
      await store.putComponent(first);
      await expect(store.putComponent({ ...first, name: "Other" })).rejects.toMatchObject({ code: "conflict" });
      expect(await store.getComponent(first.id)).toStrictEqual(first);
    });

    it("finds the newest component of an owner by key, and none of another owner's", async () => {
      const store = await makeStore();
      const older = component({ version: "0.0.1" });
      const newer = component({ version: "0.0.2" });
      const othersNewest = component({ ownerId: "u_other" });
      const otherKey = component({ key: "tock" });
      // Saved out of order: "newest" is by id, not by the order of the writes.
      await store.putComponent(newer);
      await store.putComponent(older);
      await store.putComponent(othersNewest);
      await store.putComponent(otherKey);

      expect(await store.findComponentByKey("u_owner", "tick")).toStrictEqual(newer);
      expect(await store.findComponentByKey("u_other", "tick")).toStrictEqual(othersNewest);
      expect(await store.findComponentByKey("u_owner", "tock")).toStrictEqual(otherKey);
      expect(await store.findComponentByKey("u_nobody", "tick")).toBeUndefined();
      expect(await store.findComponentByKey("u_owner", "missing")).toBeUndefined();
    });

    it("answers undefined for an unknown id", async () => {
      const store = await makeStore();
      expect(await store.getComponent(nextComponentId())).toBeUndefined();
    });

    it("stores code as large as the API's body limit allows, byte for byte", async () => {
      const store = await makeStore();
      const code = `${largeCode(1000 * 1024)}// héllo ✓ 🌊\n`;
      const saved = component({ code, codeHash: sha256Hex(code) });
      await store.putComponent(saved);
      const read = await store.getComponent(saved.id);
      expect(read?.code.length).toBe(code.length);
      expect(read?.code === code).toBe(true);
    });
  });
}
