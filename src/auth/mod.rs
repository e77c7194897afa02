//! Bearer tokens: verification with one pinned algorithm, the `Caller` extractor that
//! every protected handler takes, scopes, user-bound tokens, and signing for `engram token`.

use std::{collections::HashSet, sync::Arc, time::Duration};

use axum::{
    extract::{FromRef, FromRequestParts},
    http::request::Parts,
};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::{
    config::{CoreConfig, JwtAlgorithm, MIN_SECRET_BYTES, check_secret},
    domain::{
        ids::{AgentId, ExternalRef, TenantId},
        owner::Owner,
    },
    error::ApiError,
};

pub mod rate_limit;
mod scoped;
mod verified;

pub use scoped::{Admin, Gdpr, MemoryRead, MemoryWrite, Requirement, Scoped};

/// What a route needs. `admin` grants every scope; `rgpd` is only granted by itself or
/// `admin`, so a memory token can never erase or export a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    MemoryRead,
    MemoryWrite,
    Admin,
    /// Erasure, export and receipts (GDPR), named `rgpd` on the wire as the fyso API it
    /// is compatible with names it.
    Gdpr,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::MemoryRead => "memory:read",
            Scope::MemoryWrite => "memory:write",
            Scope::Admin => "admin",
            Scope::Gdpr => "rgpd",
        }
    }
}

/// The verified identity of a request. The tenant comes from the token and nowhere else.
#[derive(Debug, Clone)]
pub struct Caller {
    pub tenant: TenantId,
    pub sub: Option<String>,
    pub scopes: HashSet<String>,
    /// Set for a user-bound token (claims `agent_id` and `external_ref`): every call is
    /// confined to this agent's memory of this one user.
    pub bound: Option<Binding>,
}

/// The one agent and end user a user-bound token may reach: the token an agent platform
/// hands to a model, so that nothing the model is told can make it reach another person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub agent: AgentId,
    pub user: ExternalRef,
}

/// Why a bound caller is refused: the same words wherever the check runs.
const OUTSIDE_BINDING: &str = "this token is bound to one agent and user: it cannot reach another";

impl Caller {
    /// The owner of the memory a call names: the token's tenant, never one the request
    /// carries. Every door (REST, tools, the admin panel) builds its owner here.
    pub fn owner<'a>(&'a self, agent: &'a AgentId, user: &'a ExternalRef) -> Owner<'a> {
        Owner::new(&self.tenant, agent, user)
    }

    pub fn require(&self, scope: Scope) -> Result<(), Refused> {
        if self.scopes.contains("admin") || self.scopes.contains(scope.as_str()) {
            Ok(())
        } else {
            Err(Refused::Forbidden(format!("this route needs the `{}` scope", scope.as_str())))
        }
    }

    /// The agent and user a call is about, from what it names (a tool's arguments, a
    /// route's path). A bound caller gets its own when the call names none, and a 403
    /// when it names another; an unbound caller must name both.
    pub fn whose(&self, agent: Option<&str>, user: Option<&str>) -> Result<(AgentId, ExternalRef), Refused> {
        match &self.bound {
            Some(bound) => {
                self.confine(agent, user)?;
                Ok((bound.agent.clone(), bound.user.clone()))
            }
            None => {
                let agent = agent.ok_or_else(|| Refused::Invalid("`agent_id` is required".into()))?;
                let user = user.ok_or_else(|| Refused::Invalid("`external_ref` is required".into()))?;
                let agent = AgentId::parse(agent.to_owned()).map_err(Refused::Invalid)?;
                let user = ExternalRef::parse(user.to_owned()).map_err(Refused::Invalid)?;
                Ok((agent, user))
            }
        }
    }

    /// Refuses (403) a bound caller whose call names an agent or user other than its own;
    /// an unbound caller, or one naming only its own, passes.
    pub fn confine(&self, agent: Option<&str>, user: Option<&str>) -> Result<(), Refused> {
        let Some(bound) = &self.bound else { return Ok(()) };
        let other_agent = agent.is_some_and(|a| a != bound.agent.as_str());
        let other_user = user.is_some_and(|u| u != bound.user.as_str());
        if other_agent || other_user { Err(Refused::Forbidden(OUTSIDE_BINDING.into())) } else { Ok(()) }
    }
}

/// Why a verified caller may not make a call, whichever door it came through: each door
/// renders it (the service's error, the API's, the panel's page).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// A scope it lacks, or an agent or user its token is not bound to (403).
    #[error("{0}")]
    Forbidden(String),
    /// It did not name, or misnamed, the agent and user the call is about (400).
    #[error("{0}")]
    Invalid(String),
}

impl From<Refused> for ApiError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Forbidden(why) => ApiError::Forbidden(why),
            Refused::Invalid(why) => ApiError::InvalidRequest(why),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    tenant: String,
    exp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sub: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    iat: Option<u64>,
    /// With `external_ref`: the token is user-bound (see [`Binding`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    external_ref: Option<String>,
}

impl Claims {
    /// The binding the claims carry. Both claims or neither: a token naming only one
    /// would be confined to less than its issuer may have meant, so it is refused.
    fn binding(&mut self) -> Result<Option<Binding>, ApiError> {
        let invalid = || ApiError::Unauthorized("invalid or expired token");
        match (self.agent_id.take(), self.external_ref.take()) {
            (None, None) => Ok(None),
            (Some(agent), Some(user)) => Ok(Some(Binding {
                agent: AgentId::parse(agent).map_err(|_| invalid())?,
                user: ExternalRef::parse(user).map_err(|_| invalid())?,
            })),
            _ => Err(invalid()),
        }
    }
}

/// Verifies tokens (and, in HS256 mode, signs them).
pub struct Authenticator {
    decoding: DecodingKey,
    encoding: Option<EncodingKey>,
    algorithm: Algorithm,
    validation: Validation,
    verified: verified::VerifiedTokens,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").field("algorithm", &self.algorithm).finish_non_exhaustive()
    }
}

/// Where the key came from, so that start-up can say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    Secret,
    PublicKeyFile,
    /// Generated into the data directory: development only.
    DevelopmentSecret,
}

const DEV_SECRET_FILE: &str = "jwt-secret";

impl Authenticator {
    pub fn from_config(config: &CoreConfig) -> anyhow::Result<(Authenticator, KeySource)> {
        if let Some(path) = &config.jwt_public_key_file {
            let pem = std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("cannot read ENGRAM_JWT_PUBLIC_KEY_FILE {}: {e}", path.display()))?;
            let (algorithm, decoding) = match config.jwt_algorithm.unwrap_or(JwtAlgorithm::Rs256) {
                JwtAlgorithm::Rs256 => (Algorithm::RS256, DecodingKey::from_rsa_pem(&pem)),
                JwtAlgorithm::EdDsa => (Algorithm::EdDSA, DecodingKey::from_ed_pem(&pem)),
                JwtAlgorithm::Hs256 => {
                    anyhow::bail!("ENGRAM_JWT_ALGORITHM=HS256 needs ENGRAM_JWT_SECRET, not a public key file")
                }
            };
            let decoding =
                decoding.map_err(|e| anyhow::anyhow!("ENGRAM_JWT_PUBLIC_KEY_FILE is not a valid key: {e}"))?;
            let auth = Authenticator::new(decoding, None, algorithm, config);
            return Ok((auth, KeySource::PublicKeyFile));
        }
        anyhow::ensure!(
            matches!(config.jwt_algorithm, None | Some(JwtAlgorithm::Hs256)),
            "RS256 and EdDSA need ENGRAM_JWT_PUBLIC_KEY_FILE"
        );
        let (secret, source) = match &config.jwt_secret {
            Some(secret) => {
                check_secret("ENGRAM_JWT_SECRET", secret)?;
                (secret.0.clone(), KeySource::Secret)
            }
            None => (
                crate::crypto::load_or_create_secret(&config.data_dir.join(DEV_SECRET_FILE), MIN_SECRET_BYTES)?,
                KeySource::DevelopmentSecret,
            ),
        };
        let auth = Authenticator::new(
            DecodingKey::from_secret(secret.as_bytes()),
            Some(EncodingKey::from_secret(secret.as_bytes())),
            Algorithm::HS256,
            config,
        );
        Ok((auth, source))
    }

    fn new(decoding: DecodingKey, encoding: Option<EncodingKey>, algorithm: Algorithm, config: &CoreConfig) -> Self {
        let mut validation = Validation::new(algorithm);
        validation.validate_nbf = true;
        validation.leeway = config.jwt_leeway_secs;
        let mut required = vec!["exp"];
        if let Some(issuer) = &config.jwt_issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        match &config.jwt_audience {
            Some(audience) => {
                validation.set_audience(&[audience]);
                required.push("aud");
            }
            None => validation.validate_aud = false,
        }
        validation.set_required_spec_claims(&required);
        Authenticator { decoding, encoding, algorithm, validation, verified: Default::default() }
    }

    /// Checks a bearer token; every failure is the same terse 401 so the answer tells an
    /// attacker nothing about which check failed.
    pub fn verify(&self, token: &str) -> Result<Caller, ApiError> {
        let now = jsonwebtoken::get_current_timestamp();
        if let Some(caller) = self.verified.get(token, now) {
            return Ok(caller);
        }
        let (caller, exp) = self.check(token)?;
        self.verified.insert(token, &caller, exp, now);
        Ok(caller)
    }

    /// Every check of a token, and its `exp`.
    fn check(&self, token: &str) -> Result<(Caller, u64), ApiError> {
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation).map_err(|e| {
            tracing::debug!(reason = %e, "token rejected");
            ApiError::Unauthorized("invalid or expired token")
        })?;
        let mut claims = data.claims;
        let bound = claims.binding()?;
        let tenant = TenantId::parse(claims.tenant).map_err(|_| ApiError::Unauthorized("invalid or expired token"))?;
        let scopes = claims.scope.unwrap_or_default().split_whitespace().map(str::to_owned).collect();
        Ok((Caller { tenant, sub: claims.sub, scopes, bound }, claims.exp))
    }

    /// Signs a token with the configured secret (HS256 only: with a public key the
    /// private half is not ours); with `bound`, a user-bound one.
    pub fn sign(
        &self,
        tenant: &str,
        scope: &str,
        sub: Option<&str>,
        bound: Option<&Binding>,
        ttl: Duration,
    ) -> anyhow::Result<String> {
        let Some(key) = &self.encoding else {
            anyhow::bail!("with ENGRAM_JWT_PUBLIC_KEY_FILE, tokens are signed by your identity provider's private key")
        };
        let now = jsonwebtoken::get_current_timestamp();
        let claims = Claims {
            tenant: tenant.to_owned(),
            exp: now + ttl.as_secs(),
            sub: sub.map(str::to_owned),
            scope: Some(scope.to_owned()),
            iat: Some(now),
            agent_id: bound.map(|b| b.agent.as_str().to_owned()),
            external_ref: bound.map(|b| b.user.as_str().to_owned()),
        };
        Ok(jsonwebtoken::encode(&Header::new(self.algorithm), &claims, key)?)
    }
}

/// What the [`Caller`] extractor needs from the application's state: the key to verify
/// tokens with and the per-tenant rate limit. Any state that can hand these out
/// (`FromRef`) can authenticate requests, so this module knows nothing of the app.
#[derive(Clone)]
pub struct Guard {
    pub authenticator: Arc<Authenticator>,
    pub rate_limiter: Option<Arc<rate_limit::RateLimiter>>,
}

impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    Guard: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Caller, ApiError> {
        let guard = Guard::from_ref(state);
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or(ApiError::Unauthorized("missing bearer token"))?;
        let token = header
            .to_str()
            .ok()
            .and_then(|value| value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")))
            .map(str::trim)
            .ok_or(ApiError::Unauthorized("malformed Authorization header"))?;
        let caller = guard.authenticator.verify(token)?;
        tracing::Span::current().record("tenant", caller.tenant.as_str());
        if let Some(limiter) = &guard.rate_limiter {
            limiter.check(caller.tenant.as_str()).map_err(ApiError::RateLimited)?;
        }
        Ok(caller)
    }
}

/// Parses a duration like `90s`, `15m`, `1h` or `7d`.
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("invalid duration `{text}`"))?;
    let seconds = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => return Err(format!("invalid duration unit in `{text}` (use s, m, h or d)")),
    };
    if seconds == 0 {
        return Err("duration must be positive".into());
    }
    Ok(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ttls() {
        assert_eq!(parse_ttl("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_ttl("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_ttl("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_ttl("2d"), Ok(Duration::from_secs(172_800)));
        assert!(parse_ttl("0s").is_err());
        assert!(parse_ttl("1y").is_err());
        assert!(parse_ttl("h").is_err());
    }

    fn authenticator() -> Authenticator {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            core: CoreConfig,
        }
        let secret = "a-secret-long-enough-for-the-checks-here";
        let config = <Cli as clap::Parser>::try_parse_from(["engram"]).expect("defaults").core;
        Authenticator::new(
            DecodingKey::from_secret(secret.as_bytes()),
            Some(EncodingKey::from_secret(secret.as_bytes())),
            Algorithm::HS256,
            &config,
        )
    }

    /// A verified token is answered from the cache with its own caller; a refused one
    /// is never kept, so it stays refused.
    #[test]
    fn verified_tokens_are_kept_and_refused_ones_are_not() {
        let auth = authenticator();
        let token = auth.sign("acme", "memory:read", None, None, Duration::from_secs(600)).expect("sign");
        let now = jsonwebtoken::get_current_timestamp();
        assert!(auth.verified.get(&token, now).is_none());
        assert_eq!(auth.verify(&token).expect("valid").tenant.as_str(), "acme");
        assert_eq!(auth.verified.get(&token, now).expect("kept").tenant.as_str(), "acme");
        assert_eq!(auth.verify(&token).expect("still valid").tenant.as_str(), "acme");

        let forged = format!("{}x", &token[..token.len() - 1]);
        assert!(auth.verify(&forged).is_err());
        assert!(auth.verified.get(&forged, now).is_none());
        assert!(auth.verify(&forged).is_err(), "a refused token stays refused");
    }
}
