//! Whose things are whose: offers belong to a client ([`OfferKey`]: an offer id within a
//! [`Tenant`]); presigned uploads to the caller that started them ([`Owner`]). Images are
//! shared by content and belong to nobody.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{ClientId, IdError, OfferId};

/// The namespace an offer id lives in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Tenant {
    /// One namespace for everyone: open mode (no identity, a loopback runner or
    /// `IMGEST_AUTH=off`), where every caller may do everything.
    Shared,
    /// A client's own offers: two clients may both have an offer `o1`.
    Client(ClientId),
}

impl Tenant {
    /// The client, if the namespace is one.
    pub fn client(&self) -> Option<&ClientId> {
        match self {
            Self::Shared => None,
            Self::Client(c) => Some(c),
        }
    }
}

/// An offer as stored: its id within a tenant. Its string form (storage keys, records) is the
/// offer id in the shared namespace and `{client}/{offer}` in a client's; neither id may
/// contain `/`, so the form is unambiguous.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OfferKey {
    tenant: Tenant,
    id: OfferId,
}

impl OfferKey {
    pub fn new(tenant: Tenant, id: OfferId) -> Self {
        Self { tenant, id }
    }

    /// An offer of the shared namespace.
    pub fn shared(id: OfferId) -> Self {
        Self::new(Tenant::Shared, id)
    }

    /// Reads the string form back.
    pub fn parse(s: &str) -> Result<Self, IdError> {
        match s.split_once('/') {
            None => Ok(Self::shared(OfferId::parse(s)?)),
            Some((client, id)) => Ok(Self::new(
                Tenant::Client(ClientId::parse(client)?),
                OfferId::parse(id)?,
            )),
        }
    }

    pub fn tenant(&self) -> &Tenant {
        &self.tenant
    }

    /// The id the marketplace knows the offer by (what the API shows).
    pub fn id(&self) -> &OfferId {
        &self.id
    }
}

impl fmt::Display for OfferKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tenant {
            Tenant::Shared => f.write_str(self.id.as_str()),
            Tenant::Client(c) => write!(f, "{}/{}", c.as_str(), self.id.as_str()),
        }
    }
}

impl TryFrom<String> for OfferKey {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<OfferKey> for String {
    fn from(k: OfferKey) -> Self {
        k.to_string()
    }
}

/// Who started a presigned upload: the MD5 of the token's `sub` (fixed length and free of the
/// subject's own characters, so it fits any storage key). Another caller reads it as absent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Owner(String);

impl Owner {
    /// The owner a token's subject names.
    pub fn of_subject(sub: &str) -> Self {
        use md5::{Digest, Md5};
        Self(hex::encode(Md5::digest(sub.as_bytes())))
    }

    /// Whose uploads open mode's are (no token: one owner for every caller). No token's
    /// subject names it: a subject is never empty.
    pub fn open() -> Self {
        Self::of_subject("")
    }

    /// Reads a stored owner back (32 lowercase hex characters).
    pub fn parse(s: &str) -> Option<Self> {
        (s.len() == 32
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Owner {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s).ok_or_else(|| format!("{s:?} is not an owner (32 lowercase hex)"))
    }
}

impl From<Owner> for String {
    fn from(o: Owner) -> Self {
        o.0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn offer_keys_read_back_and_keep_tenants_apart() {
        let o1 = OfferId::parse("o1").unwrap();
        let acme = OfferKey::new(Tenant::Client(ClientId::parse("acme").unwrap()), o1.clone());
        let globex = OfferKey::new(
            Tenant::Client(ClientId::parse("globex").unwrap()),
            o1.clone(),
        );
        let shared = OfferKey::shared(o1.clone());
        assert_eq!(acme.to_string(), "acme/o1");
        assert_eq!(shared.to_string(), "o1");
        assert_ne!(acme, globex);
        for key in [&acme, &globex, &shared] {
            assert_eq!(&OfferKey::parse(&key.to_string()).unwrap(), key);
            assert_eq!(key.id(), &o1);
        }
        let json = serde_json::to_string(&acme).unwrap();
        assert_eq!(json, "\"acme/o1\"");
        assert_eq!(serde_json::from_str::<OfferKey>(&json).unwrap(), acme);
        for bad in ["", "a/b/c", "/o1", "acme/", "a b/o1"] {
            assert!(OfferKey::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn owners_are_fixed_length_digests_of_the_subject() {
        let a = Owner::of_subject("seller-1");
        assert_eq!(a.as_str().len(), 32);
        assert_eq!(a, Owner::of_subject("seller-1"));
        assert_ne!(a, Owner::of_subject("seller-2"));
        assert_eq!(Owner::parse(a.as_str()), Some(a));
        assert_eq!(Owner::parse("not hex"), None);
    }
}
