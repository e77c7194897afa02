//! Scope requirements as extractors: a handler that takes `Scoped<MemoryWrite>` cannot
//! run for a caller without that scope, so no handler can forget the check. The check
//! runs right after the token's, before the path and body are read, so a caller without
//! the scope learns nothing about what it sent.
//!
//! A user-bound caller is confined here too, once for every route: the only routes it
//! may use are those whose path names both the agent and the user (`{agent_id}` and
//! `{external_ref}`), and only with its own. Routes that find their agent or user in a
//! body, a query or a stored row (conversations, jobs, receipts, lists, consent and
//! erasure, which span every agent) answer 403, so no handler has a check to forget.

use std::{marker::PhantomData, ops::Deref};

use axum::{
    extract::{FromRef, FromRequestParts, RawPathParams},
    http::request::Parts,
};

use super::{Caller, Guard, OUTSIDE_BINDING, Refused, Scope};
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
pub struct Gdpr;

impl Requirement for MemoryRead {
    const SCOPE: Scope = Scope::MemoryRead;
}
impl Requirement for MemoryWrite {
    const SCOPE: Scope = Scope::MemoryWrite;
}
impl Requirement for Admin {
    const SCOPE: Scope = Scope::Admin;
}
impl Requirement for Gdpr {
    const SCOPE: Scope = Scope::Gdpr;
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
        if caller.bound.is_some() {
            confine_path(&caller, parts).await?;
        }
        Ok(Scoped { caller, requirement: PhantomData })
    }
}

/// Lets a bound caller through only to a route whose path names its own agent and user.
async fn confine_path(caller: &Caller, parts: &mut Parts) -> Result<(), Refused> {
    // No parameters at all (or one that is not UTF-8, which cannot be the caller's own)
    // names nobody: refused like any route that does not name both.
    let params = RawPathParams::from_request_parts(parts, &()).await.ok();
    let named = |key: &str| params.iter().flatten().find(|(k, _)| *k == key).map(|(_, v)| v);
    match (named("agent_id"), named("external_ref")) {
        (Some(agent), Some(user)) => caller.confine(Some(agent), Some(user)),
        _ => Err(Refused::Forbidden(OUTSIDE_BINDING.into())),
    }
}
