//! The table's stream, read as what the TTL cleanup needs: which image records DynamoDB's TTL
//! deleter removed. The trigger's filter passes only those; anything else reads as `None`.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::images::record_from_item;
use imgest_core::domain::ImageRecord;
use imgest_core::ports::StoreError;

/// Every record of a stream event by its sequence number: the image record it removed, `None`
/// when it is not the removal of an image record, or why its old image cannot be read.
pub fn removed_images(event: &Value) -> Vec<(String, Result<Option<ImageRecord>, StoreError>)> {
    let records = event
        .get("Records")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    records
        .iter()
        .map(|record| {
            let id = record["dynamodb"]["SequenceNumber"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (id, removed_image(record))
        })
        .collect()
}

fn removed_image(record: &Value) -> Result<Option<ImageRecord>, StoreError> {
    if record["eventName"] != "REMOVE" {
        return Ok(None);
    }
    let old = &record["dynamodb"]["OldImage"];
    let is_image = old["pk"]["S"]
        .as_str()
        .is_some_and(|pk| pk.starts_with("image#"));
    if !is_image {
        return Ok(None);
    }
    let item = item_from_json(old).ok_or_else(|| StoreError::Backend {
        message: "dynamodb stream: OldImage is not a DynamoDB item".into(),
        source: None,
    })?;
    record_from_item(&item).map(Some)
}

/// A stream image (DynamoDB's JSON: `{"attr": {"S": "..."}}`) as SDK attribute values.
fn item_from_json(value: &Value) -> Option<HashMap<String, AttributeValue>> {
    value
        .as_object()?
        .iter()
        .map(|(k, v)| Some((k.clone(), attribute_from_json(v)?)))
        .collect()
}

fn attribute_from_json(value: &Value) -> Option<AttributeValue> {
    let (tag, v) = value.as_object()?.iter().next()?;
    Some(match tag.as_str() {
        "S" => AttributeValue::S(v.as_str()?.to_owned()),
        "N" => AttributeValue::N(v.as_str()?.to_owned()),
        "BOOL" => AttributeValue::Bool(v.as_bool()?),
        "NULL" => AttributeValue::Null(true),
        "SS" => AttributeValue::Ss(
            v.as_array()?
                .iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<_>>()?,
        ),
        "NS" => AttributeValue::Ns(
            v.as_array()?
                .iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<_>>()?,
        ),
        "L" => AttributeValue::L(
            v.as_array()?
                .iter()
                .map(attribute_from_json)
                .collect::<Option<_>>()?,
        ),
        "M" => AttributeValue::M(item_from_json(v)?),
        // Binary attributes travel as base64 (an image's perceptual signature is one).
        "B" => AttributeValue::B(Blob::new(STANDARD.decode(v.as_str()?).ok()?)),
        "BS" => AttributeValue::Bs(
            v.as_array()?
                .iter()
                .map(|b| Some(Blob::new(STANDARD.decode(b.as_str()?).ok()?)))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

/// An item in DynamoDB's JSON form, as its stream carries it (`OldImage`): what
/// [`removed_images`] reads. `None` if it holds a type the stream form has no tag for here.
pub fn stream_json(item: &HashMap<String, AttributeValue>) -> Option<Value> {
    item.iter()
        .map(|(k, v)| Some((k.clone(), attribute_json(v)?)))
        .collect::<Option<serde_json::Map<_, _>>>()
        .map(Value::Object)
}

fn attribute_json(value: &AttributeValue) -> Option<Value> {
    let base64 = |b: &Blob| Value::from(STANDARD.encode(b.as_ref()));
    Some(match value {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(_) => json!({ "NULL": true }),
        AttributeValue::Ss(v) => json!({ "SS": v }),
        AttributeValue::Ns(v) => json!({ "NS": v }),
        AttributeValue::B(b) => json!({ "B": base64(b) }),
        AttributeValue::Bs(v) => json!({ "BS": v.iter().map(base64).collect::<Vec<_>>() }),
        AttributeValue::L(l) => {
            json!({ "L": l.iter().map(attribute_json).collect::<Option<Vec<_>>>()? })
        }
        AttributeValue::M(m) => json!({ "M": stream_json(m)? }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn stream_json_becomes_attribute_values() {
        let item = item_from_json(&serde_json::json!({
            "pk": {"S": "image#x"}, "n": {"N": "5"}, "l": {"L": [{"S": "a"}]}, "b": {"BOOL": true}
        }))
        .unwrap();
        assert_eq!(item["pk"], AttributeValue::S("image#x".into()));
        assert_eq!(item["n"], AttributeValue::N("5".into()));
        assert_eq!(
            item["l"],
            AttributeValue::L(vec![AttributeValue::S("a".into())])
        );
        assert!(item_from_json(&serde_json::json!({"x": {"Q": 1}})).is_none());
    }

    #[test]
    fn binary_attributes_cross_the_stream_form_both_ways() {
        let item: HashMap<String, AttributeValue> = [
            ("pk".to_owned(), AttributeValue::S("image#x".into())),
            (
                "sig".to_owned(),
                AttributeValue::B(Blob::new(vec![1, 100, 255])),
            ),
            (
                "set".to_owned(),
                AttributeValue::Bs(vec![Blob::new(vec![0]), Blob::new(vec![7, 8])]),
            ),
            (
                "m".to_owned(),
                AttributeValue::M([("n".to_owned(), AttributeValue::N("5".into()))].into()),
            ),
        ]
        .into();
        let json = stream_json(&item).unwrap();
        assert_eq!(json["sig"], serde_json::json!({"B": "AWT/"}));
        assert_eq!(item_from_json(&json).unwrap(), item);
        assert!(item_from_json(&serde_json::json!({"b": {"B": "not base64!"}})).is_none());
    }

    #[test]
    fn only_removals_of_image_records_are_read() {
        let event = serde_json::json!({"Records": [
            {"eventName": "MODIFY", "dynamodb": {"SequenceNumber": "1",
                "OldImage": {"pk": {"S": "image#x"}}}},
            {"eventName": "REMOVE", "dynamodb": {"SequenceNumber": "2",
                "OldImage": {"pk": {"S": "offer#o1"}}}},
            {"eventName": "REMOVE", "dynamodb": {"SequenceNumber": "3",
                "OldImage": {"pk": {"S": "image#0123"}, "x": {"Q": 1}}}},
        ]});
        let read = removed_images(&event);
        let ids: Vec<&str> = read.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["1", "2", "3"]);
        assert!(matches!(read[0].1, Ok(None)));
        assert!(matches!(read[1].1, Ok(None)));
        assert!(read[2].1.is_err(), "an unreadable image is an error");
        assert!(removed_images(&serde_json::json!({})).is_empty());
    }
}
