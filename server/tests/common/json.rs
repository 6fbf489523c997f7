//! The tests' own view of an answer's body: parsed by serde_json, a JSON
//! library independent of the codec the server writes its bodies with, so
//! a test reads the bytes as any client would.

use taskwire_server::client::Reply;

/// `reply.json()`: the body as a JSON tree (`Null` when it is not JSON).
pub trait ReplyJson {
    fn json(&self) -> serde_json::Value;
}

impl ReplyJson for Reply {
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}
