//! The stack's other edges, as the template writes them: browsers of other origins get no
//! CORS unless the operator names them, the API's access log says who called (never with the
//! token), and no function may download into private networks.

use imgest_http::auth::CLIENT_CLAIM;

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

#[test]
fn no_function_may_download_into_private_networks() {
    assert!(!super::text().contains("IMGEST_ALLOW_PRIVATE_NETWORKS"));
}
