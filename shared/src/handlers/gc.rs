//! The `gc` function: DynamoDB stream records of image records that DynamoDB's TTL deleter
//! removed (the trigger's filter passes only those). Each removal deletes the files of the
//! removed generation, unless a record of that generation exists again.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::Value;

use super::batch::{BatchResponse, ItemError, run_batch};
use crate::adapters::dynamodb::image_record_from_item;
use crate::flows::Service;

/// Handles one stream batch; failures are reported per sequence number.
pub async fn handle(service: &Service, event: Value) -> BatchResponse {
    let records = event
        .get("Records")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let items = records
        .into_iter()
        .map(|r| {
            let id = r["dynamodb"]["SequenceNumber"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (id, r)
        })
        .collect();
    run_batch(items, |record| async move {
        if record["eventName"] != "REMOVE" {
            return Ok(());
        }
        let old = &record["dynamodb"]["OldImage"];
        let is_image = old["pk"]["S"]
            .as_str()
            .is_some_and(|pk| pk.starts_with("image#"));
        if !is_image {
            return Ok(());
        }
        let item = item_from_json(old)
            .ok_or_else(|| ItemError::Unusable("OldImage is not a DynamoDB item".into()))?;
        let image =
            image_record_from_item(&item).map_err(|e| ItemError::Unusable(e.to_string()))?;
        service.collect_removed(&image).await?;
        Ok(())
    })
    .await
}

/// A stream image (DynamoDB's JSON: `{"attr": {"S": "..."}}`) as SDK attribute values.
pub fn item_from_json(value: &Value) -> Option<HashMap<String, AttributeValue>> {
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
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
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
}
