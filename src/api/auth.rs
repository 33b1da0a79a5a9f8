//! The cluster secret: `/raft/*`, every write and `GET /v1/backup` (a copy of every tag) need
//! `Authorization: Bearer <secret>` when the node has one. Other reads and ID requests stay open.

use axum::extract::Request;
use axum::extract::State;
use axum::http::header::AUTHORIZATION;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;

use crate::api::AppState;
use crate::error::Error;
use crate::error::ErrorCode;

pub async fn require_secret(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(secret) = state.secret.as_deref() else {
        return next.run(request).await;
    };
    let needs_secret = request.uri().path().starts_with("/raft/")
        || request.uri().path() == "/v1/backup"
        || !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !needs_secret {
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match given {
        Some(given) if constant_time_eq(given.as_bytes(), secret.as_bytes()) => next.run(request).await,
        Some(_) => Error::new(ErrorCode::Unauthorized, "wrong secret").into_response(),
        None => {
            Error::new(ErrorCode::Unauthorized, "this request needs Authorization: Bearer <secret>").into_response()
        }
    }
}

/// Compares without an early exit, so the time taken does not reveal how much of a guess matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn constant_time_eq() {
        assert!(super::constant_time_eq(b"abc", b"abc"));
        assert!(!super::constant_time_eq(b"abc", b"abd"));
        assert!(!super::constant_time_eq(b"abc", b"ab"));
    }
}
