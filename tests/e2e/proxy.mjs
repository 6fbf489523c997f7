// A TCP proxy the test can cut, between the browser and the server.
//
// Why not just CDP's offline emulation: it fails new requests but lets a
// request already in flight complete, so a held long-poll would still be
// answered "through" the outage. A real outage kills the connection. The
// proxy does exactly that: `cut()` resets every open connection (the
// browser sees ECONNRESET) and resets new ones until `restore()`.
//
// It also reads the request line of each HTTP/1.1 request that passes
// (`requests`), and knows which of them the server has not begun to
// answer yet (`unanswered()`): the held long-polls, counted where the
// browser cannot hide them (tabs of one browser share its sockets).

import net from "node:net";

export async function startProxy(targetPort, targetHost = "127.0.0.1") {
  /** Open connections: [browser side, server side]. */
  const open = new Set();
  let refusing = false;
  let closedByServer = 0;
  /** Every request line seen, in order: {method, path, atMs}. */
  const requests = [];
  /** Connection → its request the server has not begun to answer. */
  const waiting = new Map();

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
    // A request starts a chunk (browsers neither pipeline nor split a
    // request head); an answer's first byte ends its wait.
    client.on("data", (chunk) => {
      const line = /^([A-Z]+) (\S+) HTTP\/1\.1\r\n/.exec(chunk.toString("latin1", 0, 2048));
      if (!line) return;
      const request = { method: line[1], path: line[2], atMs: Date.now() };
      requests.push(request);
      waiting.set(pair, request);
    });
    upstream.on("data", () => waiting.delete(pair));
    client.on("close", () => waiting.delete(pair));
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.on("close", () => {
      open.delete(pair);
      upstream.destroy();
    });
    upstream.on("close", () => {
      open.delete(pair);
      waiting.delete(pair);
    });
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
    /** Every request line seen so far, in order: `{method, path, atMs}`. */
    requests,
    /** The requests now waiting for the first byte of their answer. */
    unanswered: () => [...waiting.values()],
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
