// Loaded by ./follow.js only after a watch's request failed outright (no
// response at all): tells a CORS refusal from an outage, which look the
// same to a page ("Failed to fetch"). Issue 29: a first user's CORS
// mistake read as an endless `reconnecting`.
//
// Two requests to the same path, without its query (so never a held
// long-poll; the server answers at once, a 400 or a 401):
// - with CORS: if it gets an answer, the server allows this page's origin
//   and the failure was something else (a cut connection);
// - without (`no-cors`, an opaque answer the page cannot read): if this
//   one gets an answer and the first did not, the server is up and
//   refuses this origin: that is CORS.
// It imports nothing, so that nothing of the page's chunk moves into it.

/** `message`, or a CORS explanation in front of it when the probes say so. */
export async function explain(url, message) {
  const page = globalThis.location?.origin;
  let path, server;
  try {
    path = String(url).split("?")[0];
    server = new URL(path).origin;
  } catch {
    return message;
  }
  if (!page || page === server) return message;
  const probe = (mode) => globalThis.fetch(path, { mode, cache: "no-store" });
  try {
    await probe("cors");
    return message;
  } catch {
    // refused here as well: CORS, or the server is down
  }
  try {
    await probe("no-cors");
  } catch {
    return message;
  }
  return `CORS: ${server} answers, but not to this page's origin ${page}: allow it there (Access-Control-Allow-Origin; taskwire-server --cors-origin ${page}). ${message}`;
}
