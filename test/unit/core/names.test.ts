import { describe, expect, it } from "vitest";
import { createAccount } from "#core/accounts";
import { createComponent } from "#core/components";
import { deploySource, updateSource } from "#core/sources";
import { createSubscription } from "#core/subscriptions";
import { createWebhook } from "#core/webhooks";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";
import { rejection } from "../../support/rejection.ts";

/** NUL and every Unicode bidirectional control character (issue 12, "Smaller"). */
const FORBIDDEN = [
  "\u0000",
  "\u061c",
  "\u200e",
  "\u200f",
  "\u202a",
  "\u202b",
  "\u202c",
  "\u202d",
  "\u202e",
  "\u2066",
  "\u2067",
  "\u2068",
  "\u2069",
];

async function setUp(componentName = "Plain") {
  const { host } = scriptedHost({ name: componentName });
  const deps = memoryDeps(Date.UTC(2026, 10, 20, 12), {
    host,
    timers: { schedule: async () => {}, cancel: async () => {} },
  });
  const account = await accountIn(deps, "namer");
  return { deps, caller: { userId: account.user.id } };
}

const hex = (character: string) => (character.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0");

describe("names refuse NUL and bidirectional control characters with a 400 naming the field", () => {
  it.each(FORBIDDEN.map((character) => [hex(character), character]))("U+%s", async (_code, character) => {
    const { deps, caller } = await setUp();
    const name = `invoice${character}gpj.exe`;
    const source = await deploySource(deps, caller, { component_code: "code", name: "fine" });
    const webhook = await createWebhook(deps, caller, { url: "http://127.0.0.1:9000/" });
    const attempts: [string, Promise<unknown>][] = [
      ["name", deploySource(deps, caller, { component_code: "code", name })],
      ["name", updateSource(deps, caller, source.id, { name })],
      ["name", createWebhook(deps, caller, { url: "http://127.0.0.1:9000/", name })],
      ["description", createWebhook(deps, caller, { url: "http://127.0.0.1:9000/", description: name })],
      [
        "event_name",
        createSubscription(deps, caller, { emitter_id: source.id, listener_id: webhook.id, event_name: name }),
      ],
      ["email", createAccount(deps, { username: "other", email: `a${character}@example.com` })],
    ];
    for (const [field, attempt] of attempts) {
      const error = await rejection(attempt);
      expect([field, error.code, error.issues]).toEqual([
        field,
        "validation",
        [{ field, message: expect.stringContaining(`U+${hex(character)}`) }],
      ]);
    }
    expect((await deps.sources.getSource(source.id))?.name).toBe("fine");
  });

  it("refuses a component whose name carries one, naming component_code", async () => {
    const { deps, caller } = await setUp("Orders\u202e");
    const error = await rejection(createComponent(deps, caller, { component_code: "code" }));
    expect(error.issues).toEqual([
      { field: "component_code", message: expect.stringContaining("the component's name must not contain") },
    ]);
  });

  it("keeps names in any script, with emoji and combining marks", async () => {
    const { deps, caller } = await setUp();
    for (const name of ["Café ☕", "שלום עולם", "مرحبا", "e\u0301", "👩‍👩‍👧‍👦", "zero\u200bwidth"]) {
      expect((await deploySource(deps, caller, { component_code: "code", name })).name).toBe(name);
    }
  });
});
