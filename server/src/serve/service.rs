//! The service every connection of a port calls: CORS around the router,
//! and the connection's [`Activity`] kept up to date by each request.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures_util::future::{self, Either, FutureExt};
use hyper::body::Incoming;
use hyper::service::service_fn;
use tower_service::Service;

use super::phase::{Activity, Busy, TimedBody, Tracked};
use crate::routes::cors::Cors;
use crate::AppState;

/// The service of one connection: CORS around the router (answering
/// preflights itself), each request marking the connection busy until
/// its answer is written, its body read under the body timeout.
///
/// `http2`: requests share the connection side by side, so none of them
/// may ask to close it (`Connection: close` does not exist in HTTP/2; an
/// unread body ends its own stream only).
pub(super) fn connection_service(
    router: &Router,
    cors_state: Option<AppState>,
    activity: &Arc<Activity>,
    body_timeout: Duration,
    http2: bool,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Tracked>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Tracked>, Infallible>> + Send,
> + Send
       + 'static {
    let router = router.clone();
    let on_request = Arc::clone(activity);
    service_fn(move |req: Request<Incoming>| {
        let has_body = !http2 && !hyper::body::Body::is_end_stream(req.body());
        let busy = Busy::start(&on_request, has_body);
        let cors = match &cors_state {
            Some(state) => Cors::of(state, &req),
            None => Cors::none(),
        };
        // A combinator rather than an `async` block: the block would
        // store the router's future twice (captured, then moved into its
        // state), and hyper keeps this future for as long as a request is
        // held.
        if cors.preflight() {
            let mut res = StatusCode::NO_CONTENT.into_response();
            cors.apply(&mut res);
            Either::Right(future::ready(Ok(res.map(|b| Tracked::new(b, busy)))))
        } else {
            // `Router::call` is always ready; cloning it is an Arc clone.
            let activity = Arc::clone(&on_request);
            let req = req.map(|body| Body::new(TimedBody::new(body, body_timeout, activity)));
            let routed = router.clone().call(req);
            Either::Left(routed.map(move |res: Result<Response, Infallible>| {
                let mut res = res.unwrap_or_else(|never| match never {});
                cors.apply(&mut res);
                if busy.body_left_unread() {
                    res.headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                Ok::<_, Infallible>(res.map(|b| Tracked::new(b, busy)))
            }))
        }
    })
}
