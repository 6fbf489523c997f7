// A TCP proxy the test can cut, between the browser and the server.
//
// Why not just CDP's offline emulation: it fails new requests but lets a
// request already in flight complete, so a held long-poll would still be
// answered "through" the outage. A real outage kills the connection. The
// proxy does exactly that: `cut()` resets every open connection (the
// browser sees ECONNRESET) and resets new ones until `restore()`.

import net from "node:net";

export async function startProxy(targetPort, targetHost = "127.0.0.1") {
  /** Open connections: [browser side, server side]. */
  const open = new Set();
  let refusing = false;
  let closedByServer = 0;

  const server = net.createServer((client) => {
    if (refusing) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(targetPort, targetHost);
    const pair = [client, upstream];
    open.add(pair);
    // A clean end on one side is passed on by pipe() (after the data in
    // flight); an error on one side destroys the other.
    client.pipe(upstream);
    upstream.pipe(client);
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.on("close", () => {
      open.delete(pair);
      upstream.destroy();
    });
    upstream.on("close", () => open.delete(pair));
    // The server ended the connection (not us, not the browser): e.g. it
    // dropped a held request.
    upstream.once("end", () => (closedByServer += 1));
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });

  return {
    port: server.address().port,
    /** Connections the server closed so far. */
    get closedByServer() {
      return closedByServer;
    },
    /** Resets every open connection and every new one until `restore()`. */
    cut() {
      refusing = true;
      for (const [client, upstream] of open) {
        client.resetAndDestroy();
        upstream.destroy();
      }
      open.clear();
    },
    restore() {
      refusing = false;
    },
    async close() {
      this.cut();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
