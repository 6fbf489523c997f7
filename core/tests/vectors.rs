//! Runs the shared JSON test vectors in `tests/vectors/` against the core.
//! The npm package's tests run the very same files against the built
//! WebAssembly; `tests/vectors/README.md` describes the format.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{json, Value};
use taskwire_core::batch::plan_batch;
use taskwire_core::{
    apply_event, expire_task, same_epoch, worth_holding, Book, Chunk, CreateTask, Error, Event,
    Mirror, OutputLog, OutputMirror, ResumeAnswer, ResumeMode, Task,
};
use taskwire_wire::{from_json, to_json};

fn vector_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/vectors exists")
        .map(|e| e.expect("readable dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 14,
        "expected the vector set, found {files:?}"
    );
    files
}

/// `expected` matches `actual` when every key of an expected object is in
/// the actual object with a matching value, arrays match element by
/// element with the same length, and scalars are equal. `null` in an
/// expected object means "absent or null".
fn matches(expected: &Value, actual: &Value, path: &str) -> Result<(), String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let p = format!("{path}.{k}");
                match a.get(k) {
                    Some(av) => matches(ev, av, &p)?,
                    None if ev.is_null() => {}
                    None => return Err(format!("{p}: missing, expected {ev}")),
                }
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!(
                    "{path}: expected {} items, got {}: {actual}",
                    e.len(),
                    a.len()
                ));
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                matches(ev, av, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        (Value::Number(e), Value::Number(a)) if e.as_f64() == a.as_f64() => Ok(()),
        (e, a) if e == a => Ok(()),
        (e, a) => Err(format!("{path}: expected {e}, got {a}")),
    }
}

fn error_json(e: &Error) -> Value {
    json!({ "code": e.code.as_str(), "message": e.message })
}

/// Parses a step field the way the npm package receives it: as JSON text.
fn parse<T: taskwire_core::json::FromJson>(text: &str, what: &str) -> Result<T, Error> {
    from_json(text, what)
}

struct Run {
    book: Book,
    mirrors: HashMap<String, Mirror>,
    /// Live output (`requires: ["output"]`): streams as the server keeps
    /// them, and as a page assembles them, by name.
    logs: HashMap<String, OutputLog>,
    pages: HashMap<String, OutputMirror>,
}

impl Run {
    fn step(&mut self, step: &Value) -> Result<Value, Error> {
        let op = step["op"].as_str().expect("op");
        let s = |k: &str| step[k].as_str().unwrap_or_default().to_string();
        let text = |k: &str| step[k].to_string();
        Ok(match op {
            "create" => {
                let input: CreateTask = parse(&text("input"), "input")?;
                json!({ "task": self.book.create(&input)? })
            }
            "get" => match self.book.get(&s("taskId")) {
                Some(task) => serde_json::to_value(task).unwrap(),
                None => Value::Null,
            },
            "apply" => {
                let event: Event = parse(&text("event"), "event")?;
                let callback = step["callbackId"].as_str();
                // `nowMs`: the server's clock when the callback arrived.
                let applied = match step["nowMs"].as_f64() {
                    Some(now) => self.book.apply_at(&s("taskId"), event, callback, now)?,
                    None => self.book.apply(&s("taskId"), event, callback)?,
                };
                serde_json::to_value(applied).unwrap()
            }
            "timeline" => match self.book.get(&s("taskId")) {
                Some(task) => serde_json::from_str(&taskwire_core::json::timeline_answer(
                    task.view(),
                    task.history(),
                ))
                .unwrap(),
                None => Value::Null,
            },
            "resume" => {
                let cursor = step["cursor"].as_u64().expect("cursor");
                serde_json::to_value(self.book.resume(&s("taskId"), cursor)?).unwrap()
            }
            "planBatch" => {
                let seq = step["seq"].as_u64().expect("seq");
                let cursor = step["cursor"].as_u64().expect("cursor");
                let snapshot = step["snapshot"].as_bool().unwrap_or(false);
                json!({ "mode": plan_batch(seq, cursor, snapshot).as_str() })
            }
            "worthHolding" => {
                let mode = match s("mode").as_str() {
                    "caught-up" => ResumeMode::CaughtUp,
                    "delta" => ResumeMode::Delta,
                    _ => ResumeMode::Snapshot,
                };
                let same = same_epoch(step["askedEpoch"].as_str(), &s("epoch"));
                let wait_ms = step["waitMs"].as_u64().expect("waitMs");
                let live = step["live"].as_bool().expect("live");
                json!({ "hold": worth_holding(wait_ms, mode, live, same) })
            }
            "deliver" => {
                let now = step["nowMs"].as_f64().expect("nowMs");
                serde_json::to_value(self.book.deliver_result(&s("taskId"), &s("key"), now)?)
                    .unwrap()
            }
            "expireDue" => {
                let now = step["nowMs"].as_f64().expect("nowMs");
                json!(self.book.expire_due(now)?)
            }
            "drain" => json!(self.book.drain_notifications()),
            "applyEvent" => {
                let task: Task = parse(&text("task"), "task")?;
                let event: Event = parse(&text("event"), "event")?;
                serde_json::to_value(apply_event(task, event)).unwrap()
            }
            "expireTask" => {
                let task: Task = parse(&text("task"), "task")?;
                serde_json::to_value(expire_task(task)).unwrap()
            }
            "mirrorNew" => {
                let mirror = Mirror::new(&s("taskId"))?;
                let out = json!({ "version": mirror.version() });
                self.mirrors.insert(s("mirror"), mirror);
                out
            }
            "mirrorMerge" => {
                let answer: ResumeAnswer = match step.get("answer") {
                    Some(answer) => parse(&answer.to_string(), "answer")?,
                    // Round-trip through JSON text, as a client receives it.
                    None => parse(
                        &to_json(
                            &self
                                .book
                                .resume(&s("taskId"), step["cursor"].as_u64().unwrap())?,
                        ),
                        "answer",
                    )?,
                };
                let mirror = self.mirrors.get_mut(&s("mirror")).expect("mirror exists");
                let outcome = mirror.merge(&answer);
                json!({ "outcome": outcome, "mirror": mirror })
            }
            "outputAppend" | "outputBegin" | "outputClose" | "outputSince" | "outputApply"
            | "outputPageClose" => self.output_step(op, step)?,
            other => panic!("unknown op {other}"),
        })
    }
}

impl Run {
    fn output_step(&mut self, op: &str, step: &Value) -> Result<Value, Error> {
        let u = |k: &str| step[k].as_u64().unwrap_or_default();
        let name = |k: &str| step[k].as_str().expect(k).to_string();
        Ok(match op {
            "outputAppend" => {
                let c = &step["chunk"];
                let chunk = Chunk::new(
                    c["attempt"].as_u64().unwrap_or_default(),
                    c["offset"].as_u64().unwrap_or_default(),
                    c["text"].as_str().unwrap_or_default().to_string(),
                    "chunk",
                )?;
                let log = self.logs.entry(name("log")).or_default();
                let live = step["taskLive"].as_bool().unwrap_or(true);
                let a = log.append(&chunk, u("taskAttempt"), live);
                json!({ "reason": a.reason.as_str(), "accepted": a.reason.accepted(),
                        "added": a.added, "offset": a.offset, "superseded": a.superseded,
                        "attempt": a.attempt, "expected": a.expected, "text": log.text() })
            }
            "outputBegin" => {
                let log = self.logs.entry(name("log")).or_default();
                json!({ "dropped": log.begin(u("attempt")), "text": log.text() })
            }
            "outputClose" => {
                let log = self.logs.entry(name("log")).or_default();
                json!({ "changed": log.close(), "closed": log.is_closed() })
            }
            "outputSince" => {
                let log = self.logs.entry(name("log")).or_default();
                let c = log.since(u("attempt"), u("offset"));
                json!({ "attempt": c.attempt, "offset": c.offset, "text": c.text,
                        "complete": c.complete, "news": c.is_news(u("attempt")) })
            }
            "outputApply" => {
                let page = self.pages.entry(name("page")).or_default();
                let text = step["text"].as_str().unwrap_or_default();
                let up = page.apply(u("attempt"), u("offset"), text);
                json!({ "delta": up.delta, "replaced": up.replaced, "gap": up.gap,
                        "text": page.text(), "attempt": page.attempt() })
            }
            _ => {
                let page = self.pages.entry(name("page")).or_default();
                let up = page.close(u("attempt"));
                json!({ "replaced": up.replaced, "closed": page.is_closed(), "text": page.text() })
            }
        })
    }
}

fn run_vector(path: &PathBuf) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let vector: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let retention = vector["retentionVersions"].as_u64().unwrap_or(8);
    let mut run = Run {
        book: Book::with_retention(retention),
        mirrors: HashMap::new(),
        logs: HashMap::new(),
        pages: HashMap::new(),
    };
    let steps = vector["steps"].as_array().ok_or("steps")?;
    for (i, step) in steps.iter().enumerate() {
        let at = format!("step {i} ({})", step["op"]);
        match (run.step(step), step.get("expectError")) {
            (Ok(actual), None) => {
                if let Some(expected) = step.get("expect") {
                    matches(expected, &actual, "$").map_err(|e| format!("{at}: {e}"))?;
                }
            }
            (Err(err), Some(expected)) => {
                let code = json!({ "code": expected["code"] });
                matches(&code, &error_json(&err), "$error").map_err(|e| format!("{at}: {e}"))?;
                // The message must name the field: it starts with it.
                if let Some(field) = expected["field"].as_str() {
                    if !err.message.starts_with(field) {
                        return Err(format!(
                            "{at}: message {:?} does not start with {field}",
                            err.message
                        ));
                    }
                }
            }
            (Ok(actual), Some(_)) => return Err(format!("{at}: expected an error, got {actual}")),
            (Err(err), None) => return Err(format!("{at}: unexpected error {err}")),
        }
    }
    Ok(())
}

#[test]
fn every_vector_passes() {
    let mut failures = Vec::new();
    for path in vector_files() {
        if let Err(e) = run_vector(&path) {
            failures.push(format!("{}: {e}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_matcher_can_fail() {
    assert!(matches(&json!({"a": 1}), &json!({"a": 2}), "$").is_err());
    assert!(matches(&json!([1]), &json!([1, 2]), "$").is_err());
    assert!(matches(&json!({"a": 1}), &json!({}), "$").is_err());
    assert!(matches(&json!({"a": null}), &json!({}), "$").is_ok());
    assert!(matches(&json!({"a": 1}), &json!({"a": 1.0, "b": 2}), "$").is_ok());
}
