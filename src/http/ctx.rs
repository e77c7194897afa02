//! The one extractor nearly every handler starts with: the app's state and a caller
//! holding the route's scope. One parameter instead of two, so that a handler's
//! signature says only what is its own: its scope, its path and its body.

use axum::{extract::FromRequestParts, http::request::Parts};

use crate::{
    auth::{Requirement, Scoped},
    error::ApiError,
    service::AppState,
};

/// The state and a caller holding the scope `R` (401 without a valid token, 403 without
/// the scope: checked before the path and body are read, see [`Scoped`]).
pub struct Ctx<R> {
    pub state: AppState,
    pub caller: Scoped<R>,
}

impl<R: Requirement> FromRequestParts<AppState> for Ctx<R> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Scoped::from_request_parts(parts, state).await?;
        Ok(Ctx { state: state.clone(), caller })
    }
}
