// A token function's handling (TaskClient's `token` option), loaded on
// demand by ./client.js: only a page whose client has a token function
// loads it (a token string is just a header), so that tokens per scope
// (issue 29) fit the page's 40 KB budget. It imports nothing: what it
// shared with the page's chunk would be split off into a chunk of its own.

/** The most scopes whose tokens are kept for the next watch or POST. */
export const MAX_KEPT = 100;

/** `init` with `Authorization: Bearer <token>` added. */
function withBearer(init, token) {
  return { ...init, headers: { ...init?.headers, authorization: `Bearer ${token}` } };
}

/** Whether a 401 says the token expired (the one refusal a fresh token cures). */
async function isExpired(response) {
  try {
    return (await response.clone().json())?.error?.code === "token-expired";
  } catch {
    return false;
  }
}

/**
 * The client's `fetch` for a scope, with the `token` option's credential:
 * `(scope) => fetch`. A token function is asked for the first token of a
 * scope, and again when the server answers 401 `token-expired`: then the
 * request is sent once more with the fresh token, so the watch goes on.
 * Requests that expire together share one ask; a second 401 reaches the
 * loop, which stops the watch. A failing or non-string ask fails the
 * request like a network error (the loop retries with backoff).
 *
 * A function that declares a parameter is asked per scope (`{tasks:
 * [id]}` for a task's watch and POSTs, `{batch: id}` for a batch's
 * watch, `{}` for creates), and its tokens are kept per scope: one client
 * then follows tasks that were each authorised alone, and an expiry
 * refreshes that scope only (issue 29). One that declares none keeps
 * one token for everything, as before scopes existed. Here, not in
 * Rust: the page pays a few hundred bytes of JS for it, no wasm.
 * `refuse(value)` is the error for a token that is not a non-empty string.
 */
export function bearer(inner, source, refuse) {
  const send = inner ?? ((url, init) => globalThis.fetch(url, init));
  // Scope → its token, the most recently used last. A page that follows
  // task after task for hours would otherwise keep every token it was
  // ever given: past MAX_KEPT scopes the least recently used is dropped
  // (a watch still running keeps its own; a new watch of that scope asks
  // again).
  const kept = new Map();
  return (scope) => {
    const key = source.length ? JSON.stringify(scope) : "";
    const held = kept.get(key) ?? {}; // current: the promise of the token in use; replaced: the token the latest ask replaces
    kept.delete(key);
    kept.set(key, held);
    if (kept.size > MAX_KEPT) kept.delete(kept.keys().next().value);
    const ask = () => {
      const asked = Promise.resolve(scope)
        .then(source)
        .then((token) => {
          if (typeof token !== "string" || token === "") throw refuse(token);
          return token;
        });
      held.current = asked;
      // A failed ask is asked again by the next request.
      asked.catch(() => held.current === asked && (held.current = undefined));
      return asked;
    };
    return async (url, init) => {
      const token = await (held.current ?? ask());
      const response = await send(url, withBearer(init, token));
      if (response.status !== 401 || !(await isExpired(response))) return response;
      if (held.replaced !== token || held.current === undefined) {
        held.replaced = token;
        ask();
      }
      return send(url, withBearer(init, await held.current));
    };
  };
}
