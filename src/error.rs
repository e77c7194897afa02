//! The REST API's error, rendered as the JSON body of the error table in docs/api.md; the
//! service's failures become one in `http` (its layer is below `service`, which never uses it).
//! Internal causes are logged here, inside the request span, and never sent to clients.

use axum::{
    Json,
    extract::rejection::{JsonRejection, PathRejection, QueryRejection},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use utoipa::ToSchema;

use engram_domain::page::InvalidPage;

tokio::task_local! {
    /// The current request's id, so that an error body can carry it without every
    /// handler threading it through.
    pub static REQUEST_ID: String;
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{0}")]
    Conflict(String),
    /// An append's `expected_last_seq` was stale; the conversation's last seq is this.
    #[error("expected_last_seq does not match: the conversation's last seq is {0}")]
    StaleSeq(i64),
    /// A conditional write's `If-Match` / `If-None-Match` did not hold: nothing changed.
    #[error("{0}")]
    PreconditionFailed(String),
    /// What the request names existed but is gone for good (an event cursor older than
    /// the retention).
    #[error("{0}")]
    Gone(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("request body must be application/json")]
    UnsupportedMediaType,
    #[error("rate limit exceeded; retry later")]
    RateLimited(std::time::Duration),
    /// More requests of the tenant at once than a cap allows (waiting reads): retry when
    /// one of them is done.
    #[error("{0}; retry later")]
    TooMany(&'static str),
    /// The database cannot be reached or is busy, or the request ran out of time.
    #[error("{0}; retry later")]
    Unavailable(&'static str),
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

/// The error body (`{"error": {...}}`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code: `invalid_request`, `unauthorized`, `forbidden`,
    /// `not_found`, `conflict`, `precondition_failed`, `gone`, `payload_too_large`, `unsupported_media_type`,
    /// `rate_limited`, `internal`, `unavailable`.
    pub code: &'static str,
    pub message: String,
    pub request_id: String,
    /// Only on a 409 for a stale `expected_last_seq`: the conversation's current last
    /// seq, to re-read after and append against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<i64>,
}

impl ApiError {
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::InvalidRequest(message.into())
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) | ApiError::StaleSeq(_) => StatusCode::CONFLICT,
            ApiError::PreconditionFailed(_) => StatusCode::PRECONDITION_FAILED,
            ApiError::Gone(_) => StatusCode::GONE,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::RateLimited(_) | ApiError::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) => "invalid_request",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::Conflict(_) | ApiError::StaleSeq(_) => "conflict",
            ApiError::PreconditionFailed(_) => "precondition_failed",
            ApiError::Gone(_) => "gone",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::UnsupportedMediaType => "unsupported_media_type",
            ApiError::RateLimited(_) | ApiError::TooMany(_) => "rate_limited",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Internal(_) => "internal",
        }
    }
}

/// Renders an error body outside of `ApiError` too (e.g. for a caught panic).
pub fn error_response(status: StatusCode, code: &'static str, message: String) -> Response {
    detailed_response(status, code, message, None)
}

fn detailed_response(status: StatusCode, code: &'static str, message: String, last_seq: Option<i64>) -> Response {
    let request_id = REQUEST_ID.try_with(Clone::clone).unwrap_or_default();
    let body = ErrorBody { error: ErrorDetail { code, message, request_id, last_seq } };
    (status, Json(body)).into_response()
}

impl ApiError {
    /// Logs what a client is not told: an internal error's cause chain, why the
    /// service was unavailable.
    fn log(&self) {
        match self {
            ApiError::Internal(cause) => tracing::error!(error = format!("{cause:#}"), "internal error"),
            ApiError::Unavailable(why) => tracing::warn!(reason = why, "service unavailable"),
            _ => {}
        }
    }

    /// The error body alone, its cause logged as a response would log it: what an MCP
    /// tool error carries (the MCP answer itself is a success at the HTTP level).
    pub fn into_body(self) -> ErrorBody {
        self.log();
        let last_seq = match self {
            ApiError::StaleSeq(last_seq) => Some(last_seq),
            _ => None,
        };
        let request_id = REQUEST_ID.try_with(Clone::clone).unwrap_or_default();
        ErrorBody { error: ErrorDetail { code: self.code(), message: self.to_string(), request_id, last_seq } }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.log();
        let last_seq = match self {
            ApiError::StaleSeq(last_seq) => Some(last_seq),
            _ => None,
        };
        let mut response = detailed_response(self.status(), self.code(), self.to_string(), last_seq);
        match self {
            ApiError::Unauthorized(_) => {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::Unavailable(_) | ApiError::TooMany(_) => {
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            ApiError::RateLimited(wait) => {
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
            }
            _ => {}
        }
        response
    }
}

impl From<InvalidPage> for ApiError {
    fn from(error: InvalidPage) -> Self {
        ApiError::InvalidRequest(error.0)
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge("request body is too large".into()),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType,
            _ => ApiError::InvalidRequest(rejection.body_text()),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::InvalidRequest(rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::InvalidRequest(rejection.body_text())
    }
}
