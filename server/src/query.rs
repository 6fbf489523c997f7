//! Query parameters, parsed by hand so that every error names its
//! parameter: a leaf shared by the routes and the metrics endpoint.

use taskwire_core::MAX_SAFE_INTEGER;

use crate::error::{quoted, ApiError};

/// Query parameters, parsed by hand so every error names its parameter.
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Splits a raw query string and percent-decodes names and values
    /// (`cursor=%31` is `cursor=1`, as URL rules say).
    pub fn parse(raw: Option<&str>) -> Self {
        Query(
            raw.unwrap_or("")
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (decode(k), decode(v)),
                    None => (decode(p), String::new()),
                })
                .collect(),
        )
    }

    /// A parameter's (first) value, decoded.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// An optional integer parameter in `0..=max`.
    pub fn int(&self, name: &str, max: u64) -> Result<Option<u64>, ApiError> {
        self.get(name).map(|v| parse_int(name, v, max)).transpose()
    }

    /// A required integer parameter in `0..=max`.
    pub fn required_int(&self, name: &str, max: u64) -> Result<u64, ApiError> {
        self.int(name, max)?
            .ok_or_else(|| ApiError::invalid(format!("{name}: query parameter is required")))
    }

    /// A flag: absent, `0`/`false`, or `1`/`true`.
    pub fn flag(&self, name: &str) -> Result<bool, ApiError> {
        match self.get(name) {
            None | Some("0") | Some("false") => Ok(false),
            Some("1") | Some("true") | Some("") => Ok(true),
            Some(other) => Err(ApiError::invalid(format!(
                "{name}: must be 1 or 0, got {}",
                quoted(other)
            ))),
        }
    }
}

/// Percent-decodes a query component (`+` is a space, as in forms); a
/// malformed escape is kept as it is, and invalid UTF-8 becomes U+FFFD.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |j: usize| bytes.get(j).and_then(|c| (*c as char).to_digit(16));
        match (b, hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a decimal integer in `0..=max` (at most 2^53 − 1).
pub fn parse_int(name: &str, text: &str, max: u64) -> Result<u64, ApiError> {
    let max = max.min(MAX_SAFE_INTEGER);
    let bad = || {
        ApiError::invalid(format!(
            "{name}: must be an integer from 0 to {max}, got {}",
            quoted(text)
        ))
    };
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    text.parse::<u64>()
        .ok()
        .filter(|n| *n <= max)
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_name_their_parameter() {
        assert_eq!(parse_int("cursor", "12", MAX_SAFE_INTEGER).unwrap(), 12);
        for bad in [
            "",
            "-1",
            "1.5",
            "1e3",
            "x",
            "9007199254740992",
            "99999999999999999999999",
        ] {
            let err = parse_int("cursor", bad, MAX_SAFE_INTEGER).unwrap_err();
            assert!(err.message.starts_with("cursor: "), "{}", err.message);
        }
        assert!(parse_int("waitMs", "30001", 30_000).is_err());
    }

    #[test]
    fn queries_split_and_flag() {
        let q = Query::parse(Some("cursor=3&snapshot=1&x"));
        assert_eq!(q.required_int("cursor", 10).unwrap(), 3);
        let q = Query::parse(Some("cursor=%31%32&snapshot=%31&bad=%zz+x"));
        assert_eq!(q.required_int("cursor", 100).unwrap(), 12);
        assert!(q.flag("snapshot").unwrap());
        assert_eq!(q.get("bad"), Some("%zz x"));
        assert!(q.flag("snapshot").unwrap());
        assert!(q.required_int("waitMs", 10).is_err());
        assert!(Query::parse(Some("snapshot=yes")).flag("snapshot").is_err());
    }
}
