//! Claims that API Gateway's JWT authorizer checked (signature, issuer, audience, times and
//! the route's scopes), as the API function receives them: in the request context that
//! lambda_http puts in the request's extensions. A request without them was not authorized
//! (no authorizer on its route): it is refused, never trusted.
//!
//! API Gateway's authorizer accepts a token without `aud` whose `client_id` is the audience;
//! the local runner's verifier requires `aud`. So that a token means the same on both, the
//! function requires `aud` to name its audience too.

use lambda_http::request::RequestContext;

use super::{AuthError, CLIENT_CLAIM, Claims};

/// The authorizer's claims of a request, if API Gateway's JWT authorizer passed it and its
/// `aud` names `audience`.
pub fn claims(extensions: &axum::http::Extensions, audience: &str) -> Result<Claims, AuthError> {
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
    if !claim("aud").is_some_and(|aud| names(&aud, audience)) {
        return Err(AuthError::Unauthenticated(
            "the token's aud does not name this API".into(),
        ));
    }
    Ok(Claims {
        sub: claim("sub"),
        scope: claim("scope"),
        client_id: claim(CLIENT_CLAIM),
    })
}

/// Whether an `aud` claim as the authorizer passes it (one audience, or a list flattened to
/// text, `[a b]` or `["a","b"]`) names `audience`.
fn names(aud: &str, audience: &str) -> bool {
    aud.split(|c: char| c == '[' || c == ']' || c == ',' || c == '"' || c.is_whitespace())
        .any(|a| a == audience)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_audience_is_named_alone_or_in_a_list() {
        assert!(names("imgest", "imgest"));
        assert!(names("[other imgest]", "imgest"));
        assert!(names("[\"other\",\"imgest\"]", "imgest"));
        assert!(!names("imgest-staging", "imgest"));
        assert!(!names("", "imgest"));
        assert!(!names("[other]", "imgest"));
    }
}
