// A Map-backed `localStorage`, installed on globalThis, for the client's
// `persist: true` in Node (which has none). Returns the Map, so a test can
// read or change what the client persisted.
export function installStorage() {
  const data = new Map();
  globalThis.localStorage = {
    getItem: (k) => (data.has(k) ? data.get(k) : null),
    setItem: (k, v) => data.set(k, String(v)),
    removeItem: (k) => data.delete(k),
  };
  return data;
}
