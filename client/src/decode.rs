//! Reading what the API answers: IDs travel as decimal strings (a JSON number loses precision
//! above 2^53 in many languages), and snowflake IDs can be taken apart locally once the layout is
//! known (`Client::workers` answers the cluster's layout).

use serde::Deserialize;
use serde::Deserializer;
use serde::Serializer;

use leafraft_ids::snowflake::Layout;
use leafraft_ids::snowflake::Parts;

use crate::ClientError;

/// An ID as the API writes it: a decimal string.
pub fn id(text: &str) -> Result<u64, ClientError> {
    text.parse().map_err(|_| ClientError::Transport(format!("not a decimal ID: {text:?}")))
}

/// Decimal-string IDs, in order.
pub fn ids<S: AsRef<str>>(texts: &[S]) -> Result<Vec<u64>, ClientError> {
    texts.iter().map(|text| id(text.as_ref())).collect()
}

/// A snowflake ID taken apart with the cluster's layout, without asking a server.
pub fn snowflake(layout: &Layout, id: u64) -> Parts {
    layout.decompose(id)
}

/// serde for a `u64` written as a decimal string (and read from a string or a number).
pub mod decimal {
    use super::*;

    pub fn serialize<S: Serializer>(value: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(value)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Text {
            Number(u64),
            String(String),
        }
        match Text::deserialize(deserializer)? {
            Text::Number(n) => Ok(n),
            Text::String(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// serde for an `Option<u64>` written as a decimal string or null.
pub mod decimal_option {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Option<u64>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => serializer.collect_str(value),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "decimal")] u64);
        Ok(Option::<Wrap>::deserialize(deserializer)?.map(|Wrap(n)| n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_from_decimal_strings_and_refuse_anything_else() {
        assert_eq!(id("18446744073709551615").ok(), Some(u64::MAX));
        assert!(id("-1").is_err());
        assert!(id("1e3").is_err());
        assert_eq!(ids(&["1", "2"]).ok(), Some(vec![1, 2]));
    }

    #[test]
    fn a_snowflake_id_comes_apart_into_what_composed_it() {
        let layout = Layout { epoch_ms: 1_288_834_974_657, time_bits: 41, worker_bits: 10, sequence_bits: 12 };
        let parts = Parts { timestamp_ms: 1_700_000_000_000, worker: 7, sequence: 42 };
        let composed = layout.compose(parts).expect("in range");
        assert_eq!(snowflake(&layout, composed), parts);
    }
}
