//! The API's routes, declared once: each operation's method, path, the scopes that may call it
//! (any one of them; none: no credential) and where it is served. Everything else follows
//! from this list:
//!
//! - the router serves exactly these operations (`router.rs`, which maps each to its handler
//!   and checks its scopes before the handler runs);
//! - each operation's security requirements in the OpenAPI document are set from it
//!   (`openapi.rs`; its tests hold the document and the router to each other);
//! - the SAM template's HTTP API events (the routes API Gateway passes to the API function,
//!   and the scopes its JWT authorizer requires) are [`template_events`]: a test holds
//!   `template.yaml` to them (`IMGEST_BLESS=1` rewrites its block), so a route the function
//!   serves is routed on AWS, and nothing is routed that it does not serve.
//!
//! Scopes decide who may call a route; what a caller may touch there (whose uploads, which
//! client's offers) is decided by the route's extractor (`auth::Caller`).

use std::fmt::Write as _;

use crate::auth::{METRICS_SCOPE, OFFERS_SCOPE, OPERATOR_SCOPE, UPLOAD_SCOPE};

/// An operation of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Health,
    OpenApi,
    UploadImage,
    KnownImages,
    GetImage,
    SimilarImages,
    EraseImage,
    CreateUpload,
    GetUpload,
    PutUploadBody,
    SetOfferPhotos,
    GetOfferPhotos,
    DeleteOffer,
    Crawl,
    GetCrawl,
    ListCrawls,
    Files,
    Metrics,
    BrowseImages,
    PurgeImage,
    ErasureStatus,
    RegisterWebhook,
    GetWebhook,
    RemoveWebhook,
    RotateWebhookSecret,
    Page,
    PageAsset,
}

/// An HTTP method a route takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    Get,
    Put,
    Post,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Put => "PUT",
            Self::Post => "POST",
            Self::Delete => "DELETE",
        }
    }
}

/// Who serves a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// The API function behind API Gateway and the local runner.
    Everywhere,
    /// Only the local runner (its files, its page, its metrics, its presigned uploads' target).
    LocalRunner,
}

/// One operation's route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub op: Op,
    pub method: Verb,
    /// The path, in axum's syntax (`{param}`, `{*rest}` for the rest of the path).
    pub path: &'static str,
    /// The scopes that may call it, any one of them; empty: no credential needed.
    pub scopes: &'static [&'static str],
    pub served: Served,
}

/// Sellers' browsers and partners' backends alike.
const UPLOADERS: &[&str] = &[UPLOAD_SCOPE, OFFERS_SCOPE];
const PARTNERS: &[&str] = &[OFFERS_SCOPE];

impl Op {
    /// Every operation, in the order the template lists them.
    pub const ALL: [Op; 27] = [
        Op::Health,
        Op::OpenApi,
        Op::UploadImage,
        Op::KnownImages,
        Op::GetImage,
        Op::SimilarImages,
        Op::EraseImage,
        Op::CreateUpload,
        Op::GetUpload,
        Op::PutUploadBody,
        Op::SetOfferPhotos,
        Op::GetOfferPhotos,
        Op::DeleteOffer,
        Op::Crawl,
        Op::GetCrawl,
        Op::ListCrawls,
        Op::Files,
        Op::Metrics,
        Op::BrowseImages,
        Op::PurgeImage,
        Op::ErasureStatus,
        Op::RegisterWebhook,
        Op::GetWebhook,
        Op::RemoveWebhook,
        Op::RotateWebhookSecret,
        Op::Page,
        Op::PageAsset,
    ];

    /// The operation's route.
    pub const fn route(self) -> Route {
        use Served::{Everywhere, LocalRunner};
        use Verb::{Delete, Get, Post, Put};
        let (method, path, scopes, served): (Verb, &str, &[&str], Served) = match self {
            Op::Health => (Get, "/healthz", &[], Everywhere),
            Op::OpenApi => (Get, crate::openapi::PATH, &[], Everywhere),
            Op::UploadImage => (Post, "/v1/images", UPLOADERS, Everywhere),
            Op::KnownImages => (Post, "/v1/images/known", UPLOADERS, Everywhere),
            Op::GetImage => (Get, "/v1/images/{image_id}", UPLOADERS, Everywhere),
            Op::SimilarImages => (
                Get,
                "/v1/images/{image_id}/similar",
                &[UPLOAD_SCOPE, OFFERS_SCOPE, OPERATOR_SCOPE],
                Everywhere,
            ),
            Op::EraseImage => (Delete, "/v1/images/{image_id}", UPLOADERS, Everywhere),
            Op::CreateUpload => (Post, "/v1/uploads", UPLOADERS, Everywhere),
            Op::GetUpload => (Get, "/v1/uploads/{upload_id}", UPLOADERS, Everywhere),
            Op::PutUploadBody => (Put, "/v1/uploads/{upload_id}/body", UPLOADERS, LocalRunner),
            Op::SetOfferPhotos => (Put, "/v1/offers/{offer_id}/photos", PARTNERS, Everywhere),
            Op::GetOfferPhotos => (Get, "/v1/offers/{offer_id}/photos", PARTNERS, Everywhere),
            Op::DeleteOffer => (Delete, "/v1/offers/{offer_id}", PARTNERS, Everywhere),
            Op::Crawl => (Post, "/v1/crawl", PARTNERS, Everywhere),
            Op::GetCrawl => (Get, "/v1/offers/{offer_id}/crawl", PARTNERS, Everywhere),
            Op::ListCrawls => (Get, "/v1/crawls", PARTNERS, Everywhere),
            Op::Files => (Get, "/files/{*key}", &[], LocalRunner),
            Op::Metrics => (Get, crate::scrape::PATH, &[METRICS_SCOPE], LocalRunner),
            Op::BrowseImages => (Get, "/v1/operator/images", &[OPERATOR_SCOPE], LocalRunner),
            Op::PurgeImage => (
                Post,
                "/v1/operator/erasures",
                &[OPERATOR_SCOPE],
                LocalRunner,
            ),
            Op::ErasureStatus => (
                Get,
                "/v1/operator/erasures/{image_id}",
                &[OPERATOR_SCOPE],
                LocalRunner,
            ),
            Op::RegisterWebhook => (
                Put,
                "/v1/operator/webhooks/{client_id}",
                &[OPERATOR_SCOPE],
                LocalRunner,
            ),
            Op::GetWebhook => (
                Get,
                "/v1/operator/webhooks/{client_id}",
                &[OPERATOR_SCOPE],
                LocalRunner,
            ),
            Op::RemoveWebhook => (
                Delete,
                "/v1/operator/webhooks/{client_id}",
                &[OPERATOR_SCOPE],
                LocalRunner,
            ),
            Op::RotateWebhookSecret => (
                Post,
                "/v1/operator/webhooks/{client_id}/rotate",
                &[OPERATOR_SCOPE],
                LocalRunner,
            ),
            Op::Page => (Get, "/", &[], LocalRunner),
            Op::PageAsset => (Get, "/page/{file}", &[], LocalRunner),
        };
        Route {
            op: self,
            method,
            path,
            scopes,
            served,
        }
    }

    /// The name of its event in the SAM template (a CloudFormation logical id).
    pub fn event_name(self) -> String {
        format!("{self:?}")
    }
}

/// The routes `local` (the local runner) or the API function serves.
pub fn served(local: bool) -> impl Iterator<Item = Route> {
    Op::ALL
        .into_iter()
        .map(Op::route)
        .filter(move |r| local || r.served == Served::Everywhere)
}

/// The first line of the template's generated block of API events.
pub const TEMPLATE_BEGIN: &str = "        # BEGIN routes: generated from shared/http/src/routes.rs; rewrite with IMGEST_BLESS=1 cargo test --workspace --test e2e -- template::routes";
/// Its last line.
pub const TEMPLATE_END: &str = "        # END routes";

/// The API function's `Events` in the SAM template: one `HttpApi` event per route it serves,
/// behind the JWT authorizer with the route's scopes (or no authorizer for a route without),
/// between [`TEMPLATE_BEGIN`] and [`TEMPLATE_END`] (both included).
pub fn template_events() -> String {
    let mut out = format!("{TEMPLATE_BEGIN}\n");
    for route in served(false) {
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "        {name}:\n          Type: HttpApi\n          Properties:\n            ApiId: !Ref HttpApi\n            Method: {method}\n            Path: {path}\n            Auth:\n",
            name = route.op.event_name(),
            method = route.method.as_str(),
            path = route.path,
        );
        if route.scopes.is_empty() {
            out.push_str("              Authorizer: NONE\n");
        } else {
            out.push_str(
                "              Authorizer: TokenAuthorizer\n              AuthorizationScopes:\n",
            );
            for scope in route.scopes {
                let _ = writeln!(out, "                - {scope}");
            }
        }
    }
    out.push_str(TEMPLATE_END);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn each_operation_has_one_method_and_path_and_no_other_has_the_same() {
        let mut seen = HashSet::new();
        for route in Op::ALL.map(Op::route) {
            assert!(
                seen.insert((route.method, route.path)),
                "{} {} twice",
                route.method.as_str(),
                route.path
            );
            // API Gateway's paths cannot take the rest of a path the way axum's `{*rest}` does.
            if route.path.contains("{*") {
                assert_eq!(route.served, Served::LocalRunner, "{}", route.path);
            }
            // Under /v1, every route but the document needs a credential.
            if route.path.starts_with("/v1/") && route.op != Op::OpenApi {
                assert!(!route.scopes.is_empty(), "{} is open", route.path);
            }
        }
        assert_eq!(seen.len(), Op::ALL.len());
    }

    #[test]
    fn the_template_events_name_each_served_route_with_its_scopes() {
        let events = template_events();
        assert!(events.contains(
            "        KnownImages:\n          Type: HttpApi\n          Properties:\n            ApiId: !Ref HttpApi\n            Method: POST\n            Path: /v1/images/known\n            Auth:\n              Authorizer: TokenAuthorizer\n              AuthorizationScopes:\n                - imgest:upload\n                - imgest:offers\n"
        ), "{events}");
        assert!(events.contains("            Path: /v1/openapi.json\n            Auth:\n              Authorizer: NONE\n"));
        assert!(
            !events.contains("/files/"),
            "local-only routes are not routed on AWS"
        );
    }
}
