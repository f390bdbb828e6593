/**
 * Largest JSON request body of the REST API. Component code is the largest thing clients send;
 * 1 MiB leaves room for big single-file components and stays far below the 6 MB Lambda payload.
 */
export const MAX_JSON_BODY_BYTES = 1024 * 1024;
