import { describe, expect, it } from "vitest";
import { evaluatePropExpressions, PropExpressionError } from "#runtime/prop-expressions";
import { findPropExpression, holdsPropExpression } from "#runtime/protocol";

const steps = {
  trigger: { event: { body: { name: "Ada", n: 3, tags: ["a", "b"] }, headers: { authorization: "Bearer t" } } },
  parse: { $return_value: { ids: [1, 2] } },
};

const all = (props: Record<string, unknown>) => evaluatePropExpressions(props, Object.keys(props), steps);

describe("findPropExpression and holdsPropExpression", () => {
  it("find the first {{ ... }} at or after a position, its text at least one character", () => {
    expect(findPropExpression("a {{x}} b {{y}}")).toEqual({ start: 2, end: 7 });
    expect(findPropExpression("a {{x}} b {{y}}", 7)).toEqual({ start: 10, end: 15 });
    expect(findPropExpression("{{}}")).toBeUndefined();
    expect(findPropExpression("{{}}}")).toEqual({ start: 0, end: 5 });
    expect(findPropExpression("no braces {here} }} {{")).toBeUndefined();
  });

  it("read a text of a million { without a }} once: none found", () => {
    expect(findPropExpression("{".repeat(1_000_000))).toBeUndefined();
    expect(holdsPropExpression({ a: ["x", { b: "{{1}}" }] })).toBe(true);
    expect(holdsPropExpression({ a: ["x", { b: "{1}" }], n: 2 })).toBe(false);
  });
});

describe("evaluatePropExpressions", () => {
  it("gives a whole-string expression's own value, of any type, a promise awaited", async () => {
    expect(
      await all({
        n: "{{steps.trigger.event.body.n}}",
        tags: "  {{ steps.trigger.event.body.tags }} ",
        ids: "{{steps.parse.$return_value.ids.map((id) => id * 10)}}",
        missing: "{{steps.trigger.event.body.nothing}}",
        later: "{{Promise.resolve(steps.trigger.event.body.name)}}",
      }),
    ).toEqual({ n: 3, tags: ["a", "b"], ids: [10, 20], missing: undefined, later: "Ada" });
  });

  it("writes expressions inside text into it: objects as JSON, the rest as String", async () => {
    expect(
      await all({
        greeting: "Hello {{steps.trigger.event.body.name}}, you have {{steps.trigger.event.body.n}} items",
        listed: "tags={{steps.trigger.event.body.tags}}",
        two: "{{steps.trigger.event.body.n}}{{steps.trigger.event.body.n}}",
      }),
    ).toEqual({ greeting: "Hello Ada, you have 3 items", listed: 'tags=["a","b"]', two: "33" });
  });

  it("evaluates strings inside objects and arrays, keeping a __proto__ key as data", async () => {
    const headers = JSON.parse(
      '{"Authorization": "{{steps.trigger.event.headers.authorization}}", "__proto__": "{{1 + 1}}"}',
    );
    const out = await all({ headers, list: ["x", "{{steps.trigger.event.body.name}}"] });
    expect(out.headers).toEqual(JSON.parse('{"Authorization": "Bearer t", "__proto__": 2}'));
    expect(Object.getPrototypeOf(out.headers)).toBe(Object.prototype);
    expect(out.list).toEqual(["x", "Ada"]);
  });

  it("evaluates only the props it is told to (never a secret's or a static's: trusted code names them)", async () => {
    const props = { secret: "pw{{Hunter2}}!", plain: "{{1 + 1}}" };
    expect(await evaluatePropExpressions(props, ["plain"], steps)).toEqual({ secret: "pw{{Hunter2}}!", plain: 2 });
    expect(await evaluatePropExpressions(props, undefined, steps)).toBe(props);
  });

  it("fails with PropExpressionError naming the prop: code that does not compile, throws, rejects or cannot be written", async () => {
    await expect(all({ p: "{{steps.(}}" })).rejects.toThrow(PropExpressionError);
    await expect(all({ p: "{{steps.(}}" })).rejects.toThrow(
      /^the prop "p": \{\{steps\.\(\}\} is not a JavaScript expression/,
    );
    await expect(all({ q: "{{steps.nope.value}}" })).rejects.toThrow(
      /^the prop "q": \{\{steps\.nope\.value\}\} failed: Cannot read properties of undefined/,
    );
    await expect(all({ r: "a {{Promise.reject(new Error('later'))}}" })).rejects.toThrow(/failed: later$/);
    await expect(all({ s: "x {{(() => { const a = {}; a.a = a; return a; })()}}" })).rejects.toThrow(
      /gave a value that cannot be written as text/,
    );
    await expect(all({ t: "{{(() => { throw Object.create(null); })()}}" })).rejects.toThrow(
      /failed: a value that cannot be shown$/,
    );
  });

  it("fails an expression that reads process.env, which Sluice does not have, rather than giving undefined", async () => {
    await expect(all({ token: "{{process.env.TOKEN}}" })).rejects.toThrow(
      'the prop "token": {{process.env.TOKEN}} failed: process.env.TOKEN is not set: Sluice has no environment variables for workflows',
    );
    expect(await all({ names: "{{Object.keys(process.env).length}}" })).toEqual({ names: 0 });
  });
});
