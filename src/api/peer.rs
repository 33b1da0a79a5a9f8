//! The identity check every request between nodes (`/raft/*`) passes: the sender must be who this
//! node's membership and cluster say it is, and every answer carries this node's identity.

use axum::extract::Request;
use axum::extract::State;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use raft::network::PeerIdentity;

use crate::api::AppState;
use crate::error::Error;
use crate::error::ErrorCode;

/// Refuses a request whose sender's identity does not match this node's membership or cluster
/// (409 `CLUSTER_MISMATCH`, one WARN line and a count), and answers every request with this
/// node's own identity so the sender can check it in turn.
pub async fn check_identity(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let identity = state.cluster.identity();
    let mut response = match PeerIdentity::from_headers(request.headers()) {
        Err(reason) => Error::invalid(reason).into_response(),
        Ok(None) => next.run(request).await,
        Ok(Some(peer)) => match identity.check_sender(&peer) {
            Ok(()) => next.run(request).await,
            Err(mismatch) => {
                identity.refused(&format!("{} from node {}", request.uri().path(), peer.node_id), &mismatch);
                Error::new(ErrorCode::ClusterMismatch, mismatch.to_string()).into_response()
            }
        },
    };
    identity.local().write_headers(response.headers_mut());
    response
}
