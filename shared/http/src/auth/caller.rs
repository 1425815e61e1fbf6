//! [`Caller`]: a request's identity, and the four decisions the routes make with it (who may
//! upload, act for a client, scrape the metrics, browse every image).

use super::{
    AuthError, CLIENT_CLAIM, Claims, METRICS_SCOPE, OFFERS_SCOPE, OPERATOR_SCOPE, UPLOAD_SCOPE,
};
use imgest_core::domain::{ClientId, Owner, Tenant};

/// The longest `sub` accepted (identity providers use a few dozen characters).
const MAX_SUBJECT: usize = 256;

/// Who is calling: in open mode nobody in particular (everything allowed), otherwise the
/// token's subject, scopes and client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(Identity);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Identity {
    Open,
    Token {
        owner: Owner,
        upload: bool,
        offers: bool,
        metrics: bool,
        operator: bool,
        client: Option<ClientId>,
    },
}

/// What an upload route knows of its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploader {
    /// Whose uploads these are (`None` in open mode: no owner, no per-caller limit).
    pub owner: Option<Owner>,
    /// The client an `imgest:offers` token acts for: near-duplicates its own offers link are
    /// not reported to it (`IMGEST_SIMILAR=report`).
    pub client: Option<ClientId>,
}

/// A caller that may read the metrics (which say nothing of any one tenant, but a lot about
/// the business's volume).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observer;

/// A caller that may browse every client's images (images are shared by content across
/// clients, so no seller or partner may).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operator;

/// Whose images a near-duplicate lookup may answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Viewer {
    /// Everyone's: the operator, or open mode.
    All,
    /// A seller's uploads and, with a client, the images its client's offers link.
    Own {
        owner: Owner,
        client: Option<ClientId>,
    },
}

/// What an offer or crawl route knows of its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partner {
    /// The namespace of the offers it may touch.
    pub tenant: Tenant,
}

impl Caller {
    /// Everyone, in open mode.
    pub fn open() -> Self {
        Self(Identity::Open)
    }

    /// The caller a token's claims describe (their signature, issuer, audience and times were
    /// checked before). A token without a usable `sub` is not a credential.
    pub fn from_claims(claims: &Claims) -> Result<Self, AuthError> {
        let sub = claims
            .sub
            .as_deref()
            .filter(|s| !s.is_empty() && s.len() <= MAX_SUBJECT)
            .ok_or_else(|| {
                AuthError::Unauthenticated(format!(
                    "the token needs a sub claim of 1 to {MAX_SUBJECT} characters"
                ))
            })?;
        let scopes: Vec<&str> = claims
            .scope
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        // A client claim that is not a client id is the token issuer's mistake: refused where a
        // client is needed rather than silently ignored.
        let client = match claims.client_id.as_deref() {
            None | Some("") => None,
            Some(raw) => Some(ClientId::parse(raw).map_err(|e| {
                AuthError::Forbidden(format!("the token's {CLIENT_CLAIM} is not usable: {e}"))
            })?),
        };
        Ok(Self(Identity::Token {
            owner: Owner::of_subject(sub),
            upload: scopes.contains(&UPLOAD_SCOPE),
            offers: scopes.contains(&OFFERS_SCOPE),
            metrics: scopes.contains(&METRICS_SCOPE),
            operator: scopes.contains(&OPERATOR_SCOPE),
            client,
        }))
    }

    /// Whether the caller holds one of `scopes` (open mode holds every scope): a route's
    /// scopes (see `routes`), checked before its handler runs.
    pub fn holds_any(&self, scopes: &[&str]) -> Result<(), AuthError> {
        let Identity::Token {
            upload,
            offers,
            metrics,
            operator,
            ..
        } = &self.0
        else {
            return Ok(());
        };
        let holds = |scope: &str| match scope {
            UPLOAD_SCOPE => *upload,
            OFFERS_SCOPE => *offers,
            METRICS_SCOPE => *metrics,
            OPERATOR_SCOPE => *operator,
            _ => false,
        };
        if scopes.iter().any(|s| holds(s)) {
            Ok(())
        } else {
            Err(AuthError::Forbidden(format!(
                "this route needs the {} scope",
                scopes.join(" or ")
            )))
        }
    }

    /// May upload photos and read images: `imgest:upload` or `imgest:offers`.
    pub fn uploader(&self) -> Result<Uploader, AuthError> {
        match &self.0 {
            Identity::Open => Ok(Uploader {
                owner: None,
                client: None,
            }),
            Identity::Token {
                owner,
                upload,
                offers,
                client,
                ..
            } if *upload || *offers => Ok(Uploader {
                owner: Some(owner.clone()),
                client: client.clone().filter(|_| *offers),
            }),
            Identity::Token { .. } => Err(AuthError::Forbidden(format!(
                "this route needs the {UPLOAD_SCOPE} or {OFFERS_SCOPE} scope"
            ))),
        }
    }

    /// May look up near-duplicates: `imgest:operator` among every image, `imgest:offers` among
    /// its client's and its own uploads, `imgest:upload` among its own uploads.
    pub fn viewer(&self) -> Result<Viewer, AuthError> {
        match &self.0 {
            Identity::Open | Identity::Token { operator: true, .. } => Ok(Viewer::All),
            Identity::Token {
                owner,
                upload,
                offers,
                client,
                ..
            } if *upload || *offers => Ok(Viewer::Own {
                owner: owner.clone(),
                client: client.clone().filter(|_| *offers),
            }),
            Identity::Token { .. } => Err(AuthError::Forbidden(format!(
                "this route needs the {UPLOAD_SCOPE}, {OFFERS_SCOPE} or {OPERATOR_SCOPE} scope"
            ))),
        }
    }

    /// May read the metrics: `imgest:metrics` (and no other scope grants it).
    pub fn observer(&self) -> Result<Observer, AuthError> {
        match &self.0 {
            Identity::Open | Identity::Token { metrics: true, .. } => Ok(Observer),
            Identity::Token { .. } => Err(AuthError::Forbidden(format!(
                "this route needs the {METRICS_SCOPE} scope"
            ))),
        }
    }

    /// May browse every client's images: `imgest:operator` (and no other scope grants it).
    pub fn operator(&self) -> Result<Operator, AuthError> {
        match &self.0 {
            Identity::Open | Identity::Token { operator: true, .. } => Ok(Operator),
            Identity::Token { .. } => Err(AuthError::Forbidden(format!(
                "this route needs the {OPERATOR_SCOPE} scope"
            ))),
        }
    }

    /// May touch offers and crawls: `imgest:offers` with an `imgest_client_id`, its own
    /// client's only.
    pub fn partner(&self) -> Result<Partner, AuthError> {
        match &self.0 {
            Identity::Open => Ok(Partner {
                tenant: Tenant::Shared,
            }),
            Identity::Token {
                offers: true,
                client: Some(client),
                ..
            } => Ok(Partner {
                tenant: Tenant::Client(client.clone()),
            }),
            Identity::Token { offers: true, .. } => Err(AuthError::Forbidden(format!(
                "an {OFFERS_SCOPE} token needs an {CLIENT_CLAIM} claim"
            ))),
            Identity::Token { .. } => Err(AuthError::Forbidden(format!(
                "this route needs the {OFFERS_SCOPE} scope"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn caller(sub: &str, scope: &str, client: Option<&str>) -> Result<Caller, AuthError> {
        Caller::from_claims(&Claims {
            sub: Some(sub.into()),
            scope: Some(scope.into()),
            client_id: client.map(Into::into),
        })
    }

    #[test]
    fn scopes_decide_what_a_caller_may_do() {
        let seller = caller("s1", "imgest:upload", None).unwrap();
        assert_eq!(
            seller.uploader().unwrap().owner,
            Some(Owner::of_subject("s1"))
        );
        assert!(matches!(seller.partner(), Err(AuthError::Forbidden(_))));

        let partner = caller("p1", "openid imgest:offers", Some("acme")).unwrap();
        assert!(partner.uploader().is_ok(), "partners may upload too");
        assert_eq!(
            partner.partner().unwrap().tenant,
            Tenant::Client(ClientId::parse("acme").unwrap())
        );

        let clientless = caller("p2", "imgest:offers", None).unwrap();
        assert!(
            matches!(clientless.partner(), Err(AuthError::Forbidden(m)) if m.contains("imgest_client_id"))
        );

        let nothing = caller("x", "openid profile", Some("acme")).unwrap();
        assert!(matches!(nothing.uploader(), Err(AuthError::Forbidden(_))));
        assert!(matches!(nothing.partner(), Err(AuthError::Forbidden(_))));

        assert!(partner.observer().is_err() && seller.observer().is_err());
        let scraper = caller("prometheus", "imgest:metrics", None).unwrap();
        assert!(scraper.observer().is_ok());
        assert!(scraper.uploader().is_err() && scraper.partner().is_err());
        assert!(scraper.operator().is_err() && partner.operator().is_err());
        let operator = caller("ops", "imgest:operator", None).unwrap();
        assert!(operator.operator().is_ok());
        assert!(operator.uploader().is_err() && operator.partner().is_err());
        assert!(operator.observer().is_err());

        // A scope is a whole word: no prefix or substring matches.
        let lookalike = caller("y", "imgest:uploads imgest:offersx", Some("acme")).unwrap();
        assert!(lookalike.uploader().is_err() && lookalike.partner().is_err());
    }

    #[test]
    fn open_mode_allows_everything_in_one_namespace() {
        let open = Caller::open();
        assert_eq!(open.uploader().unwrap().owner, None);
        assert_eq!(open.partner().unwrap().tenant, Tenant::Shared);
        assert!(open.observer().is_ok() && open.operator().is_ok());
    }

    #[test]
    fn unusable_claims_are_refused() {
        assert!(matches!(
            Caller::from_claims(&Claims::default()),
            Err(AuthError::Unauthenticated(_))
        ));
        assert!(matches!(
            caller(&"s".repeat(300), "imgest:upload", None),
            Err(AuthError::Unauthenticated(_))
        ));
        assert!(matches!(
            caller("p", "imgest:offers", Some("acme/evil")),
            Err(AuthError::Forbidden(_))
        ));
    }
}
