//! Jobs started again by a person: the REST route and the admin panel's jobs page.

use uuid::Uuid;

use super::AppState;
use crate::{
    domain::{
        ids::TenantId,
        job::{Job, JobStatus},
    },
    service::error::ServiceError,
    store::jobs::{JobFilter, Retry},
};

/// The tenant's jobs by status, every status with its count (0 included), in the order
/// of [`JobStatus::ALL`]: the admin panel's overview and jobs pages.
pub async fn counts(state: &AppState, tenant: &TenantId) -> Result<Vec<(&'static str, i64)>, ServiceError> {
    let counted = state.store.tenant_job_counts(tenant).await?;
    Ok(JobStatus::ALL
        .iter()
        .map(|status| {
            let n = counted.iter().find(|(s, _)| s == status.as_str()).map_or(0, |(_, n)| *n);
            (status.as_str(), n)
        })
        .collect())
}

/// Queues a dead or failed job again with fresh attempts and wakes a worker; a
/// `conflict` for a job in any other state.
pub async fn retry(state: &AppState, tenant: &TenantId, id: Uuid) -> Result<Job, ServiceError> {
    match state.store.retry_job(tenant, id).await? {
        Retry::Requeued(job) => {
            state.job_wakeup.notify_one();
            Ok(job)
        }
        Retry::NotFound => Err(ServiceError::NotFound("job")),
        Retry::NotRetryable(status) => Err(ServiceError::Conflict(format!(
            "only a dead or failed job can be retried; this one is {}",
            status.as_str()
        ))),
    }
}

/// One page of the tenant's jobs that `filter` takes, newest first, after the job `after`.
pub async fn list(
    state: &AppState,
    tenant: &TenantId,
    filter: &JobFilter,
    after: Option<Uuid>,
    limit: i64,
) -> Result<Vec<Job>, ServiceError> {
    Ok(state.store.list_jobs(tenant, filter, after, limit).await?)
}

/// One of the tenant's jobs; `not_found` for another tenant's.
pub async fn get(state: &AppState, tenant: &TenantId, id: Uuid) -> Result<Job, ServiceError> {
    state.store.get_job(tenant, id).await?.ok_or(ServiceError::NotFound("job"))
}

/// Every tenant's jobs counted by status, for the metrics.
pub async fn counts_by_status(state: &AppState) -> Result<Vec<(String, i64)>, ServiceError> {
    Ok(state.store.count_jobs_by_status().await?)
}
