// Types of `taskwire/client`: the browser client and the mirror, the part
// of the package a web page loads (see index.d.ts for every type).
export { TaskClient, TaskMirror, TaskwireError, init, initSync, default } from "./index.js";
export type * from "./index.js";
