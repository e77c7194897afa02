//! What the model cost: tokens per agent over a period, and the tenant's daily token
//! budget, with the rule that says when a job is over it.

use chrono::{DateTime, Days, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ids::AgentId;

/// What a job due while its tenant's daily token budget is spent did instead of calling
/// the LLM (`ENGRAM_OVER_BUDGET`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OverBudget {
    /// It waited until the next UTC day (its `run_at`), then ran as usual.
    Waited,
    /// The builtin extractor (or, for a summary, the builtin extractive summary) ran
    /// instead, spending no tokens.
    Builtin,
}

impl OverBudget {
    pub fn as_str(self) -> &'static str {
        match self {
            OverBudget::Waited => "waited",
            OverBudget::Builtin => "builtin",
        }
    }

    pub fn parse(text: &str) -> Option<OverBudget> {
        [OverBudget::Waited, OverBudget::Builtin].into_iter().find(|o| o.as_str() == text)
    }
}

/// One agent's tokens over a period.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct AgentUsage {
    pub agent_id: AgentId,
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Extraction and summary jobs that finished in the period, with or without the LLM.
    pub jobs: i64,
    /// The times one of its jobs was due while the tenant's daily budget was spent (it
    /// waited, or the builtin ran instead).
    pub over_budget_jobs: i64,
}

/// The tenant's daily token budget today.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Budget {
    /// Tokens (input and output) the tenant's jobs may spend per UTC day; null: no limit.
    pub daily_tokens: Option<i64>,
    /// Tokens spent since midnight UTC.
    pub spent_today: i64,
    /// What a job does once `spent_today` reached `daily_tokens`.
    pub over_budget: OverBudget,
}

/// `GET /api/usage`: the tenant's tokens per agent over the last `days` UTC days (today
/// included), and its budget.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct TokenUsage {
    pub days: u32,
    /// The first UTC day counted.
    pub since: NaiveDate,
    /// The agents that spent tokens or ran jobs in the period, most tokens first.
    pub agents: Vec<AgentUsage>,
    pub budget: Budget,
}

/// The periods the usage views offer, in days.
pub const PERIODS: [u32; 3] = [1, 7, 30];

/// The first UTC day of the `days` days that end today.
pub fn since(now: DateTime<Utc>, days: u32) -> NaiveDate {
    let today = now.date_naive();
    today.checked_sub_days(Days::new(u64::from(days.saturating_sub(1)))).unwrap_or(today)
}

/// Whether a job may call the LLM: before each call the tokens spent today are compared
/// with the budget, since what a call will cost is only known after it. So a job starts
/// while anything is left, and the last one of a day may end past the budget by what it
/// spent.
pub fn within_budget(spent_today: i64, daily_tokens: Option<i64>) -> bool {
    daily_tokens.is_none_or(|budget| spent_today < budget)
}

/// When a job that waits for the budget runs: the next midnight UTC.
pub fn next_day(now: DateTime<Utc>) -> DateTime<Utc> {
    let tomorrow = now.date_naive().checked_add_days(Days::new(1)).unwrap_or(now.date_naive());
    tomorrow.and_hms_opt(0, 0, 0).map_or(now, |midnight| midnight.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("a time")
    }

    #[test]
    fn a_job_may_call_while_anything_of_the_budget_is_left() {
        assert!(within_budget(1_000_000, None), "no budget, no limit");
        assert!(within_budget(999, Some(1000)));
        assert!(!within_budget(1000, Some(1000)));
        assert!(!within_budget(1500, Some(1000)), "the last call of a day may overshoot");
        assert!(!within_budget(0, Some(0)), "a budget of 0 allows no call");
    }

    #[test]
    fn a_waiting_job_runs_at_the_next_midnight_utc() {
        assert_eq!(next_day(at("2026-03-31T23:59:59Z")), at("2026-04-01T00:00:00Z"));
        assert_eq!(next_day(at("2026-04-01T00:00:00Z")), at("2026-04-02T00:00:00Z"));
    }

    #[test]
    fn a_period_ends_today() {
        let now = at("2026-03-02T10:00:00Z");
        assert_eq!(since(now, 1), NaiveDate::from_ymd_opt(2026, 3, 2).unwrap());
        assert_eq!(since(now, 7), NaiveDate::from_ymd_opt(2026, 2, 24).unwrap());
    }

    #[test]
    fn over_budget_round_trips_through_its_names() {
        for over in [OverBudget::Waited, OverBudget::Builtin] {
            assert_eq!(OverBudget::parse(over.as_str()), Some(over));
            assert_eq!(serde_json::to_value(over).unwrap(), over.as_str());
        }
        assert_eq!(OverBudget::parse("wait"), None);
    }
}
