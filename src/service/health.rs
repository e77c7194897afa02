//! What the readiness probe and the panel's overview ask of the database.

use super::AppState;
use crate::service::error::ServiceError;

/// What a caller is told when the database is not ready, whatever the cause.
const NOT_READY: &str = "the database is unavailable or not migrated";

/// Ready when the database answers and every migration is applied; otherwise
/// `Unavailable`, whatever the cause (logged here, since the probe's answer never
/// carries it): not being ready is what the probe reports, never a bug.
pub async fn ready(state: &AppState) -> Result<(), ServiceError> {
    match state.store.ready().await {
        Ok(true) => Ok(()),
        Ok(false) => Err(ServiceError::Unavailable(NOT_READY)),
        Err(error) => {
            tracing::warn!(error = %error, "readiness check failed");
            Err(ServiceError::Unavailable(NOT_READY))
        }
    }
}

/// The backend's name, `sqlite` or `postgres`.
pub fn database(state: &AppState) -> &'static str {
    state.store.backend()
}
