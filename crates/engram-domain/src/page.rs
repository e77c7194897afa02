//! Lists: the `{"items", "next_cursor"}` page, limits, and opaque keyset cursors
//! (base64url of the last item's sort key; never an offset).

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde::{Serialize, de::DeserializeOwned};
use utoipa::ToSchema;

/// A list's query refused: a cursor no page gave, or a limit out of its range. The
/// message says what to fix; each door answers it as its own invalid request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidPage(pub String);

#[derive(Debug, Serialize, ToSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// Builds a page from `limit + 1` fetched rows: the extra row only says whether a
    /// next page exists, and the cursor is the key of the last row returned.
    pub fn from_rows<K: Serialize>(mut rows: Vec<T>, limit: i64, key: impl Fn(&T) -> K) -> Page<T> {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let next_cursor = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(|last| encode_cursor(&key(last)))
        } else {
            None
        };
        Page { items: rows, next_cursor }
    }
}

pub fn encode_cursor<K: Serialize>(key: &K) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(key).unwrap_or_default())
}

pub fn decode_cursor<K: DeserializeOwned>(cursor: Option<&str>) -> Result<Option<K>, InvalidPage> {
    let Some(cursor) = cursor else { return Ok(None) };
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .map(Some)
        .ok_or_else(|| InvalidPage("invalid cursor".to_owned()))
}

/// Checks `limit` against its maximum, applying the default when absent.
pub fn limit(value: Option<i64>, default: i64, max: i64) -> Result<i64, InvalidPage> {
    match value {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(InvalidPage(format!("limit must be 1-{max}, got {n}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_and_rejects_garbage() {
        let cursor = encode_cursor(&("agent-1", 42));
        let decoded: Option<(String, i64)> = decode_cursor(Some(&cursor)).unwrap();
        assert_eq!(decoded, Some(("agent-1".to_string(), 42)));
        assert!(decode_cursor::<(String, i64)>(Some("!!notbase64")).is_err());
        assert!(decode_cursor::<(String, i64)>(Some(&encode_cursor(&"just a string"))).is_err());
    }

    #[test]
    fn page_cursor_only_when_more_rows() {
        let page = Page::from_rows(vec![1, 2, 3], 2, |n| *n);
        assert_eq!(page.items, vec![1, 2]);
        assert_eq!(page.next_cursor, Some(encode_cursor(&2)));
        let last = Page::from_rows(vec![1, 2], 2, |n| *n);
        assert_eq!(last.next_cursor, None);
    }

    #[test]
    fn limits_are_bounded() {
        assert_eq!(limit(None, 50, 200).unwrap(), 50);
        assert!(limit(Some(0), 50, 200).is_err());
        assert!(limit(Some(201), 50, 200).is_err());
        assert_eq!(limit(Some(200), 50, 200).unwrap(), 200);
    }
}
