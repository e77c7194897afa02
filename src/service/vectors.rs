//! The facts' vectors, by model: written when a fact is stored (`facts`) and by the
//! embedding worker's backfill; read by recall and by extraction's near-duplicate check.

use uuid::Uuid;

use super::AppState;
use crate::{
    domain::owner::OwnerSet,
    service::error::ServiceError,
    store::{facts::FactFilter, vectors::FactVector},
};

/// Stores the vectors `model` made, each `(fact id, text, values)`, in one transaction;
/// how many were stored.
pub async fn store(state: &AppState, model: &str, vectors: &[(Uuid, &str, &[f32])]) -> Result<u64, ServiceError> {
    Ok(state.store.store_vectors(model, vectors).await?)
}

/// The owners' current vectors of `model` whose facts `filter` takes.
pub async fn of_facts<'o>(
    state: &AppState,
    owners: impl Into<OwnerSet<'o>>,
    model: &str,
    filter: FactFilter<'_>,
) -> Result<Vec<FactVector>, ServiceError> {
    Ok(state.store.fact_vectors(owners, model, filter).await?)
}
