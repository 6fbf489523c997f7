// Requests that fetch cannot make, on a plain socket: a header line sent
// twice, a body that never comes. Each exchange goes into the check's
// transcript like the others.

import { connect } from 'node:net';

/**
 * Sends `POST path` (or `method`) with `headers` ([name, value] pairs, sent in order,
 * repeats allowed), `Content-Length: length` and `body` (possibly less
 * than `length`: the rest never comes). Resolves with `{status, headers,
 * text, json, ms}` once a whole response arrived, or `{status: null, ms}`
 * when none did within `waitMs` (or the server closed without one).
 */
export function rawPost(http, path, { method = 'POST', headers = [], body = '', length = Buffer.byteLength(body), waitMs = 5000 }) {
  const url = new URL(http.url(path));
  const lines = [`${method} ${url.pathname}${url.search} HTTP/1.1`, `host: ${url.host}`, 'content-type: application/json', `content-length: ${length}`];
  for (const [k, v] of headers) lines.push(`${k}: ${v}`);
  const entry = http.transcript.add({
    method: `${method} (raw socket)`,
    url: url.href,
    requestHeaders: Object.fromEntries(headers.map(([k, v], i) => [`${k} [${i}]`, v])),
    requestBody: length > Buffer.byteLength(body) ? `${body}… (${Buffer.byteLength(body)} of ${length} bytes sent)` : body,
  });
  const started = Date.now();
  return new Promise((resolve) => {
    const socket = connect(Number(url.port || 80), url.hostname);
    let received = Buffer.alloc(0);
    let done = false;
    const finish = (status, text = '', headers = new Headers()) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      entry.ms = Date.now() - started;
      let json;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      if (status === null) entry.error = `no answer within ${waitMs} ms`;
      else Object.assign(entry, { status, responseBody: text });
      resolve({ status, headers, text, json, ms: entry.ms });
    };
    const timer = setTimeout(() => finish(null), waitMs);
    socket.on('connect', () => {
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      socket.write(body);
    });
    /** The response so far: [status, headers, body bytes], or null before the head. */
    const parsed = () => {
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) return null;
      const [statusLine, ...fields] = received.subarray(0, end).toString('latin1').split('\r\n');
      const headers = new Headers();
      for (const f of fields) {
        const colon = f.indexOf(':');
        if (colon > 0) headers.append(f.slice(0, colon).trim(), f.slice(colon + 1).trim());
      }
      return [Number(statusLine.split(' ')[1]), headers, received.subarray(end + 4)];
    };
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      const r = parsed();
      const length = Number(r?.[1].get('content-length'));
      if (r && r[2].length >= length) finish(r[0], r[2].subarray(0, length).toString('utf8'), r[1]);
    });
    // A server that answers before the body may close (even reset) the
    // connection right after: what arrived is the answer.
    const closed = () => {
      const r = parsed();
      if (!r) return finish(null);
      finish(r[0], r[2].toString('utf8'), r[1]);
    };
    socket.on('end', closed);
    socket.on('error', closed);
    socket.on('close', closed);
  });
}
