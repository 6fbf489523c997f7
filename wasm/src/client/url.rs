//! Building request URLs: `{baseUrl}/v1/tasks/{id}/…`, with the task id
//! percent-encoded as one path segment.

/// Percent-encodes everything but RFC 3986's unreserved characters, so an
/// id with `/`, `?`, `#` or spaces stays one path segment.
pub fn encode_segment(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xf)] as char);
        }
    }
    out
}

/// `{base}/v1/tasks/{id}{suffix}`; `base` without its trailing slashes.
pub fn task_url(base: &str, task_id: &str, suffix: &str) -> String {
    format!(
        "{}/v1/tasks/{}{suffix}",
        base.trim_end_matches('/'),
        encode_segment(task_id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_stay_one_segment() {
        assert_eq!(encode_segment("tsk_AZaz09-._~"), "tsk_AZaz09-._~");
        assert_eq!(encode_segment("a/b?c#d e"), "a%2Fb%3Fc%23d%20e");
        assert_eq!(encode_segment("é"), "%C3%A9");
        assert_eq!(
            task_url("http://h:1/", "t 1", "/resume?cursor=3"),
            "http://h:1/v1/tasks/t%201/resume?cursor=3"
        );
    }
}
