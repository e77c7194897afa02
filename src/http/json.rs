//! JSON answers, written into a plain vector.
//!
//! axum's `Json` serialises into a `BytesMut` through its `io::Write` adapter: every
//! token serde writes (a quote, a key, a comma) is a call to `BufMut::put_slice` with
//! its own capacity check, which the compiler cannot fold into the serialiser's loop.
//! Written into a `Vec<u8>` the same bytes take about half the time: 12.9–13.2 µs
//! against 6.6–7.5 for an 8 KB answer of twenty facts in a scratch program, and
//! `put_slice` alone was 4.1 µs of a memory context's ~234 µs of server CPU in a profile
//! under load (docs/performance.md). The hot reads (the last messages, the memory
//! context, search) answer 5–15 KB.
//!
//! Every handler answers through it. Error bodies keep axum's `Json` (`crate::error` sits
//! below the doors, and errors are no hot path).

use axum::{
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use crate::error::ApiError;

/// A `200` (or, in a tuple, any status) whose body is `T` as JSON, like axum's `Json`.
#[derive(Debug)]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        match serde_json::to_vec(&self.0) {
            Ok(body) => ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response(),
            // Only a type whose `Serialize` fails (a map with non-string keys, say) gets
            // here: a bug, answered and logged as one.
            Err(error) => {
                ApiError::Internal(anyhow::Error::new(error).context("an answer could not be written as JSON"))
                    .into_response()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use axum::{body::to_bytes, http::StatusCode};

    use super::*;

    #[tokio::test]
    async fn answers_the_value_as_json_with_its_type() {
        let response = Json(serde_json::json!({"text": "a \"quoted\" line\n", "n": [1, 2]})).into_response();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
        assert_eq!(&body[..], br#"{"n":[1,2],"text":"a \"quoted\" line\n"}"#);
    }

    #[tokio::test]
    async fn a_value_json_cannot_hold_is_an_internal_error() {
        // JSON object keys are strings: serde_json refuses a map keyed by tuples.
        let response = Json(HashMap::from([((1, 2), "pair")])).into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "internal");
    }
}
