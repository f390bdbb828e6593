import { describe, expect, it } from "vitest";
import { evaluatePropExpressions, PropExpressionError } from "#runtime/prop-expressions";

const steps = {
  trigger: { event: { body: { name: "Ada", n: 3, tags: ["a", "b"] }, headers: { authorization: "Bearer t" } } },
  parse: { $return_value: { ids: [1, 2] } },
};

describe("evaluatePropExpressions", () => {
  it("gives a whole-string expression's own value, of any type", () => {
    const props = {
      n: "{{steps.trigger.event.body.n}}",
      tags: "  {{ steps.trigger.event.body.tags }} ",
      ids: "{{steps.parse.$return_value.ids.map((id) => id * 10)}}",
      missing: "{{steps.trigger.event.body.nothing}}",
    };
    expect(evaluatePropExpressions(props, {}, steps)).toEqual({
      n: 3,
      tags: ["a", "b"],
      ids: [10, 20],
      missing: undefined,
    });
  });

  it("writes expressions inside text into it: objects as JSON, the rest as String", () => {
    const props = {
      greeting: "Hello {{steps.trigger.event.body.name}}, you have {{steps.trigger.event.body.n}} items",
      listed: "tags={{steps.trigger.event.body.tags}}",
      two: "{{steps.trigger.event.body.n}}{{steps.trigger.event.body.n}}",
    };
    expect(evaluatePropExpressions(props, {}, steps)).toEqual({
      greeting: "Hello Ada, you have 3 items",
      listed: 'tags=["a","b"]',
      two: "33",
    });
  });

  it("evaluates strings inside objects and arrays, keeping a __proto__ key as data", () => {
    const headers = JSON.parse(
      '{"Authorization": "{{steps.trigger.event.headers.authorization}}", "__proto__": "{{1 + 1}}"}',
    );
    const out = evaluatePropExpressions({ headers, list: ["x", "{{steps.trigger.event.body.name}}"] }, {}, steps);
    expect(out.headers).toEqual(JSON.parse('{"Authorization": "Bearer t", "__proto__": 2}'));
    expect(Object.getPrototypeOf(out.headers)).toBe(Object.prototype);
    expect(out.list).toEqual(["x", "Ada"]);
  });

  it("leaves props without expressions, and structured types, as they are (the same object when nothing changed)", () => {
    const props = { plain: "no braces {here}", n: 4, store: { name: "{{x}}" }, app: { authProvisionId: "{{y}}" } };
    const out = evaluatePropExpressions(props, { store: "data_store", app: "app" }, steps);
    expect(out).toBe(props);
  });

  it("fails with PropExpressionError naming the prop, for code that does not compile or throws", () => {
    expect(() => evaluatePropExpressions({ p: "{{steps.(}}" }, {}, steps)).toThrow(PropExpressionError);
    expect(() => evaluatePropExpressions({ p: "{{steps.(}}" }, {}, steps)).toThrow(
      /^the prop "p": \{\{steps\.\(\}\} is not a JavaScript expression/,
    );
    expect(() => evaluatePropExpressions({ q: "{{steps.nope.value}}" }, {}, steps)).toThrow(
      /^the prop "q": \{\{steps\.nope\.value\}\} failed: Cannot read properties of undefined/,
    );
  });
});
