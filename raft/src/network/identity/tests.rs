//! Identity checks: the pure comparisons, the headers, and the client's handling of a refusal
//! and of a mismatched answer against stub peers.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use openraft::error::RPCError;
use openraft::network::RPCOption;
use openraft::testing::log_id;
use openraft::RaftNetwork;
use openraft::RaftNetworkFactory;
use openraft::Vote;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::*;
use crate::network::NetworkFactory;
use leafraft_state::codec;
use leafraft_state::Node;

const CLUSTER: u64 = 0xc1;

/// Node 1 (incarnation 0x11) of cluster `CLUSTER` whose membership records node 2 with 0x22 and
/// node 3 with an unknown incarnation.
fn node_one() -> IdentityCheck {
    let check = IdentityCheck::new(1, 0x11);
    let nodes: BTreeMap<u64, Node> =
        [(1, Node::new("a:1", 0x11)), (2, Node::new("a:2", 0x22)), (3, Node::new("a:3", 0))].into();
    check.observe(CLUSTER, MARK, &typ::Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes));
    check
}

/// Where node one's membership stands.
const MARK: MembershipMark = MembershipMark { term: 3, index: 40 };

fn peer(cluster_id: u64, node_id: u64, incarnation: u64) -> PeerIdentity {
    PeerIdentity { cluster_id, node_id, incarnation, membership: MARK }
}

fn peer_at(membership: MembershipMark, node_id: u64, incarnation: u64) -> PeerIdentity {
    PeerIdentity { cluster_id: CLUSTER, node_id, incarnation, membership }
}

/// A sender whose membership is newer than the receiver's may have been removed and re-added
/// with a new disk in entries the receiver lacks: only the side with the newer membership judges.
/// Without this a follower that missed a member's rebuild could never take entries from it once
/// it leads.
#[test]
fn regression_a_sender_with_a_newer_membership_is_not_judged_by_an_older_one() {
    let check = node_one();
    let newer = [MembershipMark { term: 4, index: 2 }, MembershipMark { term: 3, index: 41 }];
    for mark in newer {
        assert_eq!(check.check_sender(&peer_at(mark, 2, 0x99)), Ok(()), "{mark}");
    }
    let not_newer = [MARK, MembershipMark { term: 3, index: 39 }, MembershipMark { term: 2, index: 90 }];
    for mark in not_newer.into_iter().chain([MembershipMark::default()]) {
        assert!(matches!(check.check_sender(&peer_at(mark, 2, 0x99)), Err(Mismatch::Incarnation { .. })), "{mark}");
    }
    // The cluster is checked whatever the membership.
    let other_cluster = PeerIdentity { cluster_id: 0xc2, ..peer_at(newer[0], 2, 0x22) };
    assert!(matches!(check.check_sender(&other_cluster), Err(Mismatch::Cluster { .. })));
}

/// A request meant for another node, or for another disk of this node ID, is refused by the
/// receiver; an unknown incarnation (0) is not.
#[test]
fn a_receiver_refuses_requests_meant_for_another_node_or_disk() {
    let check = node_one();
    assert_eq!(check.check_addressee(&Addressee { node_id: 1, incarnation: 0x11 }), Ok(()));
    assert_eq!(check.check_addressee(&Addressee { node_id: 1, incarnation: 0 }), Ok(()));
    assert_eq!(
        check.check_addressee(&Addressee { node_id: 1, incarnation: 0x10 }),
        Err(Mismatch::Incarnation { node_id: 1, recorded: 0x10, presented: 0x11 })
    );
    assert_eq!(
        check.check_addressee(&Addressee { node_id: 2, incarnation: 0x11 }),
        Err(Mismatch::NodeId { expected: 2, presented: 1 })
    );
}

#[test]
fn the_addressee_round_trips_in_headers() {
    let mut headers = HeaderMap::new();
    assert_eq!(Addressee::from_headers(&headers), Ok(None));
    let to = Addressee { node_id: 7, incarnation: 0xfedc_ba98_7654_3210 };
    to.write_headers(&mut headers);
    assert_eq!(Addressee::from_headers(&headers), Ok(Some(to)));
    headers.remove(TO_NODE_ID_HEADER);
    assert!(Addressee::from_headers(&headers).is_err());
}

#[test]
fn a_sender_is_checked_against_the_membership_and_the_cluster() {
    let check = node_one();
    assert_eq!(check.check_sender(&peer(CLUSTER, 2, 0x22)), Ok(()));
    assert_eq!(
        check.check_sender(&peer(CLUSTER, 2, 0x99)),
        Err(Mismatch::Incarnation { node_id: 2, recorded: 0x22, presented: 0x99 })
    );
    assert_eq!(
        check.check_sender(&peer(0xc2, 2, 0x22)),
        Err(Mismatch::Cluster { local: CLUSTER, peer: 0xc2, peer_node: 2 })
    );
    // Unknown incarnations, non-members and senders without a cluster yet are not refused.
    assert_eq!(check.check_sender(&peer(CLUSTER, 3, 0x33)), Ok(()));
    assert_eq!(check.check_sender(&peer(CLUSTER, 9, 0x99)), Ok(()));
    assert_eq!(check.check_sender(&peer(0, 2, 0x22)), Ok(()));
    // A second process claiming to be this very node with another disk is refused too.
    assert!(matches!(check.check_sender(&peer(CLUSTER, 1, 0x12)), Err(Mismatch::Incarnation { node_id: 1, .. })));
}

#[test]
fn a_node_without_a_cluster_checks_nothing_but_the_target() {
    let check = IdentityCheck::new(4, 0x44);
    assert_eq!(check.check_sender(&peer(CLUSTER, 2, 0x22)), Ok(()));
    assert_eq!(check.check_responder(&peer(CLUSTER, 2, 0x22), Some((2, 0))), Ok(()));
    assert_eq!(
        check.check_responder(&peer(CLUSTER, 5, 0x55), Some((2, 0))),
        Err(Mismatch::NodeId { expected: 2, presented: 5 })
    );
}

#[test]
fn a_responder_must_be_the_recorded_target() {
    let check = node_one();
    assert_eq!(check.check_responder(&peer(CLUSTER, 2, 0x22), Some((2, 0x22))), Ok(()));
    assert!(matches!(
        check.check_responder(&peer(CLUSTER, 2, 0x23), Some((2, 0x22))),
        Err(Mismatch::Incarnation { .. })
    ));
    assert!(matches!(check.check_responder(&peer(0xc2, 2, 0x22), Some((2, 0x22))), Err(Mismatch::Cluster { .. })));
    assert_eq!(check.check_responder(&peer(CLUSTER, 7, 0x77), None), Ok(()));
}

#[test]
fn messages_name_both_sides_on_one_line() {
    let cluster = Mismatch::Cluster { local: 0xab, peer: 0xcd, peer_node: 2 }.to_string();
    assert_eq!(cluster, "node 2 belongs to cluster 00000000000000cd, this node to cluster 00000000000000ab");
    let incarnation = Mismatch::Incarnation { node_id: 2, recorded: 1, presented: 2 }.to_string();
    assert!(
        incarnation.contains("leafraft cluster remove --node-id 2") && incarnation.contains("--join"),
        "{incarnation}"
    );
    assert!(!incarnation.contains('\n'));
}

#[test]
fn refusals_are_counted_by_kind() {
    let check = node_one();
    check.refused("a vote", &Mismatch::Incarnation { node_id: 2, recorded: 1, presented: 2 });
    check.refused("a vote", &Mismatch::Incarnation { node_id: 2, recorded: 1, presented: 2 });
    check.refused("an append", &Mismatch::Cluster { local: 1, peer: 2, peer_node: 2 });
    assert_eq!(check.refusals(), vec![("cluster_id", 1), ("incarnation", 2), ("node_id", 0)]);
}

#[test]
fn headers_round_trip_and_partial_ones_are_errors() {
    let mut headers = HeaderMap::new();
    assert_eq!(PeerIdentity::from_headers(&headers), Ok(None));
    let identity = peer(u64::MAX, 3, 0x0123_4567_89ab_cdef);
    identity.write_headers(&mut headers);
    assert_eq!(headers[INCARNATION_HEADER], "0123456789abcdef");
    assert_eq!(headers[MEMBERSHIP_HEADER], "3.40");
    assert_eq!(PeerIdentity::from_headers(&headers), Ok(Some(identity)));
    headers.insert(MEMBERSHIP_HEADER, "3".parse().expect("header"));
    assert!(PeerIdentity::from_headers(&headers).is_err());
    headers.remove(MEMBERSHIP_HEADER);
    let unmarked = PeerIdentity { membership: MembershipMark::default(), ..identity };
    assert_eq!(PeerIdentity::from_headers(&headers), Ok(Some(unmarked)), "no mark: the receiver judges");
    headers.remove(NODE_ID_HEADER);
    assert!(PeerIdentity::from_headers(&headers).is_err());
    headers.insert(NODE_ID_HEADER, "x".parse().expect("header"));
    assert!(PeerIdentity::from_headers(&headers).is_err());
}

async fn serve(router: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

fn vote_request() -> typ::VoteRequest {
    typ::VoteRequest::new(Vote::new(3, 1), Some(log_id(2, 1, 10)))
}

/// A stub peer that grants every vote and answers with `identity` (none if `None`), reporting
/// the identity each request carried.
async fn stub_peer(identity: Option<PeerIdentity>, seen: mpsc::UnboundedSender<Option<PeerIdentity>>) -> SocketAddr {
    let handler = move |headers: HeaderMap, body: Bytes| async move {
        seen.send(PeerIdentity::from_headers(&headers).expect("well-formed identity")).expect("test runs");
        let rpc: typ::VoteRequest = codec::decode(&body).expect("a VoteRequest body");
        let answer: Result<typ::VoteResponse, typ::RaftError> =
            Ok(typ::VoteResponse::new(rpc.vote, rpc.last_log_id, true));
        let mut response =
            ([(CONTENT_TYPE, "application/octet-stream")], codec::encode(&answer).expect("encode")).into_response();
        if let Some(identity) = identity {
            identity.write_headers(response.headers_mut());
        }
        response
    };
    serve(Router::new().route(crate::network::VOTE_PATH, post(handler))).await
}

async fn vote_from_node_one(
    addr: SocketAddr,
    target: Node,
    check: Arc<IdentityCheck>,
) -> Result<typ::VoteResponse, typ::RPCError> {
    let http = NetworkFactory::new(reqwest::Client::new(), None, check);
    let mut factory = crate::GuardedNetwork::new(http, None);
    let mut connection = factory.new_client(2, &Node::new(addr.to_string(), target.incarnation)).await;
    connection.vote(vote_request(), RPCOption::new(Duration::from_secs(10))).await
}

/// The client sends its identity, accepts the recorded member's answer, and discards the answer
/// of a node 2 with another disk as `Unreachable` (so openraft backs off and never counts it),
/// counting the refusal.
#[tokio::test]
async fn a_vote_granted_by_an_amnesiac_member_does_not_count() {
    let check = Arc::new(node_one());
    let (tx, mut rx) = mpsc::unbounded_channel();

    let genuine = stub_peer(Some(peer(CLUSTER, 2, 0x22)), tx.clone()).await;
    let granted = vote_from_node_one(genuine, Node::new("", 0x22), check.clone()).await.expect("granted");
    assert!(granted.vote_granted);
    assert_eq!(rx.recv().await, Some(Some(peer(CLUSTER, 1, 0x11))), "the request carries node 1's identity");

    let wiped = stub_peer(Some(peer(0, 2, 0x99)), tx.clone()).await;
    let err = vote_from_node_one(wiped, Node::new("", 0x22), check.clone()).await.expect_err("refused");
    assert!(matches!(err, RPCError::Unreachable(_)), "{err:?}");
    assert!(err.to_string().contains("incarnation"), "{err}");
    assert_eq!(check.refusals()[1], ("incarnation", 1));

    let other_cluster = stub_peer(Some(peer(0xc2, 2, 0x22)), tx.clone()).await;
    let err = vote_from_node_one(other_cluster, Node::new("", 0x22), check.clone()).await.expect_err("refused");
    assert!(err.to_string().contains("belongs to cluster 00000000000000c2"), "{err}");

    // A peer that sends no identity (not a leafraft node of this version) is not checked.
    let silent = stub_peer(None, tx).await;
    vote_from_node_one(silent, Node::new("", 0x22), check).await.expect("unchecked");
}

/// A peer's identity layer answering 409 makes the peer `Unreachable` for openraft, with its
/// reason in the error.
#[tokio::test]
async fn a_refusal_by_the_peer_is_unreachable() {
    let handler =
        || async { (StatusCode::CONFLICT, r#"{"error":{"code":"CLUSTER_MISMATCH","message":"node 1 belongs to X"}}"#) };
    let addr = serve(Router::new().route(crate::network::VOTE_PATH, post(handler))).await;
    let err = vote_from_node_one(addr, Node::new("", 0x22), Arc::new(node_one())).await.expect_err("refused");
    assert!(matches!(err, RPCError::Unreachable(_)), "{err:?}");
    assert!(err.to_string().contains("refused by the peer: node 1 belongs to X"), "{err}");
}
