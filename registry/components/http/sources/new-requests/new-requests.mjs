export default {
  key: "http-new-requests",
  name: "New Requests",
  description:
    "Get a URL and emit the full HTTP event on every request (including headers and query parameters). You can also configure the HTTP response code, body, and more.",
  version: "0.1.0",
  type: "source",
  props: {
    http: {
      type: "$.interface.http",
      customResponse: true,
    },
    emitBodyOnly: {
      type: "boolean",
      label: "Body Only",
      description:
        "This source emits an event representing the full HTTP request by default. Select `true` to emit the body only.",
      optional: true,
      default: false,
    },
    // The public registry's props, with its defaults: the status as a numeric string, the body as
    // text, and the Content-Type of the answer.
    resStatusCode: {
      type: "string",
      label: "Response Status Code",
      description: "The status code to return in the HTTP response",
      optional: true,
      default: "200",
    },
    resContentType: {
      type: "string",
      label: "Response Content-Type",
      description: "The `Content-Type` of the body returned in the HTTP response",
      optional: true,
      default: "application/json",
    },
    resBody: {
      type: "string",
      label: "Response Body",
      description: "The body to return in the HTTP response",
      optional: true,
      default: '{ "success": true }',
    },
    // Sluice's earlier names for the status and the body: when set, they win over the ones above.
    responseStatus: {
      type: "string",
      label: "Response Status Code (earlier name)",
      description: "Same as Response Status Code; kept for sources deployed before it existed",
      optional: true,
    },
    responseBody: {
      type: "string",
      label: "Response Body (earlier name)",
      description: "Same as Response Body; kept for sources deployed before it existed",
      optional: true,
    },
  },
  async run(event) {
    const summary = `${event.method} ${event.path}`;

    this.http.respond({
      status: this.responseStatus ?? this.resStatusCode,
      body: this.responseBody ?? this.resBody,
      headers: {
        "content-type": this.resContentType,
      },
    });

    this.$emit(this.emitBodyOnly ? event.body : event, {
      summary,
      ts: Date.now(),
    });
  },
};
