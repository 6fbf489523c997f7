//! Raw TCP helpers for the limit tests: what a half-sent request or an
//! idle connection gets, read without an HTTP client in the way.

use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::TcpStream;

/// Longer than any limit set below: a connection still open after this
/// was not cut off by the server.
pub const PATIENCE: Duration = Duration::from_secs(3);

/// What a raw connection got before the server closed it, and when it
/// closed (`None`: still open after `within`).
pub async fn until_closed(stream: &mut TcpStream, within: Duration) -> (String, Option<Instant>) {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_still_open) => return (String::from_utf8_lossy(&got).into_owned(), None),
            Ok(Ok(0)) | Ok(Err(_)) => {
                return (
                    String::from_utf8_lossy(&got).into_owned(),
                    Some(Instant::now()),
                )
            }
            Ok(Ok(n)) => got.extend_from_slice(buf.get(..n).unwrap_or_default()),
        }
    }
}

/// Reads one whole response (head and `content-length` body) off a raw
/// connection.
pub async fn one_response(stream: &mut BufReader<TcpStream>) -> String {
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        let n = tokio::time::timeout(PATIENCE, stream.read_line(&mut line))
            .await
            .expect("a response in time")
            .expect("read");
        assert!(n > 0, "closed before a whole response: {head}");
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().expect("content-length");
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.expect("body");
    head + &String::from_utf8_lossy(&body)
}

pub fn get_head(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: t\r\nauthorization: Bearer demo\r\n\r\n")
}
