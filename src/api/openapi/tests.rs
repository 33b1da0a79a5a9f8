//! The OpenAPI document documents every routed path and method, and its schemas match the types.

use std::collections::BTreeSet;

use serde_json::Value;

use super::*;

const METHODS: [&str; 7] = ["get", "post", "put", "patch", "delete", "head", "options"];

/// `(method, path)` of every `.route(PATH, METHOD(handler)...)` in `src/api.rs` (also
/// `axum::routing::METHOD(...)` and chains like `get(a).post(b)`), `/raft/*` left out.
fn routes_in_router_source() -> BTreeSet<(String, String)> {
    let source = include_str!("../../api.rs");
    let mut routes = BTreeSet::new();
    let mut rest = source;
    while let Some(at) = rest.find(".route(") {
        rest = &rest[at + ".route(".len()..];
        // The call's arguments: up to the parenthesis that closes `.route(`.
        let mut depth = 1;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map_or(rest.len(), |(i, _)| i);
        let args = &rest[..end];
        let path = args.split('"').nth(1).unwrap_or_else(|| panic!("no path literal in .route({args})"));
        let handlers = &args[args.find(',').unwrap_or(args.len())..];
        let mut found = false;
        for (i, _) in handlers.match_indices('(') {
            let ident: String = handlers[..i]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if METHODS.contains(&ident.as_str()) {
                found = true;
                if !path.starts_with("/raft/") {
                    routes.insert((ident, path.to_string()));
                }
            }
        }
        assert!(found, "no method router in .route({args})");
    }
    routes
}

fn document_json() -> Value {
    serde_json::from_str(document()).expect("the document is JSON")
}

fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in METHODS {
            if item.get(method).is_some() {
                out.insert((method.to_string(), path.clone()));
            }
        }
    }
    out
}

#[test]
fn every_routed_path_and_method_is_documented_and_nothing_else() {
    let routed = routes_in_router_source();
    assert!(routed.len() >= 20, "the router parser found too little: {routed:?}");
    assert!(
        routed.contains(&("get".into(), "/v1/tags".into())) && routed.contains(&("post".into(), "/v1/tags".into()))
    );
    let documented = operations(&document_json());
    let undocumented: Vec<_> = routed.difference(&documented).collect();
    let unrouted: Vec<_> = documented.difference(&routed).collect();
    assert!(undocumented.is_empty(), "routes in src/api.rs missing from /openapi.json: {undocumented:?}");
    assert!(unrouted.is_empty(), "operations in /openapi.json that src/api.rs does not route: {unrouted:?}");
}

#[test]
fn raft_routes_are_left_out_and_said_to_be() {
    let doc = document_json();
    assert!(doc["paths"].as_object().unwrap().keys().all(|p| !p.starts_with("/raft")));
    assert!(doc["info"]["description"].as_str().unwrap().contains("/raft/*"));
}

#[test]
fn every_operation_has_a_success_answer_and_errors_use_the_error_body() {
    let doc = document_json();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap_or_else(|| panic!("{method} {path}: no responses"));
            assert!(responses.keys().any(|s| s.starts_with('2')), "{method} {path}: no 2xx answer");
            for (status, response) in responses {
                let json_error = response.pointer("/content/application~1json/schema/$ref");
                if status.starts_with('4') || status.starts_with('5') {
                    let leaf = path.starts_with("/api/") && ["500", "401", "403"].contains(&status.as_str());
                    assert!(
                        leaf || json_error == Some(&Value::from("#/components/schemas/ErrorBody")),
                        "{method} {path} {status}: error answers are ErrorBody: {response}"
                    );
                }
            }
            let http_method: axum::http::Method = method.to_uppercase().parse().expect("a method");
            let guarded = crate::api::auth::need(&http_method, path, path).is_some();
            let has_401 = responses.contains_key("401") && responses.contains_key("403");
            assert_eq!(guarded, has_401, "{method} {path}: routes that need a role (and only they) answer 401 and 403");
            assert_eq!(guarded, op.get("security").is_some(), "{method} {path}: routes that need a role name it");
        }
    }
}

/// One definition of the codes (`leafraft-codes`) serves the server, the client library and this
/// document: the server's `ErrorCode` (as the OpenAPI schema derives it from the enum), the
/// client's and the description's table all list exactly its codes, with its statuses.
#[test]
fn the_server_the_client_and_the_document_share_one_list_of_error_codes() {
    let doc = document_json();
    let schema: Vec<&str> = doc
        .pointer("/components/schemas/ErrorCode/enum")
        .and_then(Value::as_array)
        .expect("ErrorCode enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let defined: Vec<&str> = leafraft_codes::ALL.iter().map(|code| code.name).collect();
    assert_eq!(schema, defined, "the server's ErrorCode variants (in order) differ from leafraft_codes::ALL");
    let description = doc.pointer("/info/description").and_then(Value::as_str).expect("a description");
    assert!(description.contains(&leafraft_codes::markdown_table()), "the description lacks the error table");
    assert!(!description.contains("{ERROR_CODES}"));
    for code in leafraft_codes::ALL {
        let server: crate::error::ErrorCode = serde_json::from_value(Value::from(code.name)).expect("a server code");
        assert_eq!((server.as_str(), server.status().as_u16()), (code.name, code.status));
        let client = leafraft_client::ErrorCode::parse(code.name);
        assert_eq!(client.as_str(), code.name, "the client does not know {}", code.name);
        assert!(!matches!(client, leafraft_client::ErrorCode::Other(_)), "the client does not know {}", code.name);
        assert_eq!(client.is_transient(), server.status().as_u16() == 503, "{}", code.name);
    }
    let error = doc.pointer("/components/schemas/Error/properties").expect("Error properties");
    let fields: BTreeSet<&String> = error.as_object().unwrap().keys().collect();
    assert_eq!(fields, ["code".to_string(), "message".to_string()].iter().collect());
}

#[test]
fn the_layout_schema_mirrors_the_raft_type() {
    let leaf = leafraft_ids::snowflake::Layout::LEAF;
    let real = leafraft_state::records::snowflake_layout::serialize(&leaf, serde_json::value::Serializer).unwrap();
    let mirror: SnowflakeLayout = serde_json::from_value(real.clone()).expect("same fields");
    assert_eq!(serde_json::to_value(mirror).unwrap(), real);
}

#[test]
fn max_id_is_documented_as_number_or_string() {
    let doc = document_json();
    let create = doc.pointer("/components/schemas/CreateTag/properties/max_id").expect("CreateTag.max_id");
    assert!(create.to_string().contains("#/components/schemas/MaxId"), "{create}");
    let max_id = doc.pointer("/components/schemas/MaxId/oneOf").expect("MaxId is one of two");
    let types: Vec<&Value> = max_id.as_array().unwrap().iter().map(|s| &s["type"]).collect();
    assert_eq!(types, [&Value::from("integer"), &Value::from("string")], "{max_id}");
}

/// Every operation names the role the request gate asks of it, and none where a credential is
/// needed offers the empty alternative `{}` (which read as "authentication is optional").
#[test]
fn regression_openapi_marks_the_role_each_route_needs() {
    let document = document_json();
    let paths = document["paths"].as_object().expect("paths");
    let mut roles = BTreeSet::new();
    for (path, item) in paths {
        for (method, operation) in item.as_object().expect("a path item") {
            let http_method: axum::http::Method = method.to_uppercase().parse().expect("a method");
            let expected = match crate::api::auth::need(&http_method, path, path).map(|need| need.role) {
                Some(crate::config::credentials::Role::Admin) => serde_json::json!([{"admin": []}]),
                Some(crate::config::credentials::Role::Client) => serde_json::json!([{"client": []}, {"admin": []}]),
                _ => Value::Null,
            };
            let security = operation.get("security").cloned().unwrap_or(Value::Null);
            assert_eq!(security, expected, "{method} {path}");
            roles.insert(security.to_string());
        }
    }
    assert_eq!(roles.len(), 3, "open, admin and client routes are all there: {roles:?}");
    let schemes = &document["components"]["securitySchemes"];
    for scheme in ["admin", "client"] {
        assert_eq!(schemes[scheme]["scheme"], "bearer", "{scheme}: {schemes}");
    }
    for (method, path) in [("post", "/v1/tags"), ("get", "/v1/backup"), ("get", "/v1/segment/{tag}")] {
        assert!(paths[path][method]["security"].is_array(), "{method} {path} needs a role");
    }
}

/// `docs/api.md` is the contract in words: it has a `### \`METHOD /path\`` section for every
/// operation of the document and none for anything else, and names every error code.
#[test]
fn docs_api_md_lists_every_documented_operation() {
    let words = include_str!("../../../docs/api.md");
    let in_words: BTreeSet<(String, String)> = words
        .lines()
        .filter_map(|line| line.strip_prefix("### `")?.strip_suffix('`'))
        .filter_map(|operation| operation.split_once(' '))
        .map(|(method, path)| (method.to_lowercase(), path.to_string()))
        .collect();
    let doc = document_json();
    let mut in_document = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            in_document.insert((method.clone(), path.clone()));
        }
    }
    let missing: Vec<_> = in_document.difference(&in_words).collect();
    assert!(missing.is_empty(), "operations of /openapi.json without a section in docs/api.md: {missing:?}");
    let extra: Vec<_> = in_words.difference(&in_document).collect();
    assert!(extra.is_empty(), "sections of docs/api.md for operations /openapi.json does not have: {extra:?}");
    let codes = doc.pointer("/components/schemas/ErrorCode/enum").and_then(Value::as_array).expect("ErrorCode enum");
    let unnamed: Vec<&Value> =
        codes.iter().filter(|code| !words.contains(&format!("`{}`", code.as_str().unwrap_or("?")))).collect();
    assert!(unnamed.is_empty(), "error codes docs/api.md does not name: {unnamed:?}");
}
