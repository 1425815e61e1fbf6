//! The stack's other edges, as the template writes them: browsers of other origins get no
//! CORS unless the operator names them, the API's access log says who called (never with the
//! token), and no function, as deployed, may download into private networks.

use std::sync::Arc;
use std::time::Duration;

use imgest_crawl::{Crawler, Processing};
use imgest_http::auth::CLIENT_CLAIM;
use imgest_settings::Settings;

use super::permissions::PERMISSIONS;
use crate::support::TestApp;

#[test]
fn cors_is_closed_unless_the_operator_names_origins() {
    let template = super::text();
    let parameter = template
        .split("\n  CorsAllowedOrigins:\n")
        .nth(1)
        .unwrap_or_default();
    let default = parameter
        .lines()
        .find_map(|l| l.trim().strip_prefix("Default: "))
        .unwrap_or_default();
    assert_eq!(default, "\"\"", "no origin by default");
    // Both CORS configurations (the API's, the bucket's) exist only with origins.
    assert_eq!(template.matches("CorsConfiguration: !If\n").count(), 2);
    assert_eq!(
        template.matches("CorsConfiguration:").count(),
        2,
        "no CORS configuration outside the condition"
    );
}

#[test]
fn the_api_access_log_names_the_caller_and_never_the_token() {
    let template = super::text();
    let format = template
        .lines()
        .skip_while(|l| l.trim() != "AccessLogSettings:")
        .find_map(|l| l.trim().strip_prefix("Format: "))
        .unwrap_or_else(|| panic!("the HTTP API has no access log format"));
    let format: serde_json::Value =
        serde_json::from_str(format.trim_matches('\'')).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(format["sub"], "$context.authorizer.claims.sub");
    assert_eq!(
        format["client"],
        format!("$context.authorizer.claims.{CLIENT_CLAIM}")
    );
    assert!(format["requestId"].is_string() && format["status"].is_string());
    let text = format.to_string().to_ascii_lowercase();
    assert!(
        !text.contains("header") && !text.contains("authorization") && !text.contains("token"),
        "{text}"
    );
}

/// Each function as the template deploys it (every parameter at its default) starts on Lambda,
/// and its downloads refuse loopback: a crawl request naming the machine's own addresses
/// reaches nothing (a downloader without the guard would try to connect and be refused by
/// the closed port instead).
#[tokio::test]
async fn no_function_may_download_into_private_networks() {
    let app = TestApp::start().await;
    let functions: Vec<&str> = PERMISSIONS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| name.contains("Function"))
        .collect();
    // Every function the template deploys (the state machine is no function).
    let deployed = super::text()
        .matches("    Type: AWS::Serverless::Function\n")
        .count();
    assert_eq!(functions.len(), deployed, "{functions:?}");
    for function in functions {
        let env = super::environment(function);
        let settings = Settings::from_map(&env)
            .unwrap_or_else(|e| panic!("{function} does not start as deployed: {e}"));
        settings
            .refuse_on_lambda(true)
            .unwrap_or_else(|e| panic!("{function} does not start on Lambda: {e}"));
        imgest_lambda::refuse_open(&settings)
            .unwrap_or_else(|e| panic!("{function} does not start on Lambda: {e}"));
        let crawler = Crawler::new(
            Arc::clone(&app.service),
            settings.crawl.clone(),
            Processing::Inline,
        );
        let downloader = crawler.downloader().unwrap();
        for url in [
            "http://127.0.0.1/photo.jpg",
            "http://localhost/photo.jpg",
            "http://[::1]/photo.jpg",
            "http://2130706433/photo.jpg",
        ] {
            let url = reqwest::Url::parse(url).unwrap();
            let refused = downloader
                .download(&url, Duration::from_secs(5), None, None)
                .await
                .map(|_| ())
                .unwrap_err();
            assert_eq!(
                refused.kind_str(),
                "forbidden_address",
                "{function}: {url}: {refused}"
            );
        }
    }
}
