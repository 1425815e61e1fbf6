//! Attribute helpers: keys, typed reads of stored items (a malformed item is a
//! `StoreError::Backend`, never a panic) and an expression builder that names every attribute
//! and value by placeholder (so reserved words such as `state`, `size`, `ttl` or `value`
//! never clash with DynamoDB's grammar).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use imgest_core::domain::Timestamp;
use imgest_core::ports::StoreError;

pub(crate) type Item = HashMap<String, AttributeValue>;

pub(crate) const PK: &str = "pk";
pub(crate) const SK: &str = "sk";
/// DynamoDB's TTL attribute: epoch SECONDS.
pub(crate) const TTL: &str = "ttl";

pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(crate) fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub(crate) fn ms(t: Timestamp) -> AttributeValue {
    n(t.as_millis())
}

/// The TTL attribute for an instant: whole seconds, rounded UP so the deleter never removes
/// an item before its millisecond expiry.
pub(crate) fn ttl_secs(t: Timestamp) -> i64 {
    t.as_millis().saturating_add(999).div_euclid(1000)
}

/// The key of item `{kind}#{id}` / `{kind}`.
pub(crate) fn key(kind: &str, id: &str) -> Item {
    HashMap::from([
        (PK.to_owned(), s(format!("{kind}#{id}"))),
        (SK.to_owned(), s(kind)),
    ])
}

/// Typed reads of one stored item; errors name the item and the attribute.
pub(crate) struct Attrs<'a> {
    item: &'a Item,
    what: &'a str,
}

impl<'a> Attrs<'a> {
    /// `what` names the item in errors ("image 0cc1…").
    pub(crate) fn new(item: &'a Item, what: &'a str) -> Self {
        Self { item, what }
    }

    pub(crate) fn corrupt(&self, attr: &str, problem: &str) -> StoreError {
        StoreError::corrupt(format!(
            "dynamodb: {}: attribute {attr} {problem}",
            self.what
        ))
    }

    pub(crate) fn opt_s(&self, attr: &str) -> Result<Option<&'a str>, StoreError> {
        match self.item.get(attr) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::S(v)) => Ok(Some(v.as_str())),
            Some(_) => Err(self.corrupt(attr, "is not a string")),
        }
    }

    pub(crate) fn opt_b(&self, attr: &str) -> Result<Option<&'a [u8]>, StoreError> {
        match self.item.get(attr) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::B(v)) => Ok(Some(v.as_ref())),
            Some(_) => Err(self.corrupt(attr, "is not binary")),
        }
    }

    pub(crate) fn s(&self, attr: &str) -> Result<&'a str, StoreError> {
        self.opt_s(attr)?
            .ok_or_else(|| self.corrupt(attr, "is missing"))
    }

    pub(crate) fn opt_i64(&self, attr: &str) -> Result<Option<i64>, StoreError> {
        match self.item.get(attr) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::N(v)) => v
                .parse::<i64>()
                .map(Some)
                .map_err(|_| self.corrupt(attr, "is not a whole number")),
            Some(_) => Err(self.corrupt(attr, "is not a number")),
        }
    }

    pub(crate) fn i64(&self, attr: &str) -> Result<i64, StoreError> {
        self.opt_i64(attr)?
            .ok_or_else(|| self.corrupt(attr, "is missing"))
    }

    pub(crate) fn u32(&self, attr: &str) -> Result<u32, StoreError> {
        u32::try_from(self.i64(attr)?).map_err(|_| self.corrupt(attr, "is out of range"))
    }

    pub(crate) fn u64(&self, attr: &str) -> Result<u64, StoreError> {
        u64::try_from(self.i64(attr)?).map_err(|_| self.corrupt(attr, "is out of range"))
    }

    pub(crate) fn opt_time(&self, attr: &str) -> Result<Option<Timestamp>, StoreError> {
        Ok(self.opt_i64(attr)?.map(Timestamp::from_millis))
    }

    pub(crate) fn time(&self, attr: &str) -> Result<Timestamp, StoreError> {
        self.i64(attr).map(Timestamp::from_millis)
    }

    pub(crate) fn opt_bool(&self, attr: &str) -> Result<Option<bool>, StoreError> {
        match self.item.get(attr) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::Bool(v)) => Ok(Some(*v)),
            Some(_) => Err(self.corrupt(attr, "is not a boolean")),
        }
    }

    /// A list of strings (an absent list is empty).
    pub(crate) fn strings(&self, attr: &str) -> Result<Vec<&'a str>, StoreError> {
        match self.item.get(attr) {
            None | Some(AttributeValue::Null(_)) => Ok(Vec::new()),
            Some(AttributeValue::L(values)) => values
                .iter()
                .map(|v| match v {
                    AttributeValue::S(s) => Ok(s.as_str()),
                    _ => Err(self.corrupt(attr, "holds a non-string")),
                })
                .collect(),
            Some(_) => Err(self.corrupt(attr, "is not a list")),
        }
    }
}

/// The id part of an item's `pk` (`{kind}#{id}`), if the item is of that kind.
pub(crate) fn id_of<'a>(item: &'a Item, kind: &str) -> Option<&'a str> {
    match item.get(PK) {
        Some(AttributeValue::S(pk)) => pk
            .strip_prefix(kind)
            .and_then(|rest| rest.strip_prefix('#')),
        _ => None,
    }
}

/// Builds update and condition expressions with placeholders for every name and value.
#[derive(Debug, Default)]
pub(crate) struct Expr {
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
    sets: Vec<String>,
    adds: Vec<String>,
    removes: Vec<String>,
}

/// An expression ready to hand to a request builder.
#[derive(Debug)]
pub(crate) struct ExprParts {
    pub update: Option<String>,
    pub names: Option<HashMap<String, String>>,
    pub values: Option<HashMap<String, AttributeValue>>,
}

impl Expr {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The placeholder of attribute `attr` (`#n0`, …), the same one for every use.
    pub(crate) fn name(&mut self, attr: &str) -> String {
        if let Some((placeholder, _)) = self.names.iter().find(|(_, a)| a.as_str() == attr) {
            return placeholder.clone();
        }
        let placeholder = format!("#n{}", self.names.len());
        self.names.insert(placeholder.clone(), attr.to_owned());
        placeholder
    }

    /// A placeholder for `value` (`:v0`, …). Every placeholder must end up in an expression.
    pub(crate) fn value(&mut self, value: AttributeValue) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    /// `SET attr = value`.
    pub(crate) fn set(&mut self, attr: &str, value: AttributeValue) -> &mut Self {
        let (name, value) = (self.name(attr), self.value(value));
        self.sets.push(format!("{name} = {value}"));
        self
    }

    /// `SET attr = if_not_exists(attr, value)`: sets it only where it is absent.
    pub(crate) fn set_if_absent(&mut self, attr: &str, value: AttributeValue) -> &mut Self {
        let (name, value) = (self.name(attr), self.value(value));
        self.sets
            .push(format!("{name} = if_not_exists({name}, {value})"));
        self
    }

    /// `SET attr = attr + delta`.
    pub(crate) fn add_to(&mut self, attr: &str, delta: i64) -> &mut Self {
        let (name, value) = (self.name(attr), self.value(n(delta)));
        self.sets.push(format!("{name} = {name} + {value}"));
        self
    }

    /// `ADD attr delta`: an atomic increment that creates the attribute at `delta`. Its result
    /// does not depend on anything read before, so concurrent writers never conflict.
    pub(crate) fn add(&mut self, attr: &str, delta: i64) -> &mut Self {
        let (name, value) = (self.name(attr), self.value(n(delta)));
        self.adds.push(format!("{name} {value}"));
        self
    }

    /// `ADD attr value` for a set: adds its elements (none twice).
    pub(crate) fn add_elements(&mut self, attr: &str, value: AttributeValue) -> &mut Self {
        let (name, value) = (self.name(attr), self.value(value));
        self.adds.push(format!("{name} {value}"));
        self
    }

    /// `REMOVE attr`.
    pub(crate) fn remove(&mut self, attr: &str) -> &mut Self {
        let name = self.name(attr);
        self.removes.push(name);
        self
    }

    /// `attr = value` (for conditions).
    pub(crate) fn eq(&mut self, attr: &str, value: AttributeValue) -> String {
        self.cmp(attr, "=", value)
    }

    /// `attr {op} value` (for conditions).
    pub(crate) fn cmp(&mut self, attr: &str, op: &str, value: AttributeValue) -> String {
        let (name, value) = (self.name(attr), self.value(value));
        format!("{name} {op} {value}")
    }

    /// `begins_with(attr, prefix)` (for conditions and filters).
    pub(crate) fn begins_with(&mut self, attr: &str, prefix: &str) -> String {
        let (name, value) = (self.name(attr), self.value(s(prefix)));
        format!("begins_with({name}, {value})")
    }

    pub(crate) fn exists(&mut self, attr: &str) -> String {
        format!("attribute_exists({})", self.name(attr))
    }

    pub(crate) fn not_exists(&mut self, attr: &str) -> String {
        format!("attribute_not_exists({})", self.name(attr))
    }

    pub(crate) fn finish(self) -> ExprParts {
        let mut update = String::new();
        if !self.sets.is_empty() {
            update.push_str("SET ");
            update.push_str(&self.sets.join(", "));
        }
        if !self.adds.is_empty() {
            if !update.is_empty() {
                update.push(' ');
            }
            update.push_str("ADD ");
            update.push_str(&self.adds.join(", "));
        }
        if !self.removes.is_empty() {
            if !update.is_empty() {
                update.push(' ');
            }
            update.push_str("REMOVE ");
            update.push_str(&self.removes.join(", "));
        }
        ExprParts {
            update: (!update.is_empty()).then_some(update),
            names: (!self.names.is_empty()).then_some(self.names),
            values: (!self.values.is_empty()).then_some(self.values),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn ttl_rounds_up_to_whole_seconds() {
        assert_eq!(ttl_secs(Timestamp::from_millis(1_000)), 1);
        assert_eq!(ttl_secs(Timestamp::from_millis(1_001)), 2);
        assert_eq!(ttl_secs(Timestamp::from_millis(0)), 0);
    }

    #[test]
    fn expressions_use_one_placeholder_per_name() {
        let mut e = Expr::new();
        e.set("state", s("ready"))
            .add_to("link_count", 1)
            .set_if_absent("gc_at", n(5))
            .remove("ttl");
        let cond = e.eq("state", s("processing"));
        let prefix = e.begins_with("pk", "rec#crawl#");
        let parts = e.finish();
        assert_eq!(
            parts.update.as_deref(),
            Some("SET #n0 = :v0, #n1 = #n1 + :v1, #n2 = if_not_exists(#n2, :v2) REMOVE #n3")
        );
        assert_eq!(cond, "#n0 = :v3");
        assert_eq!(prefix, "begins_with(#n4, :v4)");
        assert_eq!(parts.names.unwrap().len(), 5);
        assert_eq!(parts.values.unwrap().len(), 5);
        assert!(Expr::new().finish().update.is_none());
        let mut e = Expr::new();
        e.add("g", 3).set("ttl", n(9)).add("h", -1).remove("x");
        assert_eq!(
            e.finish().update.as_deref(),
            Some("SET #n1 = :v1 ADD #n0 :v0, #n2 :v2 REMOVE #n3")
        );
    }

    #[test]
    fn malformed_items_are_errors_not_panics() {
        let item: Item = HashMap::from([
            ("a".to_owned(), n(5)),
            ("b".to_owned(), AttributeValue::N("x".into())),
            ("c".to_owned(), AttributeValue::L(vec![s("x"), n(1)])),
            (PK.to_owned(), s("image#abc")),
        ]);
        let attrs = Attrs::new(&item, "test");
        assert_eq!(attrs.i64("a").unwrap(), 5);
        assert!(attrs.s("a").is_err());
        assert!(attrs.i64("b").is_err());
        assert!(attrs.i64("missing").is_err());
        assert_eq!(attrs.opt_i64("missing").unwrap(), None);
        assert!(attrs.strings("c").is_err());
        assert_eq!(id_of(&item, "image"), Some("abc"));
        assert_eq!(id_of(&item, "offer"), None);
    }
}
