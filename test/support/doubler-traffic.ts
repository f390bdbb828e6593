/**
 * A healthy source for fault tests: its custom response doubles a number. `keepRequesting` keeps
 * POSTing to it and checks every answer, so a test sees whether other tenants' trouble reached it.
 */

/** The component: answers `{n, doubled}` for a body `{n}`. */
export const HEALTHY_SOURCE = `
export default {
  name: "Doubler",
  version: "1.0.0",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    this.http.respond({ status: 200, body: { n: event.body.n, doubled: event.body.n * 2 } });
  },
};
`;

/** POSTs `{n}` to the Doubler's endpoint once and returns the parsed answer. */
export async function askDoubler(endpoint: string, n: number): Promise<unknown> {
  const response = await fetch(endpoint, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ n }),
  });
  return response.json();
}

export interface Traffic {
  /** Healthy requests answered so far, and those whose answer was wrong (with what came back). */
  answered: number;
  wrong: string[];
  stop(): Promise<void>;
}

/** `concurrency` loops of POSTs `{n}` to the endpoint, each checking its own doubled answer. */
export function keepRequesting(endpoint: string, concurrency: number): Traffic {
  let running = true;
  let next = 0;
  const traffic: Traffic = { answered: 0, wrong: [], stop: async () => {} };
  const loop = async () => {
    while (running) {
      const n = next++;
      try {
        const response = await fetch(endpoint, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ n }),
        });
        const text = await response.text();
        if (response.status !== 200 || text !== JSON.stringify({ n, doubled: n * 2 })) {
          traffic.wrong.push(`${n}: ${response.status} ${text}`);
        }
      } catch (error) {
        traffic.wrong.push(`${n}: ${String(error)}`);
      }
      traffic.answered += 1;
    }
  };
  const loops = Array.from({ length: concurrency }, loop);
  traffic.stop = async () => {
    running = false;
    await Promise.all(loops);
  };
  return traffic;
}
