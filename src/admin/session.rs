//! Signing operators in and out, and guarding every state-changing form.
//!
//! - The session *is* the token the API trusts: the operator pastes a JWT (or follows a
//!   link from `engram admin-link`), the panel verifies it with the app's
//!   [`Authenticator`](crate::auth::Authenticator) and keeps it in an HttpOnly,
//!   SameSite=Strict cookie (Secure behind TLS) that expires with the token. Each
//!   request verifies it again, exactly as the API verifies a bearer token: tenant and
//!   scopes come from it and nowhere else, and an expired token signs the operator out.
//! - Every POST carries a CSRF token: an HMAC of the session token under a key derived
//!   from the receipt key (shared by replicas when `ENGRAM_RECEIPT_KEY` is set), so it
//!   needs no server-side storage and changes with the session. POSTs also must come
//!   from this origin (`Sec-Fetch-Site`, `Origin`).
//! - Login CSRF (a page elsewhere signing the operator into the attacker's tenant): the
//!   sign-in form cannot carry a CSRF token from a session that does not exist yet, so
//!   it is refused unless the browser says the post comes from this origin.

use std::{marker::PhantomData, time::Duration};

use askama::Template;
use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header, request::Parts},
    response::{IntoResponse, Redirect, Response},
};
use base64::Engine;
use serde::{Deserialize, de::DeserializeOwned};

use super::{AdminError, AdminResult, Layout, notice, render_with};
use crate::{
    auth::{Caller, Requirement, Scope},
    domain::{ids::TenantId, nul},
    service::AppState,
};

/// The cookie that holds the operator's token; only sent to the panel's paths.
const COOKIE: &str = "engram_admin";

/// A signed-in operator: the verified caller, and the CSRF token of their session.
pub struct Operator {
    pub caller: Caller,
    pub csrf: String,
}

impl Operator {
    /// Whether the token grants `scope` (the API's own rule: `admin` grants all).
    pub fn can(&self, scope: Scope) -> bool {
        self.caller.require(scope).is_ok()
    }

    /// Fails with 403, in the API's words, unless the token grants `scope`.
    pub fn require(&self, scope: Scope) -> Result<(), AdminError> {
        self.caller.require(scope).map_err(AdminError::from)
    }

    pub fn tenant(&self) -> &TenantId {
        &self.caller.tenant
    }

    /// The layout of a page of this operator.
    pub fn layout(&self, title: impl Into<String>, section: &'static str, done: Option<&str>) -> Layout {
        let mut scopes: Vec<&str> = self.caller.scopes.iter().map(String::as_str).collect();
        scopes.sort_unstable();
        Layout {
            title: title.into(),
            section,
            tenant: self.caller.tenant.to_string(),
            scopes: if scopes.is_empty() { "none".into() } else { scopes.join(" ") },
            csrf: self.csrf.clone(),
            notice: notice(done),
        }
    }
}

fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// The CSRF token of a session: HMAC-SHA256 of the session token under a key derived
/// from the receipt key for this one purpose.
fn csrf_token(state: &AppState, session_token: &str) -> String {
    let key = crate::crypto::hmac_sha256_hex(state.receipt_key.0.as_bytes(), b"engram admin panel csrf v1");
    crate::crypto::hmac_sha256_hex(key.as_bytes(), session_token.as_bytes())
}

/// Compares in time independent of where the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = AdminError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Operator, AdminError> {
        let token = cookie_value(&parts.headers, COOKIE).ok_or(AdminError::SignIn)?;
        let caller = state.guard.authenticator.verify(token).map_err(|_| AdminError::SignIn)?;
        // The panel shows every person of the tenant: no place for a token confined to one.
        if caller.bound.is_some() {
            return Err(AdminError::SignIn);
        }
        tracing::Span::current().record("tenant", caller.tenant.as_str());
        if let Some(limiter) = &state.guard.rate_limiter {
            limiter.check(caller.tenant.as_str()).map_err(|_| AdminError::RateLimited)?;
        }
        let csrf = csrf_token(state, token);
        Ok(Operator { caller, csrf })
    }
}

/// True unless the browser says this request comes from another site. `Sec-Fetch-Site`
/// (sent by current browsers, and not settable by a page) decides when present: it must
/// be `same-origin` or `none` (typed by the user). Without it, an `Origin` header must
/// name this host (the panel's `no-referrer` policy makes browsers send `Origin: null`
/// on its own forms, hence Sec-Fetch-Site first). Clients that send neither (curl)
/// pass: they are not a browser that could be tricked into posting.
fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name: header::HeaderName| headers.get(name).map(|v| v.to_str().unwrap_or("\u{0}"));
    if let Some(site) = text(header::HeaderName::from_static("sec-fetch-site")) {
        return matches!(site, "same-origin" | "none");
    }
    if let Some(origin) = text(header::ORIGIN) {
        let hosts = [text(header::HOST), text(header::HeaderName::from_static("x-forwarded-host"))];
        let host_of_origin = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
        return host_of_origin.is_some_and(|h| hosts.iter().flatten().any(|host| *host == h));
    }
    true
}

/// A state-changing form of a signed-in operator, accepted only from this origin, with
/// the session's CSRF token in its `csrf` field, and from a token holding the scope `R`
/// requires; else 403. As with the API's `Scoped`, no handler can forget the check.
pub struct Guarded<T, R> {
    pub operator: Operator,
    pub form: T,
    requirement: PhantomData<R>,
}

/// What a form needs of the operator's token, as a type: a scope, or only a session.
pub trait FormScope {
    const SCOPE: Option<Scope>;
}

impl<R: Requirement> FormScope for R {
    const SCOPE: Option<Scope> = Some(R::SCOPE);
}

/// Any signed-in operator (signing out needs no scope).
pub struct SignedIn;

impl FormScope for SignedIn {
    const SCOPE: Option<Scope> = None;
}

#[derive(Deserialize)]
struct CsrfField {
    csrf: Option<String>,
}

impl<T: DeserializeOwned, R: FormScope> FromRequest<AppState> for Guarded<T, R> {
    type Rejection = AdminError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, AdminError> {
        let (mut parts, body) = request.into_parts();
        let operator = Operator::from_request_parts(&mut parts, state).await?;
        if !same_origin(&parts.headers) {
            return Err(AdminError::Forbidden("this form was posted from another site".into()));
        }
        let bytes = Bytes::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(|e| AdminError::BadRequest(e.body_text()))?;
        let csrf = serde_urlencoded::from_bytes::<CsrfField>(&bytes).ok().and_then(|f| f.csrf);
        if !csrf.is_some_and(|csrf| constant_time_eq(csrf.as_bytes(), operator.csrf.as_bytes())) {
            return Err(AdminError::Forbidden(
                "the form's CSRF token is missing or wrong: reload the page and try again".into(),
            ));
        }
        if let Some(scope) = R::SCOPE {
            operator.require(scope)?;
        }
        if nul::in_form(&bytes) {
            return Err(AdminError::BadRequest(nul::REFUSED.into()));
        }
        let form = serde_urlencoded::from_bytes(&bytes).map_err(|e| AdminError::BadRequest(e.to_string()))?;
        Ok(Guarded { operator, form, requirement: PhantomData })
    }
}

/// A form with nothing but its CSRF token (delete, retry, erase, sign out…).
#[derive(Deserialize)]
pub struct NoFields {}

/// Sends the browser to the sign-in page, forgetting a session that no longer verifies.
pub fn to_sign_in() -> Response {
    let mut response = Redirect::to("/admin/sign-in").into_response();
    response.headers_mut().insert(header::SET_COOKIE, HeaderValue::from_static(CLEAR_COOKIE));
    response
}

const CLEAR_COOKIE: &str = "engram_admin=; Path=/admin; HttpOnly; SameSite=Strict; Max-Age=0";

#[derive(Template)]
#[template(path = "admin/sign_in.html")]
struct SignInPage {
    error: Option<String>,
}

/// The sign-in form. The script of the page picks a token from the URL fragment of an
/// `engram admin-link` link (a fragment never reaches a server or its logs).
pub async fn sign_in_page() -> AdminResult {
    render_with(StatusCode::OK, &SignInPage { error: None })
}

#[derive(Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    token: String,
}

/// Verifies the pasted token and keeps it in the session cookie until it expires.
pub async fn sign_in(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> AdminResult {
    if !same_origin(&headers) {
        return Err(AdminError::Forbidden("sign-in was posted from another site".into()));
    }
    let form: SignInForm = serde_urlencoded::from_bytes(&body).map_err(|e| AdminError::BadRequest(e.to_string()))?;
    let token = form.token.trim();
    let refused =
        |message: &str| render_with(StatusCode::UNAUTHORIZED, &SignInPage { error: Some(message.to_owned()) });
    if token.is_empty() {
        return refused("Paste a token.");
    }
    // The cookie holds the token as is: refuse anything that is not a JWT's characters.
    if !token.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) {
        return refused("This is not a token.");
    }
    let caller = match state.guard.authenticator.verify(token) {
        Ok(caller) => caller,
        Err(_) => return refused("This token is invalid or expired."),
    };
    if caller.bound.is_some() {
        return refused("This token is bound to one user: the panel needs a token for the whole tenant.");
    }
    tracing::Span::current().record("tenant", caller.tenant.as_str());
    let Some(lifetime) = remaining_lifetime(token) else {
        return refused("This token is invalid or expired.");
    };
    let secure = behind_tls(&headers);
    let cookie = format!(
        "{COOKIE}={token}; Path=/admin; HttpOnly; SameSite=Strict; Max-Age={}{}",
        lifetime.as_secs(),
        if secure { "; Secure" } else { "" }
    );
    let mut response = Redirect::to("/admin").into_response();
    let value = HeaderValue::from_str(&cookie).map_err(|e| AdminError::Internal(e.into()))?;
    response.headers_mut().insert(header::SET_COOKIE, value);
    tracing::info!("operator signed in to the admin panel");
    Ok(response)
}

/// Forgets the session.
pub async fn sign_out(_: Guarded<NoFields, SignedIn>) -> Response {
    to_sign_in()
}

/// Seconds until the token's `exp`. Read from the payload of a token that
/// [`Authenticator::verify`](crate::auth::Authenticator::verify) has just accepted, so the claim is already trusted.
fn remaining_lifetime(token: &str) -> Option<Duration> {
    #[derive(Deserialize)]
    struct Exp {
        exp: u64,
    }
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let Exp { exp } = serde_json::from_slice(&bytes).ok()?;
    let left = exp.checked_sub(jsonwebtoken::get_current_timestamp())?;
    (left > 0).then_some(Duration::from_secs(left))
}

/// Whether the browser reached us over TLS (directly or through a proxy that says so),
/// in which case the cookie is marked `Secure`.
fn behind_tls(headers: &HeaderMap) -> bool {
    let is = |name: &'static str, prefix: &str| {
        headers.get(name).and_then(|v| v.to_str().ok()).is_some_and(|v| v.to_ascii_lowercase().starts_with(prefix))
    };
    is("x-forwarded-proto", "https") || is("origin", "https://")
}

/// A sign-in link for development: a short-lived token in the URL's fragment, which
/// the sign-in page posts to the server (`engram admin-link`).
pub fn sign_in_link(base_url: &str, token: &str) -> String {
    format!("{}/admin/sign-in#token={token}", base_url.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn same_origin_checks_fetch_metadata_and_origin() {
        assert!(same_origin(&headers(&[])));
        assert!(same_origin(&headers(&[("sec-fetch-site", "same-origin"), ("host", "a:1"), ("origin", "null")])));
        assert!(same_origin(&headers(&[("host", "a:1"), ("origin", "http://a:1")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "same-site")])));
        assert!(!same_origin(&headers(&[("host", "a:1"), ("origin", "http://evil:1")])));
        assert!(!same_origin(&headers(&[("host", "a:1"), ("origin", "null")])));
    }

    #[test]
    fn reads_cookies() {
        let map = headers(&[("cookie", "x=1; engram_admin=abc.def; y=2")]);
        assert_eq!(cookie_value(&map, "engram_admin"), Some("abc.def"));
        assert_eq!(cookie_value(&map, "z"), None);
    }

    #[test]
    fn compares_in_constant_time() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
