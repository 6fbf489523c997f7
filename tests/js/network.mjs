// A stand-in for the browser's network signals in Node, for the client
// tests that drive `online`/`offline`: `navigator.onLine` and window-like
// online/offline events on `globalThis`.

/** Installs them, `online` at first; `set` changes the reading and fires its event. */
export function installNetwork(online) {
  const target = new EventTarget();
  const nav = { onLine: online };
  Object.defineProperty(globalThis, "navigator", { value: nav, configurable: true, writable: true });
  globalThis.addEventListener = target.addEventListener.bind(target);
  globalThis.removeEventListener = target.removeEventListener.bind(target);
  return {
    nav,
    set(value) {
      nav.onLine = value;
      target.dispatchEvent(new Event(value ? "online" : "offline"));
    },
    uninstall() {
      delete globalThis.addEventListener;
      delete globalThis.removeEventListener;
      nav.onLine = true;
    },
  };
}
