//! Wrappers over axum's extractors so that their rejections (malformed JSON, wrong
//! content type, unknown fields, bad path or query values, body too large) come back in
//! the API's own error shape.

use axum::{
    extract::{FromRequest, FromRequestParts, Request},
    http::request::Parts,
};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// `Json<T>` with API errors.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let axum::Json(value) = axum::Json::<T>::from_request(req, state).await?;
        Ok(ApiJson(value))
    }
}

/// `Path<T>` with API errors.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(value) = axum::extract::Path::<T>::from_request_parts(parts, state).await?;
        Ok(ApiPath(value))
    }
}

/// `Query<T>` with API errors.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Query(value) = axum::extract::Query::<T>::from_request_parts(parts, state).await?;
        Ok(ApiQuery(value))
    }
}
