/**
 * Ids as the API writes them: a prefix (`dc_`, `p_`, `wh_`, `sub_`, `ds_`) then 1 to 64 letters,
 * digits, `_` or `-`. The commands put an id into a request's path, so anything else is refused
 * before a request is made: `wh_x/../../sources/dc_...` would reach another route.
 */
const ID_BODY = /^[A-Za-z0-9_-]{1,64}$/;

/** Whether `id` is an id of `prefix` (`"dc_"`). */
export function isIdOf(id: string, prefix: string): boolean {
  return id.startsWith(prefix) && ID_BODY.test(id.slice(prefix.length));
}
