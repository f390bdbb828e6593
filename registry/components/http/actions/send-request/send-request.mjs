export default {
  key: "http-send-request",
  name: "Send HTTP Request",
  description: "Send an HTTP request to any URL and return the response status and body.",
  version: "0.0.1",
  type: "action",
  props: {
    url: {
      type: "string",
      label: "URL",
      description: "The URL to send the request to, e.g. `https://example.com/api`",
    },
    method: {
      type: "string",
      label: "Method",
      description: "The HTTP method",
      options: ["GET", "POST", "PUT", "PATCH", "DELETE"],
      optional: true,
      default: "GET",
    },
    body: {
      type: "object",
      label: "Body",
      description: "A JSON body, sent with `Content-Type: application/json` (ignored for GET)",
      optional: true,
    },
  },
  methods: {
    async parseBody(response) {
      const text = await response.text();
      const contentType = response.headers.get("content-type") ?? "";
      if (contentType.includes("json")) {
        try {
          return JSON.parse(text);
        } catch {
          return text;
        }
      }
      return text;
    },
  },
  async run({ $ }) {
    const method = (this.method ?? "GET").toUpperCase();
    const hasBody = this.body !== undefined && method !== "GET";
    const response = await fetch(this.url, {
      method,
      headers: hasBody
        ? {
            "content-type": "application/json",
          }
        : {},
      body: hasBody ? JSON.stringify(this.body) : undefined,
    });
    const data = await this.parseBody(response);
    $.export("$summary", `${method} ${this.url} answered ${response.status}`);
    return {
      status: response.status,
      data,
    };
  },
};
