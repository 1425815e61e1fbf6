//! DynamoDB's on-demand capacity rules: how large an item is, and how many read and write
//! units a request of a given size consumes. DynamoDB bills by these units, not by requests,
//! and the emulator does not compute them, so the cost benchmark does.

use serde_json::Value;

/// The size DynamoDB bills for an item given in its JSON form (`{"name": {"S": "..."}}`):
/// attribute names plus values, with DynamoDB's per-type sizes.
pub fn item_size(item: &Value) -> u64 {
    item.as_object()
        .map(|attrs| {
            attrs
                .iter()
                .map(|(name, value)| name.len() as u64 + value_size(value))
                .sum()
        })
        .unwrap_or(0)
}

fn value_size(value: &Value) -> u64 {
    let Some((tag, v)) = value.as_object().and_then(|o| o.iter().next()) else {
        return 0;
    };
    match tag.as_str() {
        "S" => v.as_str().map_or(0, |s| s.len() as u64),
        "N" => v.as_str().map_or(0, number_size),
        // Binary travels base64-encoded; the item holds the decoded bytes.
        "B" => v.as_str().map_or(0, |s| (s.len() as u64 * 3) / 4),
        "BOOL" | "NULL" => 1,
        "SS" => strings(v).map(|s| s.len() as u64).sum(),
        "NS" => strings(v).map(number_size).sum(),
        "BS" => strings(v).map(|s| (s.len() as u64 * 3) / 4).sum(),
        // Documents: 3 bytes of overhead plus 1 byte per element.
        "L" => {
            3 + v
                .as_array()
                .map_or(0, |l| l.iter().map(|e| value_size(e) + 1).sum())
        }
        "M" => {
            3 + v.as_object().map_or(0, |m| {
                m.iter()
                    .map(|(k, e)| k.len() as u64 + value_size(e) + 1)
                    .sum()
            })
        }
        _ => 0,
    }
}

fn strings(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

/// About one byte per two significant digits, plus one.
fn number_size(n: &str) -> u64 {
    let digits = n
        .trim_start_matches('-')
        .chars()
        .filter(char::is_ascii_digit)
        .collect::<String>();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len() as u64;
    significant.div_ceil(2) + 1
}

/// Write units for one item write: 1 per KB of the larger of the item before and after, at
/// least 1 (a write whose condition fails still pays).
pub fn write_units(before: u64, after: u64) -> f64 {
    before.max(after).div_ceil(1024).max(1) as f64
}

/// Read units for reading `bytes` in one request: 1 per 4 KB (at least 1), half that when
/// eventually consistent.
pub fn read_units(bytes: u64, consistent: bool) -> f64 {
    let units = bytes.div_ceil(4096).max(1) as f64;
    if consistent { units } else { units / 2.0 }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn item_size_follows_dynamodb_rules() {
        let item = json!({
            "pk": {"S": "image#abc"},           // 2 + 9
            "n": {"N": "12345"},                // 1 + 4
            "ok": {"BOOL": true},               // 2 + 1
            "m": {"M": {"a": {"S": "xy"}}},     // 1 + 3 + (1 + 2 + 1)
            "l": {"L": [{"N": "7"}]},           // 1 + 3 + (2 + 1)
        });
        assert_eq!(item_size(&item), 11 + 5 + 3 + 8 + 7);
    }

    #[test]
    fn units_round_up_per_kilobyte_and_per_four_kilobytes() {
        assert_eq!(write_units(0, 10), 1.0);
        assert_eq!(write_units(3000, 1025), 3.0);
        assert_eq!(read_units(4097, true), 2.0);
        assert_eq!(read_units(10, false), 0.5);
    }
}
