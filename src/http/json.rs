//! JSON answers, written into a plain vector: axum's `Json` writes through `BytesMut`'s
//! `io::Write` adapter, one capacity check per token, and a vector takes about half the
//! time (docs/decisions/json-answers.md).
//!
//! Every handler answers through it; the hot reads' answers (messages, facts, the memory
//! context, search) through [`Written`], which writes them without serde's call per
//! field (`domain::json_writer`). Error bodies keep axum's `Json` (`crate::error` sits
//! below the doors, and errors are no hot path).

use axum::{
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use crate::{
    domain::json_writer::{self, WriteJson},
    error::ApiError,
};

/// A `200` (or, in a tuple, any status) whose body is `T` as JSON, like axum's `Json`.
#[derive(Debug)]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        answer(serde_json::to_vec(&self.0))
    }
}

/// The answer with `body`, or the internal error it failed with: only a type whose
/// `Serialize` fails (a map with non-string keys, say) gets there, a bug, answered and
/// logged as one.
fn answer(body: serde_json::Result<Vec<u8>>) -> Response {
    match body {
        Ok(body) => ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response(),
        Err(error) => ApiError::Internal(anyhow::Error::new(error).context("an answer could not be written as JSON"))
            .into_response(),
    }
}

/// Like [`Json`] (a `200`, or in a tuple any status), for the answers that write
/// themselves (`domain::json_writer`): the hot reads, whose answers serde would write
/// field by field. The same bytes as [`Json`].
#[derive(Debug)]
pub struct Written<T>(pub T);

impl<T: WriteJson> IntoResponse for Written<T> {
    fn into_response(self) -> Response {
        answer(json_writer::to_vec(&self.0))
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
