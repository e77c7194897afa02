//! Background jobs as the API shows them: what kind of work, and where it stands.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::ids::{AgentId, ExternalRef};
use super::usage::OverBudget;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// Read a conversation and store the facts the user stated in it.
    ExtractFacts,
    /// Fold a long thread's older messages into its rolling summary.
    Summarize,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::ExtractFacts => "extract_facts",
            JobKind::Summarize => "summarize",
        }
    }

    pub fn parse(text: &str) -> Option<JobKind> {
        match text {
            "extract_facts" => Some(JobKind::ExtractFacts),
            "summarize" => Some(JobKind::Summarize),
            _ => None,
        }
    }
}

/// `queued` → `running` → `succeeded`, or `failed` (to be retried) → … → `dead`;
/// `cancelled` when the user refused consent or was erased.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    Dead,
    Cancelled,
}

impl JobStatus {
    pub const ALL: [JobStatus; 6] = [
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::Dead,
        JobStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Failed => "failed",
            JobStatus::Dead => "dead",
            JobStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<JobStatus> {
        JobStatus::ALL.into_iter().find(|status| status.as_str() == text)
    }
}

/// A job, as returned by `/api/jobs`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Job {
    pub id: Uuid,
    pub kind: JobKind,
    pub status: JobStatus,
    pub attempts: i32,
    pub agent_id: AgentId,
    pub external_ref: ExternalRef,
    pub conversation_id: Uuid,
    /// An extraction reads the conversation's messages with `from_seq < seq <= through_seq`
    /// as new (and a few before them as context); fixed when it is queued, so each
    /// message is new to one extraction only. A summary folds messages up to `through_seq`
    /// (its `from_seq` is 0).
    pub from_seq: i64,
    pub through_seq: i64,
    /// Facts stored by an `extract_facts` job; null until it succeeded, and for a summary.
    pub facts_added: Option<i32>,
    /// Tokens the LLM provider reported for the job's prompts and answers (summed over a
    /// summary's steps); 0 for the builtin extractor, and until the job succeeded.
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Set when the job was due while the tenant's daily token budget was spent: it
    /// `waited` for the next UTC day, or the `builtin` ran instead of the LLM.
    pub over_budget: Option<OverBudget>,
    pub last_error: Option<String>,
    /// When the job is (or was) due to run.
    pub run_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_through_their_names() {
        for status in JobStatus::ALL {
            assert_eq!(JobStatus::parse(status.as_str()), Some(status));
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        assert_eq!(JobStatus::parse("done"), None);
        assert_eq!(JobKind::parse(JobKind::ExtractFacts.as_str()), Some(JobKind::ExtractFacts));
        assert_eq!(serde_json::to_value(JobKind::ExtractFacts).unwrap(), "extract_facts");
        assert_eq!(JobKind::parse(JobKind::Summarize.as_str()), Some(JobKind::Summarize));
        assert_eq!(serde_json::to_value(JobKind::Summarize).unwrap(), "summarize");
    }
}
