// The example's dev server: it serves the page and passes /v1 on to a
// taskwire-server, adding the tenant token there, so the page holds no
// credential (a real page gets browser tokens from its backend:
// PROTOCOL.md, "Credentials").
import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";

const token = process.env.TASKWIRE_TOKEN;
if (!token) throw new Error("set TASKWIRE_TOKEN to a --token of the server (see examples/react/README.md)");
const dist = (file) => fileURLToPath(new URL(`../../dist/${file}`, import.meta.url));

export default {
  plugins: [react()],
  // In this repository the package is its own build (`npm run build`);
  // an app that installed `taskwire` drops these two lines.
  resolve: { alias: { "taskwire/client": dist("client/index.js"), "taskwire/react": dist("react.js") } },
  // The wasm's `await init()` at the top of main.jsx needs es2022.
  build: { target: "es2022" },
  server: {
    proxy: {
      "/v1": { target: process.env.TASKWIRE_URL ?? "http://127.0.0.1:8080", headers: { authorization: `Bearer ${token}` } },
    },
  },
};
