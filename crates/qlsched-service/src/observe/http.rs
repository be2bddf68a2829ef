//! The HTTP side of `run --metrics-addr`: hyper's HTTP/1 server connection over a tokio
//! listener (docs/DECISIONS.md says why this stack). GET (or HEAD) `/metrics`, `/healthz` and
//! `/readyz`; anything else is 404 or 405. Bounded: a few connections at a time, and a request
//! whose headers do not arrive within seconds is dropped.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::{Observer, Readiness};

/// Connections served at once; more wait in the listen queue.
const CONNECTIONS: usize = 16;
/// A client that has not sent its request headers by then is dropped.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds `addr` (`HOST:PORT`; a name is resolved, its first address that binds is used).
pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves until the returned task is aborted.
pub fn serve(listener: TcpListener, observer: Observer) -> JoinHandle<()> {
    tokio::spawn(async move {
        let permits = Arc::new(Semaphore::new(CONNECTIONS));
        loop {
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let (stream, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(%error, "metrics endpoint: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let observer = observer.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let observer = observer.clone();
                    async move { Ok::<_, Infallible>(respond(&observer, &request).await) }
                });
                let served = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                if let Err(error) = served {
                    tracing::debug!(%error, "metrics endpoint: connection ended");
                }
                drop(permit);
            });
        }
    })
}

async fn respond(observer: &Observer, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "application/json",
            json("failing", "only GET and HEAD are served"),
        );
    }
    match request.uri().path() {
        "/metrics" => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            observer.render().await,
        ),
        "/healthz" => match observer.health() {
            Ok(detail) => reply(StatusCode::OK, "application/json", json("ok", &detail)),
            Err(reason) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "application/json",
                json("failing", &reason),
            ),
        },
        "/readyz" => match observer.readiness().await {
            Readiness::Ready => reply(
                StatusCode::OK,
                "application/json",
                json("ok", "schema ready, privileges checked, server writable"),
            ),
            Readiness::NotReady(reason) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "application/json",
                json("failing", &reason),
            ),
        },
        _ => reply(
            StatusCode::NOT_FOUND,
            "application/json",
            json("failing", "not found: try /metrics, /healthz or /readyz"),
        ),
    }
}

/// `{"status": ..., "reason": ...}` on one line.
fn json(status: &str, reason: &str) -> String {
    let mut body = serde_json::json!({ "status": status, "reason": reason }).to_string();
    body.push('\n');
    body
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
