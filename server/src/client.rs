//! A minimal HTTP/1.1 client on hyper (already in axum's tree), for the
//! demo executor's callbacks, the notify webhook, the tests and the load
//! tool. [`Conn::open`] speaks plain HTTP; [`Conn::over`] speaks it over
//! any stream, which is how the notify sender posts to `https://`
//! receivers (src/notify/tls.rs).

use std::io;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use taskwire_wire::from_json_serde_bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A complete response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Reply {
    /// The body read as `T` by taskwire's codec; an error names the field
    /// under `what` (`answer.task.version: expected u64, got a string`).
    /// Fields of the body that `T` does not declare are skipped.
    pub fn read<'a, T: Deserialize<'a>>(&'a self, what: &str) -> Result<T, taskwire_core::Error> {
        from_json_serde_bytes(&self.body, what)
    }

    /// The body as text, for messages (invalid UTF-8 replaced).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.body)
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// One keep-alive connection.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl Conn {
    /// Connects to `host:port`.
    pub async fn open(authority: &str) -> io::Result<Conn> {
        let stream = TcpStream::connect(authority).await?;
        stream.set_nodelay(true)?;
        Conn::over(stream, authority).await
    }

    /// Speaks HTTP/1.1 over `stream` (a TLS stream, say), sending `host`
    /// as the Host header.
    pub async fn over<S>(stream: S, host: &str) -> io::Result<Conn>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(other)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            sender,
            host: host.to_string(),
        })
    }

    /// Sends a request and returns the response with its body unread
    /// (for streams).
    pub async fn stream(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> io::Result<Response<Incoming>> {
        let mut req = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).map_err(other)?)
            .uri(path)
            .header("host", &self.host);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(body.into())).map_err(other)?;
        self.sender.ready().await.map_err(other)?;
        self.sender.send_request(req).await.map_err(other)
    }

    /// Sends a request and reads the whole response.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> io::Result<Reply> {
        let res = self.stream(method, path, headers, body).await?;
        let (parts, body) = res.into_parts();
        let body = body.collect().await.map_err(other)?.to_bytes();
        Ok(Reply {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }
}

/// One request on a fresh connection.
pub async fn request(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> io::Result<Reply> {
    Conn::open(authority)
        .await?
        .send(method, path, headers, body)
        .await
}
