//! What the readiness probe and the panel's overview ask of the database.

use super::AppState;
use crate::store::Result;

/// Whether the database answers and every migration is applied; the error keeps the
/// database's own cause, for the probe's log.
pub async fn ready(state: &AppState) -> Result<bool> {
    state.store.ready().await
}

/// The backend's name, `sqlite` or `postgres`.
pub fn database(state: &AppState) -> &'static str {
    state.store.backend()
}
