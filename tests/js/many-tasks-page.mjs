// What the HTTP/2 page test and its benchmark (bench/many-tasks.mjs)
// share: a page whose one TaskClient follows many separate tasks and
// records what it hears, and a throwaway certificate Chromium trusts.
import { execFileSync } from "node:child_process";
import { createHash, X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * The page: `window.follow(baseUrl, token, transport, ids)` watches each
 * id with one client; `window.heard` gets `{id, version, at}` for every
 * update and `window.statuses` `{id, state}` for every status.
 */
export const FOLLOW_PAGE = `<!doctype html>
<script type="module">
  import init, { TaskClient } from "/pkg/index.js";
  await init();
  window.heard = [];
  window.statuses = [];
  window.follow = (baseUrl, token, transport, ids) => {
    const client = new TaskClient({ baseUrl, token, transport, waitMs: 20000 });
    for (const id of ids) {
      client.watch(id, {
        onUpdate: ({ task }) => window.heard.push({ id, version: task.version, at: Date.now() }),
        onStatus: ({ state }) => window.statuses.push({ id, state }),
      });
    }
    window.stop = () => client.dispose();
  };
  window.ready = true;
</script>`;

/**
 * A self-signed certificate for 127.0.0.1 in a new temporary directory
 * (openssl, which scripts/setup.sh installs with Chromium): `{dir, cert,
 * key, chromiumArgs}`. The switch in `chromiumArgs` makes Chromium trust
 * it by its key, as a real certificate is trusted by its CA; Playwright's
 * `ignoreHTTPSErrors` would not do, as Chromium then opens a connection
 * per request instead of sharing its HTTP/2 session.
 */
export function throwawayCertificate() {
  const dir = mkdtempSync(join(tmpdir(), "taskwire-tls-"));
  const cert = join(dir, "cert.pem");
  const key = join(dir, "key.pem");
  execFileSync("openssl", [
    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
  ], { stdio: "ignore" });
  const spki = new X509Certificate(readFileSync(cert)).publicKey.export({ type: "spki", format: "der" });
  const pin = createHash("sha256").update(spki).digest("base64");
  return { dir, cert, key, chromiumArgs: [`--ignore-certificate-errors-spki-list=${pin}`] };
}
