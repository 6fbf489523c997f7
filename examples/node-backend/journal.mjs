// The journal: an append-only file of JSON lines, one per operation that
// changed the book (see README.md, "Storage"). Writes are synchronous and
// fsynced: when `append` returns, the line is on disk, so the caller may
// answer the request that caused it.
//
// A crash can interrupt the last write, leaving a final line without its
// newline. That operation was never acknowledged (the answer goes out only
// after the fsync), so `open` drops the fragment and cuts the file back to
// the last complete line before appending anything new.

import { randomBytes } from "node:crypto";
import {
  closeSync,
  existsSync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";

export const JOURNAL_FILE = "journal.jsonl";

/** The first line of every journal: what the file is, and its format version. */
const HEADER = { journal: "taskwire-node-backend", format: 1 };

/**
 * The epoch of the journal's history (PROTOCOL.md §Epoch): 128 random bits
 * in hex, written as an `{"op":"epoch"}` record. The last such record
 * wins: a new journal gets one at once (`created`), a journal from before
 * epochs gets one on its first open, and `--mark-restored` appends a new
 * one to a journal put back from a backup (`restored`).
 */
export const newEpoch = () => randomBytes(16).toString("hex");

export class Journal {
  #fd;
  /** Where the file is (for messages). */
  path;

  constructor(fd, path) {
    this.#fd = fd;
    this.path = path;
  }

  /**
   * Opens (or creates) `DIR/journal.jsonl`. Returns the journal, the
   * records already in it, oldest first (without the epoch records), and
   * its `epoch`; `dropped` is the torn last line's length in bytes (0 when
   * the file ended cleanly).
   */
  static open(dir) {
    mkdirSync(dir, { recursive: true });
    const path = join(dir, JOURNAL_FILE);
    const fd = openSync(path, "a+");
    try {
      const text = readFileSync(fd, "utf8");
      const end = text.lastIndexOf("\n") + 1;
      const complete = text.slice(0, end);
      const dropped = Buffer.byteLength(text.slice(end));
      if (dropped > 0) {
        // Cut the torn line off, so that the next append starts a line.
        ftruncateSync(fd, Buffer.byteLength(complete));
        fsyncSync(fd);
      }
      const lines = parseLines(complete, path);
      const journal = new Journal(fd, path);
      if (lines === null) journal.append(HEADER);
      const records = (lines ?? []).filter(({ record }) => record.op !== "epoch");
      let epoch = (lines ?? []).findLast(({ record }) => record.op === "epoch")?.record.epoch;
      if (typeof epoch !== "string" || epoch.trim() === "") {
        epoch = newEpoch();
        journal.append({ op: "epoch", epoch, cause: "created", atMs: Date.now() });
      }
      if (lines === null) fsyncDir(dir);
      return { journal, records, dropped, epoch };
    } catch (err) {
      closeSync(fd);
      throw err;
    }
  }

  /**
   * `--mark-restored`: the journal in `dir`, put back from a backup, gets
   * a new epoch. It must exist: a mistyped `--data` must not start one.
   * Returns the epochs before and after.
   */
  static markRestored(dir) {
    if (!existsSync(join(dir, JOURNAL_FILE))) throw new Error(`${join(dir, JOURNAL_FILE)}: no such journal (--mark-restored marks an existing one)`);
    const { journal, epoch: before } = Journal.open(dir);
    try {
      const after = newEpoch();
      journal.append({ op: "epoch", epoch: after, cause: "restored", atMs: Date.now() });
      return { before, after };
    } finally {
      journal.close();
    }
  }

  /** Writes one record as a line and waits for the disk (fsync). */
  append(record) {
    const line = Buffer.from(`${JSON.stringify(record)}\n`, "utf8");
    let written = 0;
    while (written < line.length) {
      written += writeSync(this.#fd, line, written, line.length - written);
    }
    fsyncSync(this.#fd);
  }

  close() {
    closeSync(this.#fd);
  }
}

/**
 * The records of the complete lines (null for an empty file). Every
 * complete line must parse: only the last, incomplete one may be torn.
 */
function parseLines(text, path) {
  if (text === "") return null;
  const lines = text.split("\n");
  lines.pop(); // what follows the final newline: nothing
  const records = [];
  lines.forEach((line, i) => {
    let record;
    try {
      record = JSON.parse(line);
    } catch (err) {
      throw new Error(`${path}:${i + 1}: not a JSON line (${err.message}); refusing to start on a damaged journal`);
    }
    if (i === 0) {
      if (record?.journal !== HEADER.journal || record.format !== HEADER.format) {
        throw new Error(`${path}:1: not a taskwire-node-backend journal (format ${HEADER.format})`);
      }
      return;
    }
    records.push({ line: i + 1, record });
  });
  return records;
}

/** Makes a new file's directory entry durable too. */
function fsyncDir(dir) {
  let fd;
  try {
    fd = openSync(dir, "r");
    fsyncSync(fd);
  } catch {
    // Some platforms cannot fsync a directory; the data itself is synced.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
