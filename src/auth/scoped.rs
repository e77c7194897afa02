//! Scope requirements as extractors: a handler that takes `Scoped<MemoryWrite>` cannot
//! run for a caller without that scope, so no handler can forget the check. The check
//! runs right after the token's, before the path and body are read, so a caller without
//! the scope learns nothing about what it sent.

use std::{marker::PhantomData, ops::Deref};

use axum::{
    extract::{FromRef, FromRequestParts},
    http::request::Parts,
};

use super::{Caller, Guard, Scope};
use crate::error::ApiError;

/// A scope a route needs, as a type.
pub trait Requirement {
    const SCOPE: Scope;
}

/// Needs `memory:read`.
pub struct MemoryRead;
/// Needs `memory:write`.
pub struct MemoryWrite;
/// Needs `admin`.
pub struct Admin;
/// Needs `rgpd` (granted only by itself or `admin`).
pub struct Rgpd;

impl Requirement for MemoryRead {
    const SCOPE: Scope = Scope::MemoryRead;
}
impl Requirement for MemoryWrite {
    const SCOPE: Scope = Scope::MemoryWrite;
}
impl Requirement for Admin {
    const SCOPE: Scope = Scope::Admin;
}
impl Requirement for Rgpd {
    const SCOPE: Scope = Scope::Rgpd;
}

/// A verified caller holding the scope `R` requires (401 without a valid token, 403
/// without the scope). Derefs to the [`Caller`].
pub struct Scoped<R> {
    caller: Caller,
    requirement: PhantomData<R>,
}

impl<R> Deref for Scoped<R> {
    type Target = Caller;
    fn deref(&self) -> &Caller {
        &self.caller
    }
}

impl<S, R> FromRequestParts<S> for Scoped<R>
where
    S: Send + Sync,
    Guard: FromRef<S>,
    R: Requirement,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        caller.require(R::SCOPE)?;
        Ok(Scoped { caller, requirement: PhantomData })
    }
}
