//! Tokens already verified, so that a client sending the same token with every request
//! (every SDK and agent platform does) pays for its signature check and the parsing of
//! its claims once, not on each request: an RS256 check is tens of microseconds, and
//! even HS256 with its claims was about 2 % of a server's CPU under the memory context.
//!
//! Only a token that passed every check is kept, keyed by its whole text, and only until
//! its `exp`: past it the token goes through the full check again, which applies the
//! configured leeway exactly as before. A token cannot be revoked before its `exp` (the
//! tokens are stateless), so the cache grants nothing the check would not.

use std::{collections::HashMap, sync::Mutex};

use super::Caller;

/// Tokens kept at most; when full, the cache starts again empty (a few hundred bytes per
/// token, so at most about a megabyte). Far more than the distinct tokens a replica
/// sees within their lifetimes in any deployment we know of.
pub const CAPACITY: usize = 2_048;

/// Longest token kept: a larger one is checked on every request rather than held.
pub const MAX_TOKEN_BYTES: usize = 2_048;

#[derive(Debug, Default)]
pub struct VerifiedTokens {
    entries: Mutex<HashMap<Box<str>, (Caller, u64)>>,
}

impl VerifiedTokens {
    /// The caller of `token` if it was verified and `now` (seconds since the epoch) is
    /// before its `exp`.
    pub fn get(&self, token: &str, now: u64) -> Option<Caller> {
        let entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.get(token).filter(|(_, exp)| now < *exp).map(|(caller, _)| caller.clone())
    }

    /// Keeps the caller of a token that passed every check, until `exp`.
    pub fn insert(&self, token: &str, caller: &Caller, exp: u64, now: u64) {
        if token.len() > MAX_TOKEN_BYTES || now >= exp {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert(token.into(), (caller.clone(), exp));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().expect("lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::TenantId;

    fn caller(tenant: &str) -> Caller {
        Caller {
            tenant: TenantId::parse(tenant.to_owned()).expect("tenant"),
            sub: None,
            scopes: ["memory:read".to_owned()].into(),
            bound: None,
        }
    }

    #[test]
    fn a_kept_token_answers_with_its_own_caller_until_its_exp() {
        let tokens = VerifiedTokens::default();
        tokens.insert("token-a", &caller("acme"), 1_000, 10);
        tokens.insert("token-b", &caller("globex"), 2_000, 10);
        assert_eq!(tokens.get("token-a", 999).map(|c| c.tenant), Some(TenantId::parse("acme".into()).unwrap()));
        assert_eq!(tokens.get("token-b", 999).map(|c| c.tenant), Some(TenantId::parse("globex".into()).unwrap()));
        assert!(tokens.get("token-a", 1_000).is_none(), "at its exp a token is checked again");
        assert!(tokens.get("token-c", 10).is_none());
    }

    #[test]
    fn expired_and_oversized_tokens_are_not_kept() {
        let tokens = VerifiedTokens::default();
        tokens.insert("late", &caller("acme"), 100, 100);
        tokens.insert(&"x".repeat(MAX_TOKEN_BYTES + 1), &caller("acme"), 1_000, 10);
        assert_eq!(tokens.len(), 0);
    }

    #[test]
    fn the_cache_never_holds_more_than_its_capacity() {
        let tokens = VerifiedTokens::default();
        for i in 0..=CAPACITY {
            tokens.insert(&format!("token-{i}"), &caller("acme"), 1_000, 10);
        }
        assert!(tokens.len() <= CAPACITY);
        assert!(tokens.get(&format!("token-{CAPACITY}"), 10).is_some(), "the newest token is kept");
    }
}
