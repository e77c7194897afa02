//! `/admin`: the operator's panel, served by the same binary as the API. Pages are
//! rendered on the server from compile-time-checked templates (askama, under
//! `templates/admin/`); the stylesheet and the one small script are embedded in the
//! binary and nothing is loaded from another host (see [`security_headers`]).
//!
//! The panel signs operators in with the tokens the API already trusts (kept in an
//! HttpOnly cookie, see [`session`]), applies the API's scope rules through the same
//! [`Caller::require`](crate::auth::Caller::require), and calls the same store and
//! domain functions as the API handlers. Its routes are plain axum routes, outside the
//! OpenAPI document.

use askama::Template;
use axum::{
    Router,
    extract::{FromRequestParts, Path},
    http::{HeaderValue, StatusCode, header, request::Parts},
    response::{Html, IntoResponse, Redirect, Response},
    routing::{get, post},
};

use serde::de::DeserializeOwned;

use crate::{
    auth::Refused,
    service::{AppState, error::ServiceError},
};

mod agents;
mod assets;
mod forms;
mod jobs;
mod overview;
mod people;
pub mod session;
mod usage;
mod webhooks;

/// The panel's routes, to be merged into the app's router.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/admin", get(overview::page))
        .route("/admin/", get(|| async { Redirect::to("/admin") }))
        .route("/admin/sign-in", get(session::sign_in_page).post(session::sign_in))
        .route("/admin/sign-out", post(session::sign_out))
        .route("/admin/assets/{name}", get(assets::serve))
        .route("/admin/agents", get(agents::list).post(agents::create))
        .route("/admin/agents/{agent_id}", get(agents::show).post(agents::save))
        .route("/admin/agents/{agent_id}/memory", post(agents::switch_memory))
        .route("/admin/people", get(people::find))
        .route("/admin/people/{external_ref}", get(people::show))
        .route("/admin/people/{external_ref}/consent", post(people::set_consent))
        .route("/admin/people/{external_ref}/export", get(people::export))
        .route("/admin/people/{external_ref}/erase", get(people::erase_confirm).post(people::erase))
        .route("/admin/people/{external_ref}/conversations/{conversation_id}", get(people::conversation))
        .route("/admin/people/{external_ref}/agents/{agent_id}", get(people::facts))
        .route("/admin/people/{external_ref}/agents/{agent_id}/facts", post(people::add_fact))
        .route(
            "/admin/people/{external_ref}/agents/{agent_id}/working-memory/delete",
            post(people::delete_working_memory),
        )
        .route("/admin/people/{external_ref}/agents/{agent_id}/facts/forget", post(people::forget_facts))
        .route("/admin/people/{external_ref}/agents/{agent_id}/facts/{fact_id}", post(people::edit_fact))
        .route("/admin/people/{external_ref}/agents/{agent_id}/facts/{fact_id}/delete", post(people::delete_fact))
        .route("/admin/people/{external_ref}/agents/{agent_id}/facts/{fact_id}/history", get(people::fact_history))
        .route("/admin/receipts/{receipt_id}", get(people::receipt))
        .route("/admin/jobs", get(jobs::list))
        .route("/admin/jobs/{job_id}/retry", post(jobs::retry))
        .route("/admin/usage", get(usage::page))
        .route("/admin/webhooks", get(webhooks::list))
        .route("/admin/webhooks/{subscription_id}", get(webhooks::show))
        .route("/admin/webhooks/{subscription_id}/deliveries/{event_id}", get(webhooks::delivery))
        .route("/admin/webhooks/{subscription_id}/deliveries/{event_id}/retry", post(webhooks::redeliver))
        // Any other panel path: the panel's own 404 page rather than the API's JSON.
        .route("/admin/{*rest}", get(|| async { AdminError::NotFound("page") }))
        .layer(axum::middleware::map_response(security_headers))
}

/// The panel's Content-Security-Policy: only this origin's stylesheet, script and
/// images; forms post only here; no framing, no `<base>`, no inline code.
pub const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; \
                       form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Headers of every panel response: the CSP, no sniffing, no referrer (URLs hold end
/// users' refs), no framing, and no caching of pages that show personal data.
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// What the shared page layout shows: who is signed in, the CSRF token of the sign-out
/// form, the current section and a one-line notice after a change.
pub struct Layout {
    pub title: String,
    pub section: &'static str,
    pub tenant: String,
    pub scopes: String,
    pub csrf: String,
    pub notice: Option<&'static str>,
}

/// The query of a page a form's post sends the operator back to: `done` names the
/// notice of what the form did ([`Layout::notice`]).
#[derive(serde::Deserialize)]
pub struct Done {
    done: Option<String>,
}

/// Why a panel request failed, rendered as an HTML page (or a redirect to sign in).
#[derive(Debug)]
pub enum AdminError {
    /// No valid session: go and sign in.
    SignIn,
    BadRequest(String),
    Forbidden(String),
    NotFound(&'static str),
    Conflict(String),
    RateLimited,
    Unavailable,
    Internal(anyhow::Error),
}

/// A service failure as the panel shows it: a page with the same status the API answers.
impl From<ServiceError> for AdminError {
    fn from(error: ServiceError) -> Self {
        match error {
            ServiceError::Invalid(m) | ServiceError::TooLarge(m) => AdminError::BadRequest(m),
            ServiceError::Forbidden(m) => AdminError::Forbidden(m),
            ServiceError::NotFound(what) => AdminError::NotFound(what),
            ServiceError::Conflict(m) | ServiceError::PreconditionFailed(m) | ServiceError::Gone(m) => {
                AdminError::Conflict(m)
            }
            ServiceError::StaleSeq(_) => AdminError::Conflict(error.to_string()),
            ServiceError::TooMany(_) => AdminError::RateLimited,
            ServiceError::Unavailable(_) => AdminError::Unavailable,
            ServiceError::Internal(cause) => AdminError::Internal(cause),
        }
    }
}

impl From<Refused> for AdminError {
    fn from(refused: Refused) -> Self {
        ServiceError::from(refused).into()
    }
}

impl From<sqlx::Error> for AdminError {
    fn from(error: sqlx::Error) -> Self {
        ServiceError::from(error).into()
    }
}

impl From<askama::Error> for AdminError {
    fn from(error: askama::Error) -> Self {
        AdminError::Internal(anyhow::Error::new(error).context("template rendering failed"))
    }
}

#[derive(Template)]
#[template(path = "admin/error.html")]
struct ErrorPage<'a> {
    status: u16,
    reason: &'a str,
    message: String,
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            AdminError::SignIn => return session::to_sign_in(),
            AdminError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            AdminError::Forbidden(m) => (StatusCode::FORBIDDEN, m),
            AdminError::NotFound(what) => (StatusCode::NOT_FOUND, format!("{what} not found")),
            AdminError::Conflict(m) => (StatusCode::CONFLICT, m),
            AdminError::RateLimited => (StatusCode::TOO_MANY_REQUESTS, "rate limit exceeded; retry later".into()),
            AdminError::Unavailable => {
                tracing::warn!("database unavailable");
                (StatusCode::SERVICE_UNAVAILABLE, "the database is unavailable; retry later".into())
            }
            AdminError::Internal(cause) => {
                tracing::error!(error = format!("{cause:#}"), "internal error");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal error".into())
            }
        };
        let page = ErrorPage { status: status.as_u16(), reason: status.canonical_reason().unwrap_or(""), message };
        match page.render() {
            Ok(html) => (status, Html(html)).into_response(),
            Err(_) => (status, page.message).into_response(),
        }
    }
}

pub type AdminResult<T = Response> = Result<T, AdminError>;

/// Renders a page with status 200. A form shown again with its validation messages is
/// a 200 too: the operator's typo is not an error of the page, and a 4xx document would
/// be logged as one in the browser's console.
/// `Path<T>` whose refusal is the panel's 400 page: ids in the path are checked as the
/// API checks them (`AgentId`, `ExternalRef` and `Uuid` parse themselves).
pub struct AdminPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for AdminPath<T> {
    type Rejection = AdminError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AdminError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(AdminPath(value)),
            Err(refusal) => Err(AdminError::BadRequest(refusal.body_text())),
        }
    }
}

/// An on/off form field: the panel's switch buttons post `on` or `off`, and anything
/// else is refused with 400 when the form is read.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Switch {
    On,
    Off,
}

impl Switch {
    pub fn is_on(self) -> bool {
        matches!(self, Switch::On)
    }
}

fn render(page: &impl Template) -> AdminResult {
    Ok(Html(page.render()?).into_response())
}

/// Renders a page with another status (a refused sign-in: 401).
fn render_with(status: StatusCode, page: &impl Template) -> AdminResult {
    Ok((status, Html(page.render()?)).into_response())
}

/// Post/Redirect/Get: after a change, the browser loads `to` with a GET.
fn see_other(to: &str) -> AdminResult {
    Ok(Redirect::to(to).into_response())
}

/// The fixed notices a redirect may ask for with `?done=…` (never free text, so a link
/// cannot make the panel say something it did not do).
fn notice(key: Option<&str>) -> Option<&'static str> {
    Some(match key? {
        "saved" => "Settings saved.",
        "memory-on" => "Memory is on for this agent.",
        "memory-off" => "Memory is off for this agent.",
        "created" => "Agent configured.",
        "consent-on" => "Consent recorded: this person's data may be sent to an LLM.",
        "consent-off" => "Consent refused: this person's data is no longer sent to an LLM.",
        "fact-added" => "Fact added.",
        "fact-existing" => "That fact was already stored.",
        "fact-saved" => "Fact saved.",
        "fact-deleted" => "Fact deleted.",
        "working-memory-deleted" => "Working memory deleted.",
        "facts-forgotten" => "Every fact of this agent about this person was deleted.",
        "erased" => "Everything about this person was erased.",
        "retried" => "Job queued again.",
        "redelivered" => "Delivery queued again.",
        _ => return None,
    })
}

/// Percent-encodes one path segment (an end user's ref may hold any printable text).
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Local times of the tables: minutes are enough for a person to read.
fn when(time: &chrono::DateTime<chrono::Utc>) -> String {
    time.format("%Y-%m-%d %H:%M UTC").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_segments() {
        let cases = [("whatsapp:+33 6/é", "whatsapp%3A%2B33%206%2F%C3%A9"), ("a-b_c.d~e", "a-b_c.d~e")];
        for (segment, encoded) in cases {
            assert_eq!(encode_segment(segment), encoded, "{segment}");
        }
    }

    #[test]
    fn unknown_notices_say_nothing() {
        assert_eq!(notice(Some("saved")), Some("Settings saved."));
        assert_eq!(notice(Some("<script>")), None);
        assert_eq!(notice(None), None);
    }
}
