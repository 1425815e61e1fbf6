//! The API's OpenAPI 3.1 document, generated from the code: the operations from the handlers'
//! `#[utoipa::path]` annotations, the bodies from the JSON types' `ToSchema` derives, the error
//! kinds from [`KINDS`](super::error::KINDS). Served, built once, at `GET /v1/openapi.json`
//! without a credential. The tests below fail when a route of the router is missing here or a
//! documented one is not served.
//!
//! What comes from the route list or the middleware rather than the handler is added here:
//! each operation's security requirements (its scopes, from [`routes`](super::routes)), 401
//! and 403 on every operation that has some, 500 and 503 on every operation that reaches
//! storage.
//!
//! The local runner's own routes (`GET /files/{key}`, `PUT /v1/uploads/{upload_id}/body`) are
//! described too, tagged `local runner`: the API function behind API Gateway answers them
//! `route_not_found` (there the CDN serves files and S3 takes presigned uploads).

use std::sync::LazyLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{Object, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, HeaderBuilder, Ref, RefOr};
use utoipa::{Modify, OpenApi, ToSchema};

pub(super) use super::error::ErrorBody;
use super::routes::Verb;
use super::{
    browse, crawl, erasures, files, images, offers, page, router, scrape, similar, uploads,
    webhooks,
};

/// Where the document is served.
pub const PATH: &str = "/v1/openapi.json";

/// The name of the security scheme the operations require.
const BEARER: &str = "bearer";

/// A `multipart/form-data` upload: the photo is the part named `file` (other parts are
/// skipped). Only its schema is used: the handler reads the form part by part, as it streams.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct UploadForm {
    #[schema(value_type = String, content_media_type = "application/octet-stream")]
    file: Vec<u8>,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "imgest",
        description = "Photo ingest for classifieds: upload photos (or have offers' photo URLs crawled), get them deduplicated and resized once, link them to offers.\n\n\
Every `/v1` operation but this document's needs `Authorization: Bearer <JWT>` (see the `bearer` scheme for the scopes). \
Every error answers `{\"error\": {\"kind\", \"message\"}}` (5xx answers add `request_id`); each operation lists the kinds it answers. \
A path no route serves answers 404 `route_not_found`, a method a path does not take 405 `method_not_allowed`. \
A local runner without token checks answers only to its own address: another `Host` is 421 `misdirected_request`, and a change requested from another site's page (`Origin`, `Sec-Fetch-Site`) 403 `forbidden`. \
The 400 kinds `invalid_client_id` and `invalid_id` are reserved: no operation answers them today (an invalid `client_id` in a body is `invalid_body`).",
    ),
    paths(
        router::healthz,
        document,
        images::upload,
        images::known,
        images::get,
        similar::get,
        erasures::erase_upload,
        uploads::create,
        uploads::get,
        uploads::put_body,
        offers::put_photos,
        offers::get_photos,
        offers::delete,
        crawl::post,
        crawl::get,
        crawl::list,
        files::get,
        scrape::get,
        browse::list,
        erasures::purge,
        erasures::status,
        webhooks::register,
        webhooks::get,
        webhooks::remove,
        webhooks::rotate,
        page::index,
        page::asset,
    ),
    components(schemas(ErrorBody)),
    modifiers(&Shared),
    tags(
        (name = "images", description = "Photos uploaded through the API."),
        (name = "uploads", description = "Presigned uploads: the browser sends the photo straight to storage."),
        (name = "offers", description = "Offers' photos, per partner (`client_id`)."),
        (name = "crawls", description = "Offers' photos downloaded from their URLs."),
        (name = "meta", description = "The health check and this document."),
        (name = "local runner", description = "Served by the local runner only (`imgest serve`); on AWS the CDN serves files and S3 takes presigned uploads."),
    ),
)]
struct ApiDoc;

/// The document, as served.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    // Serialising a document of strings and maps cannot fail; if it ever did, the route would
    // answer an empty document and the tests (which parse it) would say so.
    ApiDoc::openapi().to_json().unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot serialise the OpenAPI document");
        String::from("{}")
    })
});

/// The OpenAPI document as JSON (what `GET /v1/openapi.json` answers).
pub fn document_json() -> &'static str {
    DOCUMENT.as_str()
}

/// The OpenAPI document
///
/// This document: OpenAPI 3.1, generated from the code. No credential.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    tag = "meta",
    operation_id = "openapi",
    responses((status = 200, description = "The document.", body = serde_json::Value)),
)]
pub(super) async fn document() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        document_json(),
    )
}

/// What the middleware and the storage add to the handlers' operations (see the module doc),
/// and the security scheme.
struct Shared;

impl Modify for Shared {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A JWT from the marketplace's identity provider (RS256 or ES256), with `sub` and a space-separated `scope`. \
Scopes: `imgest:upload` (sellers' browsers: upload photos, read images and their own uploads), `imgest:offers` \
(partners' backends: everything `imgest:upload` may do, and their own client's offers and crawls, which also needs an `imgest_client_id` claim; an identity provider's own `client_id` claim confers nothing), \
`imgest:metrics` (the operator's scraper: the local runner's `/metrics`, and nothing else) \
and `imgest:operator` (the operator: the local runner's browse of every client's images, and nothing else). \
Each operation's security requirements list the scopes that allow it (alternatives). A missing or invalid token answers 401 \
`unauthenticated` (one answer, whatever check failed); a valid one without the scope (or, for offers and crawls, without `imgest_client_id`) 403 `forbidden`.",
                    ))
                    .build(),
            ),
        );
        let shared = [
            (
                "Unauthenticated",
                error_response(
                    "`unauthenticated`: no bearer token, or one that is not valid (signature, issuer, audience, times, `sub`); every such answer is the same.",
                    "unauthenticated",
                    super::error::UNAUTHENTICATED,
                    None,
                )
                .header(
                    "WWW-Authenticate",
                    HeaderBuilder::new()
                        .schema(Some(Object::with_type(Type::String)))
                        .description(Some("`Bearer realm=\"imgest\"`"))
                        .build(),
                ),
            ),
            (
                "Forbidden",
                error_response(
                    "`forbidden`: the token lacks the operation's scope (or, for offers and crawls, a usable `imgest_client_id` claim).",
                    "forbidden",
                    "this route needs the imgest:offers scope",
                    None,
                ),
            ),
            (
                "Internal",
                error_response(
                    "`internal`: the server failed; what went wrong is in its log, under `request_id`.",
                    "internal",
                    "the request failed on the server; its id is 5f0c2a9e7b3d4a61",
                    Some("5f0c2a9e7b3d4a61"),
                ),
            ),
            (
                "Unavailable",
                error_response(
                    "`storage_unavailable`, `conflict`: storage is briefly unavailable, or a concurrent write won; try again (see `Retry-After`).",
                    "storage_unavailable",
                    "the request failed on the server; its id is 5f0c2a9e7b3d4a61",
                    Some("5f0c2a9e7b3d4a61"),
                )
                .header("Retry-After", retry_after()),
            ),
        ];
        for (name, response) in shared {
            components
                .responses
                .insert(name.to_owned(), RefOr::T(response.build()));
        }
        for route in super::routes::served(true) {
            let Some(item) = openapi.paths.paths.get_mut(&documented(route.path)) else {
                continue;
            };
            let operation = match route.method {
                Verb::Get => &mut item.get,
                Verb::Put => &mut item.put,
                Verb::Post => &mut item.post,
                Verb::Delete => &mut item.delete,
            };
            if let Some(operation) = operation {
                // Alternatives: any one of the scopes allows the operation.
                operation.security = (!route.scopes.is_empty()).then(|| {
                    route
                        .scopes
                        .iter()
                        .map(|scope| SecurityRequirement::new(BEARER, [*scope]))
                        .collect()
                });
            }
        }
        for (path, item) in openapi.paths.paths.iter_mut() {
            for operation in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
            ]
            .into_iter()
            .flatten()
            {
                add_shared_responses(path, operation);
            }
        }
    }
}

/// A route's path as the document writes it (`{*key}` is `{key}`).
fn documented(path: &str) -> String {
    path.replace("{*", "{")
}

/// 401 and 403 where a credential is needed; 500 and 503 where storage is reached (every
/// operation but the health check and this document). A handler's own answer for a status
/// (its 403 or 503 kinds) stays.
fn add_shared_responses(path: &str, operation: &mut Operation) {
    let responses = &mut operation.responses.responses;
    let mut add = |status: &str, name: &str| {
        responses
            .entry(status.to_owned())
            .or_insert_with(|| RefOr::Ref(Ref::from_response_name(name)));
    };
    if operation.security.as_ref().is_some_and(|s| !s.is_empty()) {
        add("401", "Unauthenticated");
        add("403", "Forbidden");
    }
    if path != "/healthz" && path != PATH {
        add("500", "Internal");
        add("503", "Unavailable");
    }
}

/// An error answer of `kind`, with an example.
fn error_response(
    description: &str,
    kind: &'static str,
    message: &str,
    request_id: Option<&str>,
) -> ResponseBuilder {
    let example = ErrorBody::new(kind, message.to_owned(), request_id.map(str::to_owned));
    ResponseBuilder::new().description(description).content(
        "application/json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("ErrorBody")))
            .example(serde_json::to_value(example).ok())
            .build(),
    )
}

fn retry_after() -> utoipa::openapi::Header {
    HeaderBuilder::new()
        .schema(Some(Object::with_type(Type::Integer)))
        .description(Some("Seconds to wait before trying again"))
        .build()
}

/// The `{offer_id}` of the offer and crawl routes, as the document describes it.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // Read by the derive only: the handlers parse the path themselves.
pub(super) struct OfferIdParam {
    /// The offer's id, in the token's client's namespace (1 to 128 of letters, digits, `.`,
    /// `_`, `:`, `-`).
    #[param(pattern = "^[A-Za-z0-9._:-]{1,128}$", example = "car-1")]
    offer_id: String,
}

/// The `{upload_id}` of the upload routes, as the document describes it.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // Read by the derive only: the handlers parse the path themselves.
pub(super) struct UploadIdParam {
    /// The upload's id (from `POST /v1/uploads`).
    #[param(
        pattern = "^[0-9a-f]{32}$",
        example = "9f86d081884c7d659a2feaa0c55ad015"
    )]
    upload_id: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::{BTreeSet, HashMap};
    use std::sync::Arc;
    use std::time::Duration;

    use axum::body::Body;
    use axum::http::{Method, Request, StatusCode};
    use serde_json::Value;
    use tower::ServiceExt;

    use super::super::error::KINDS;
    use super::super::{ApiState, Edge, router};
    use super::*;
    use crate::auth::{Authenticator, JwtVerifier, LocalIssuer, TokenSpec};
    use imgest_core::ports::SystemClock;
    use imgest_crawl::{Crawler, Processing};
    use imgest_settings::Settings;

    /// The methods a route could take (HEAD is GET's, which axum answers for every GET route).
    const METHODS: [Method; 6] = [
        Method::GET,
        Method::PUT,
        Method::POST,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
    ];

    fn document() -> Value {
        serde_json::from_str(document_json()).unwrap()
    }

    /// An API over a fresh embedded backend in `dir`, checking callers with `auth`.
    async fn state(dir: &std::path::Path, auth: Authenticator) -> ApiState {
        let vars = HashMap::from([("IMGEST_DATA_DIR".to_owned(), dir.display().to_string())]);
        let settings = Settings::from_map(&vars).unwrap();
        let ports = imgest_embedded::ports(dir, "http://127.0.0.1", Arc::new(SystemClock))
            .await
            .unwrap();
        let service = Arc::new(imgest_flows::configure::service(ports, &settings));
        let crawler = Arc::new(Crawler::new(
            Arc::clone(&service),
            settings.crawl.clone(),
            Processing::Inline,
        ));
        ApiState::new(service, crawler, "http://127.0.0.1/files", auth)
    }

    /// `method path` on `app` with no body and no credential: the status and the error kind.
    async fn call(app: &axum::Router, method: &Method, path: &str) -> (StatusCode, String) {
        let request = Request::builder()
            .method(method.clone())
            .uri(path)
            .body(Body::empty())
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let kind = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| v["error"]["kind"].as_str().map(str::to_owned))
            .unwrap_or_default();
        (status, kind)
    }

    /// A path to request for a route's path: each parameter a plausible value.
    fn concrete(path: &str) -> String {
        let mut out = String::new();
        let mut rest = path;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            out.push('x');
            let close = rest[open..].find('}').unwrap();
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn the_document_is_openapi_3_1_with_a_bearer_scheme() {
        let doc = document();
        let version = doc["openapi"].as_str().unwrap();
        assert!(version.starts_with("3.1."), "{version}");
        let scheme = &doc["components"]["securitySchemes"][BEARER];
        assert_eq!(
            (scheme["type"].as_str(), scheme["scheme"].as_str()),
            (Some("http"), Some("bearer"))
        );
        assert_eq!(scheme["bearerFormat"], "JWT");
    }

    /// Every (method, path) the local runner's router serves is documented, and every
    /// documented one is served: each route's path is requested with every method, and what
    /// answers neither `route_not_found` nor `method_not_allowed` is served.
    #[tokio::test]
    async fn every_served_route_is_documented_and_every_documented_one_is_served() {
        let dir = tempfile::tempdir().unwrap();
        let app = router(
            state(dir.path(), Authenticator::Open).await,
            Edge::LocalRunner,
        );
        let mut served = BTreeSet::new();
        for (route, _) in router::routes(Edge::LocalRunner) {
            let path = route.path;
            for method in &METHODS {
                let (status, kind) = call(&app, method, &concrete(path)).await;
                if kind != "route_not_found" && kind != "method_not_allowed" {
                    assert!(
                        !status.is_server_error(),
                        "{method} {path}: {status} {kind}"
                    );
                    served.insert((method.as_str().to_owned(), documented(path)));
                }
            }
        }
        let doc = document();
        let mut described = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                let method = method.to_ascii_uppercase();
                if METHODS.iter().any(|m| m.as_str() == method) {
                    described.insert((method, path.clone()));
                }
            }
        }
        assert_eq!(served, described);
    }

    /// The API function's router serves the same routes less the local runner's own, which
    /// the document tags `local runner`.
    #[test]
    fn the_local_runner_only_routes_are_tagged_so() {
        let lambda: BTreeSet<String> = router::routes(Edge::Lambda)
            .into_iter()
            .map(|(r, _)| documented(r.path))
            .collect();
        let doc = document();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let local_only = operation["tags"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t == "local runner");
                assert_eq!(local_only, !lambda.contains(path), "{method} {path}");
            }
        }
    }

    /// Each error response names its kinds in backticks: each is a kind the API answers with
    /// that status, and every kind is named by some operation or by the document's
    /// description (the router's own, and those kept for compatibility).
    #[test]
    fn error_responses_name_real_kinds_and_every_kind_is_named() {
        let doc = document();
        let shared = &doc["components"]["responses"];
        let mut named = BTreeSet::new();
        for item in doc["paths"].as_object().unwrap().values() {
            for operation in item.as_object().unwrap().values() {
                for (status, response) in operation["responses"].as_object().unwrap() {
                    let response = match response["$ref"].as_str() {
                        Some(r) => &shared[r.rsplit('/').next().unwrap()],
                        None => response,
                    };
                    let status: u16 = status.parse().unwrap();
                    if status < 400 {
                        continue;
                    }
                    let description = response["description"].as_str().unwrap();
                    // Backticked words that are kinds (others are claims, fields, headers).
                    let kinds: Vec<&str> = description
                        .split('`')
                        .skip(1)
                        .step_by(2)
                        .filter(|k| KINDS.iter().any(|(_, kinds)| kinds.contains(k)))
                        .collect();
                    assert!(!kinds.is_empty(), "{status}: {description}");
                    let known = KINDS.iter().find(|(s, _)| *s == status).unwrap().1;
                    for kind in kinds {
                        assert!(known.contains(&kind), "{status} {kind} is not in KINDS");
                        named.insert(kind);
                    }
                }
            }
        }
        let description = doc["info"]["description"].as_str().unwrap();
        for (_, kinds) in KINDS {
            for kind in *kinds {
                assert!(
                    named.contains(kind) || description.contains(&format!("`{kind}`")),
                    "no operation names {kind}"
                );
            }
        }
    }

    /// The document is served without a credential by a router that checks tokens; every
    /// other `/v1` route still answers 401 without one.
    #[tokio::test]
    async fn only_the_document_is_open_under_v1() {
        let dir = tempfile::tempdir().unwrap();
        let issuer = LocalIssuer::es256("https://id.example", "imgest").unwrap();
        let jwks = dir.path().join("jwks.json");
        issuer.write_jwks(&jwks).unwrap();
        let verifier = JwtVerifier::open(&jwks, issuer.issuer(), issuer.audience()).unwrap();
        let data = dir.path().join("data");
        let app = router(
            state(&data, Authenticator::Jwt(Arc::new(verifier))).await,
            Edge::LocalRunner,
        );

        let request = Request::get(PATH).body(Body::empty()).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(bytes, document_json().as_bytes());
        // A body sent with it is never read: 64 MiB of it changes nothing (the answer is the
        // one static document, whoever asks).
        let hostile = Request::get(PATH)
            .body(Body::from(vec![b'x'; 64 << 20]))
            .unwrap();
        let response = app.clone().oneshot(hostile).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(bytes, document_json().as_bytes());

        let doc = document();
        for (path, item) in doc["paths"].as_object().unwrap() {
            if !path.starts_with("/v1/") || path == PATH {
                continue;
            }
            for method in item.as_object().unwrap().keys() {
                let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).unwrap();
                let (status, kind) = call(&app, &method, &concrete(path)).await;
                assert_eq!(
                    (status, kind.as_str()),
                    (StatusCode::UNAUTHORIZED, "unauthenticated"),
                    "{method} {path}"
                );
            }
        }
        // A path beside the document's is not the document's.
        let (status, _) = call(&app, &Method::GET, "/v1/openapi.json/x").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);

        // With a token, the same routes answer past authentication.
        let token = issuer
            .token(&TokenSpec {
                sub: "seller-1",
                scope: "imgest:upload",
                client_id: None,
                valid_for: Duration::from_secs(60),
            })
            .unwrap();
        let request = Request::get("/v1/images/x")
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    }
}
