//! What a request carries, parsed: wrappers over axum's extractors so that their
//! rejections (malformed JSON, wrong content type, unknown fields, bad path or query
//! values, body too large) come back in the API's own error shape, and so that no text
//! with a NUL character gets in (`domain::nul`: both backends answer the same 400).

use std::{fmt, marker::PhantomData};

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Request},
    http::{HeaderMap, header, request::Parts},
};
use serde::{
    Deserialize, Deserializer,
    de::{DeserializeOwned, MapAccess, Visitor, value::MapAccessDeserializer},
};

use crate::{domain::nul, error::ApiError};

/// `Json<T>` with API errors. The body must be a JSON object, as every request body
/// of the spec is: serde would otherwise also read a struct from an array of its
/// fields in order (`[null, null]` as a patch that clears a title).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::UnsupportedMediaType);
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge("request body is too large".into())
            } else {
                ApiError::InvalidRequest(rejection.body_text())
            }
        })?;
        if nul::in_json(&bytes) {
            return Err(ApiError::invalid(nul::REFUSED));
        }
        let axum::Json(JsonObject(value)) = axum::Json::<JsonObject<T>>::from_bytes(&bytes)?;
        Ok(ApiJson(value))
    }
}

/// `application/json` or any `application/…+json`, as axum's `Json` accepts.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// `T` read from a JSON object only.
struct JsonObject<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for JsonObject<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        deserializer.deserialize_map(ObjectVisitor(PhantomData)).map(JsonObject)
    }
}

/// `Path<T>` with API errors.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        if parts.uri.path().contains("%00") {
            return Err(ApiError::invalid(nul::REFUSED));
        }
        let axum::extract::Path(value) = axum::extract::Path::<T>::from_request_parts(parts, state).await?;
        Ok(ApiPath(value))
    }
}

/// `Query<T>` with API errors.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        if parts.uri.query().is_some_and(|q| q.contains("%00")) {
            return Err(ApiError::invalid(nul::REFUSED));
        }
        let axum::extract::Query(value) = axum::extract::Query::<T>::from_request_parts(parts, state).await?;
        Ok(ApiQuery(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
            is_json(&headers)
        };
        assert!(with("application/json"));
        assert!(with("application/json; charset=utf-8"));
        assert!(with("Application/JSON"));
        assert!(with("application/merge-patch+json"));
        assert!(!with("text/plain"));
        assert!(!with("application/jsonx"));
        assert!(!is_json(&HeaderMap::new()));
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Patch {
        title: Option<String>,
        #[serde(default)]
        score: Option<f64>,
    }

    #[test]
    fn only_an_object_is_read_as_a_struct() {
        let read = |text: &str| serde_json::from_str::<JsonObject<Patch>>(text).map(|JsonObject(p)| p);
        let patch = read(r#"{"title": "t", "score": 0.5}"#).unwrap();
        assert_eq!((patch.title.as_deref(), patch.score), (Some("t"), Some(0.5)));
        for not_an_object in [r#"[null, null]"#, r#"["t", 0.5]"#, "null", "1", r#""t""#] {
            assert!(read(not_an_object).is_err(), "{not_an_object}");
        }
        assert!(read(r#"{"title": "t", "other": 1}"#).is_err(), "unknown fields are still refused");
        // Plain serde reads the array: what the wrapper exists to refuse.
        assert!(serde_json::from_str::<Patch>(r#"[null, null]"#).is_ok());
    }
}
