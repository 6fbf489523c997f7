// Server-Sent Events over fetch streaming, as the taskwire client reads
// them (EventSource cannot send Authorization).

import { AssertionError } from 'node:assert';

/**
 * Incremental parser for the text/event-stream format (WHATWG HTML
 * §9.2.6): lines end in CRLF, LF or CR; a blank line dispatches; `:`
 * starts a comment; one leading space after the colon is dropped.
 */
export class SseParser {
  constructor() {
    this.buffer = '';
    this.reset();
    this.comments = [];
  }

  reset() {
    this.event = '';
    this.data = [];
    this.id = undefined;
  }

  /** Feeds text and returns the messages it completed. */
  push(text) {
    this.buffer += text;
    const messages = [];
    for (;;) {
      const m = /\r\n|\n|\r/.exec(this.buffer);
      // A lone CR at the end may be the first half of CRLF: wait.
      if (!m || (m[0] === '\r' && m.index === this.buffer.length - 1)) break;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      const message = this.line(line);
      if (message) messages.push(message);
    }
    return messages;
  }

  line(line) {
    if (line === '') {
      const message =
        this.data.length > 0
          ? { event: this.event || 'message', id: this.id, data: this.data.join('\n') }
          : null;
      this.reset();
      return message;
    }
    if (line.startsWith(':')) {
      this.comments.push(line.slice(1).trim());
      return null;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id' && !value.includes('\0')) this.id = value;
    return null;
  }
}

/** An open event stream: `next()` gives the messages in order. */
export class EventStream {
  constructor(response, entry, controller) {
    this.response = response;
    this.entry = entry;
    this.controller = controller;
    this.parser = new SseParser();
    this.queue = [];
    this.ended = false;
    this.error = null;
    this.wake = () => {};
    this.entry.responseBody = '';
    this.pumping = this.pump();
  }

  async pump() {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of this.response.body) {
        const text = decoder.decode(chunk, { stream: true });
        if (this.entry.responseBody.length < 20_000) this.entry.responseBody += text;
        this.queue.push(...this.parser.push(text));
        this.wake();
      }
    } catch (err) {
      if (!this.controller.signal.aborted) this.error = err;
    }
    this.ended = true;
    this.entry.responseBody += '\n(stream ended)';
    this.wake();
  }

  /**
   * The next message, or null once the server has ended the stream.
   * Fails if nothing arrives within `timeoutMs`.
   */
  async next(timeoutMs = 5000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.queue.length > 0) return this.queue.shift();
      if (this.error) {
        throw new AssertionError({ message: `event stream failed: ${this.error.message}` });
      }
      if (this.ended) return null;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new AssertionError({ message: `no event-stream message within ${timeoutMs} ms` });
      }
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Heartbeat and other comment lines seen so far. */
  get comments() {
    return this.parser.comments;
  }

  close() {
    this.controller.abort();
  }
}

/**
 * GETs `path` as an event stream. Returns `{status, headers, stream}`;
 * `stream` is null (and the body read into `text`/`json`) when the answer
 * is not 200.
 */
export async function openEventStream(http, path, { headers = {}, token } = {}) {
  const controller = new AbortController();
  const opts = { headers, controller };
  if (token !== undefined) opts.token = token;
  const { response, entry } = await http.open(path, opts);
  if (response.status !== 200) {
    const text = await response.text();
    entry.responseBody = text;
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, text, json, stream: null };
  }
  const stream = new EventStream(response, entry, controller);
  return { status: 200, headers: response.headers, stream };
}
