//! The panel's static files, embedded in the binary: one stylesheet, one script, one
//! icon. Served from this origin only, so the CSP can forbid every other host.

use axum::{
    extract::Path,
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};

use super::AdminError;

const CSS: &str = include_str!("assets/admin.css");
const JS: &str = include_str!("assets/admin.js");
const ICON: &str = include_str!("assets/icon.svg");

pub async fn serve(Path(name): Path<String>) -> Result<Response, AdminError> {
    let (body, content_type) = match name.as_str() {
        "admin.css" => (CSS, "text/css; charset=utf-8"),
        "admin.js" => (JS, "text/javascript; charset=utf-8"),
        "icon.svg" => (ICON, "image/svg+xml"),
        _ => return Err(AdminError::NotFound("asset")),
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Revalidated on each use: a new binary may bring new assets under the same name.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}
