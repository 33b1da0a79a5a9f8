//! The identity check every request between nodes (`/raft/*`) passes: the sender must be who this
//! node's membership and cluster say it is, this node must be the one the sender means to reach,
//! and every answer carries this node's identity.

use axum::extract::Request;
use axum::extract::State;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use raft::network::identity::Addressee;
use raft::network::PeerIdentity;

use crate::api::AppState;
use crate::error::Error;
use crate::error::ErrorCode;

/// Refuses a request whose sender's identity does not match this node's membership or cluster,
/// or that means another node or another disk of this node (409 `CLUSTER_MISMATCH`, one WARN
/// line and a count), and answers every request with this node's own identity so the sender can
/// check it in turn.
pub async fn check_identity(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let identity = state.cluster.identity();
    let parsed = PeerIdentity::from_headers(request.headers())
        .and_then(|peer| Ok((peer, Addressee::from_headers(request.headers())?)));
    let mut response = match parsed {
        Err(reason) => Error::invalid(reason).into_response(),
        Ok((None, _)) => next.run(request).await,
        Ok((Some(peer), to)) => {
            let checked = identity.check_sender(&peer).and_then(|()| match to {
                Some(to) => identity.check_addressee(&to),
                None => Ok(()),
            });
            match checked {
                Ok(()) => {
                    let sender_version = crate::cluster::versions::heard(identity, &peer, &request);
                    let path = request.uri().path().to_string();
                    let response = next.run(request).await;
                    crate::cluster::versions::stop_on_undecodable(identity, &peer, sender_version, &path, &response);
                    response
                }
                Err(mismatch) => {
                    identity.refused(&format!("{} from node {}", request.uri().path(), peer.node_id), &mismatch);
                    Error::new(ErrorCode::ClusterMismatch, mismatch.to_string()).into_response()
                }
            }
        }
    };
    identity.local().write_headers(response.headers_mut());
    response
}
