export default {
  key: "http-new-requests",
  name: "New Requests",
  description:
    "Get a URL and emit the full HTTP event on every request (including headers and query parameters). You can also configure the HTTP response code and body.",
  version: "0.0.2",
  type: "source",
  props: {
    http: {
      type: "$.interface.http",
      customResponse: true,
    },
    // The public registry's names (resStatusCode, resContentType, resBody) and Sluice's first ones
    // (responseStatus, responseBody) are both taken, so configurations written for either work.
    resStatusCode: {
      type: "string",
      label: "Response Status Code",
      description: "The status code to return in the HTTP response (default 200)",
      optional: true,
    },
    resContentType: {
      type: "string",
      label: "Response Content-Type",
      description: "The `Content-Type` of the body returned in the HTTP response",
      optional: true,
    },
    resBody: {
      type: "string",
      label: "Response Body",
      description: 'The body to return in the HTTP response (default `{ "success": true }`)',
      optional: true,
    },
    responseStatus: {
      type: "string",
      label: "Response Status Code",
      description: "The status code to return in the HTTP response",
      optional: true,
      default: "200",
    },
    responseBody: {
      type: "string",
      label: "Response Body",
      description: 'The body to return in the HTTP response. Defaults to `{ "success": true }`.',
      optional: true,
    },
    emitBodyOnly: {
      type: "boolean",
      label: "Body Only",
      description:
        "This source emits an event representing the full HTTP request by default. Select `true` to emit the body only.",
      optional: true,
      default: false,
    },
  },
  methods: {
    summary(event) {
      return `${event.method} ${event.path}`;
    },
  },
  async run(event) {
    this.http.respond({
      status: this.resStatusCode ?? this.responseStatus ?? 200,
      body: this.resBody ??
        this.responseBody ?? {
          success: true,
        },
      ...(this.resContentType
        ? {
            headers: {
              "content-type": this.resContentType,
            },
          }
        : {}),
    });

    this.$emit(this.emitBodyOnly ? event.body : event, {
      summary: this.summary(event),
      ts: Date.now(),
    });
  },
};
