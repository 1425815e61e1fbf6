//! Claims that API Gateway's JWT authorizer checked (signature, issuer, audience, times and
//! the route's scopes), as the API function receives them: in the request context that
//! lambda_http puts in the request's extensions. A request without them was not authorized
//! (no authorizer on its route): it is refused, never trusted.

use lambda_http::request::RequestContext;

use super::{AuthError, Claims};

/// The authorizer's claims of a request, if API Gateway's JWT authorizer passed it.
pub fn claims(extensions: &axum::http::Extensions) -> Result<Claims, AuthError> {
    let jwt = match extensions.get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(context)) => context
            .authorizer
            .as_ref()
            .and_then(|authorizer| authorizer.jwt.as_ref()),
        _ => None,
    };
    let jwt = jwt.ok_or_else(|| {
        AuthError::Unauthenticated("no claims from API Gateway's JWT authorizer".into())
    })?;
    let claim = |name: &str| jwt.claims.get(name).cloned();
    Ok(Claims {
        sub: claim("sub"),
        scope: claim("scope"),
        client_id: claim("client_id"),
    })
}
