//! Per-agent settings: the defaults of docs/api.md and the validation of a partial update.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ids::AgentId;

/// An agent's whole configuration, as stored and returned.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct AgentConfig {
    pub agent_id: AgentId,
    pub memory_enabled: bool,
    pub min_user_turns: i32,
    pub max_injected_facts: i32,
    pub min_confidence: f64,
    pub extraction_instructions: Option<String>,
    /// Extract an open conversation each time this many user turns arrived since its last
    /// extraction was queued; null: only when it ends.
    #[schema(minimum = 1, maximum = 100)]
    pub extract_every_user_turns: Option<i32>,
    /// Summarise a thread once more than this many of its messages are unsummarised; 0 = off.
    #[schema(minimum = 0, maximum = 1000)]
    pub summarize_after_messages: i32,
    /// The newest messages a summary leaves out, kept verbatim.
    #[schema(minimum = 0, maximum = 100)]
    pub summary_window: i32,
    /// Delete extracted facts said (`observed_at`) more than this many days ago; 0 = off.
    #[schema(minimum = 0, maximum = 36500)]
    pub forget_extracted_after_days: i32,
    /// Delete facts not returned by any read for this many days (counted from when the
    /// fact was stored if it never was); 0 = off.
    #[schema(minimum = 0, maximum = 36500)]
    pub forget_unrecalled_after_days: i32,
    /// Keep at most this many facts per user, the best by the keep score of
    /// docs/behaviour.md; 0 = off.
    #[schema(minimum = 0, maximum = 100000)]
    pub keep_best_facts: i32,
    /// Whether the three policies above also delete manual and agent facts (by default they
    /// touch extracted facts only).
    pub forget_curated_facts: bool,
    /// Keep at most this many messages per conversation, deleting the oldest; 0 = off.
    #[schema(minimum = 0, maximum = 1000000)]
    pub max_messages_per_conversation: i32,
    /// Delete conversations this many days after they ended; 0 = off.
    #[schema(minimum = 0, maximum = 36500)]
    pub delete_conversations_after_days: i32,
    /// Whether deleting a conversation (`DELETE /api/conversations/{id}`) also deletes the
    /// facts drawn only from it; by default they stay, found with
    /// `GET …/facts?source_conversation=`.
    pub delete_facts_with_conversation: bool,
    /// Other agents of the tenant whose facts this agent's memory context and search
    /// also read (shared memory); each must be configured, and is read only while its
    /// own memory is on. Writes stay with the agent that learned a fact.
    #[schema(max_items = 10)]
    pub reads_facts_of: Vec<AgentId>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The settings without identity and times: what an unconfigured agent gets.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub memory_enabled: bool,
    pub min_user_turns: i32,
    pub max_injected_facts: i32,
    pub min_confidence: f64,
    pub extraction_instructions: Option<String>,
    /// Rolling extraction's segment, in user turns; `None`: extraction at the end only.
    pub extract_every_user_turns: Option<i32>,
    pub summarize_after_messages: i32,
    pub summary_window: i32,
    pub forgetting: Forgetting,
    pub retention: Retention,
    /// Whether deleting a conversation deletes the facts drawn only from it.
    pub delete_facts_with_conversation: bool,
    /// The other agents whose facts its reads take too (shared memory).
    pub reads_facts_of: Vec<AgentId>,
}

/// An agent's forgetting policies (0 = off for each number): applied by the sweeper.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forgetting {
    pub extracted_after_days: i32,
    pub unrecalled_after_days: i32,
    pub keep_best: i32,
    /// Whether the policies reach manual and agent facts too.
    pub curated: bool,
}

/// An agent's message retention (0 = off for each): applied by the sweeper.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    pub max_messages: i32,
    pub conversations_after_days: i32,
}

/// Upper bounds of the forgetting and retention settings (each also takes 0, off). Days
/// stop at a hundred years, where a longer time means nothing and the arithmetic on
/// times cannot overflow.
pub const MAX_DAYS: i32 = 36_500;
pub const MAX_KEEP_BEST: i32 = 100_000;
pub const MAX_MESSAGES_KEPT: i32 = 1_000_000;

/// Bounds of `summarize_after_messages` (0 = off) and `summary_window`.
pub const MAX_SUMMARIZE_AFTER: i32 = 1000;
pub const MAX_SUMMARY_WINDOW: i32 = 100;

/// Most agents one agent reads the facts of: each adds its owner tag to every search
/// term and its facts to every read, so the list is short by design.
pub const MAX_SHARED_AGENTS: usize = 10;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            memory_enabled: false,
            min_user_turns: 3,
            max_injected_facts: 10,
            min_confidence: 0.7,
            extraction_instructions: None,
            // `min_user_turns`, see [`Settings::created_by`].
            extract_every_user_turns: Some(3),
            summarize_after_messages: 20,
            summary_window: 10,
            forgetting: Forgetting::default(),
            retention: Retention::default(),
            delete_facts_with_conversation: false,
            reads_facts_of: Vec::new(),
        }
    }
}

/// A partial update (`PUT` with any subset of the fields). `extraction_instructions`
/// distinguishes "absent" (keep) from `null` (clear).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigPatch {
    pub memory_enabled: Option<bool>,
    #[serde(default, deserialize_with = "whole_number")]
    #[schema(minimum = 1, maximum = 100)]
    pub min_user_turns: Option<i32>,
    #[serde(default, deserialize_with = "whole_number")]
    #[schema(minimum = 1, maximum = 100)]
    pub max_injected_facts: Option<i32>,
    /// 0–1
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub min_confidence: Option<f64>,
    /// At most 4000 characters; `null` clears it.
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<String>, max_length = 4000)]
    pub extraction_instructions: Option<Option<String>>,
    /// Extract an open conversation every this many new user turns (1–100); `null` keeps
    /// extraction for the conversation's end. On an agent's first settings it defaults to
    /// its `min_user_turns`.
    #[serde(default, deserialize_with = "optional_whole_number")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 100)]
    pub extract_every_user_turns: Option<Option<i32>>,
    /// Summarise a thread once more than this many of its messages are unsummarised;
    /// 0 turns rolling summaries off.
    #[serde(default, deserialize_with = "whole_number")]
    #[schema(minimum = 0, maximum = 1000)]
    pub summarize_after_messages: Option<i32>,
    /// The newest messages a summary leaves out, kept verbatim.
    #[serde(default, deserialize_with = "whole_number")]
    #[schema(minimum = 0, maximum = 100)]
    pub summary_window: Option<i32>,
    /// Delete extracted facts said more than this many days ago; 0 turns it off.
    #[serde(default, deserialize_with = "whole_number")]
    #[schema(minimum = 0, maximum = 36500)]
    pub forget_extracted_after_days: Option<i32>,
    /// Delete facts no read returned for this many days; 0 turns it off.
    #[serde(default, deserialize_with = "whole_number")]
    #[schema(minimum = 0, maximum = 36500)]
    pub forget_unrecalled_after_days: Option<i32>,
    /// Keep at most this many facts per user, the best by the keep score; 0 turns it off.
    #[serde(default, deserialize_with = "whole_number")]
    #[schema(minimum = 0, maximum = 100000)]
    pub keep_best_facts: Option<i32>,
    /// Whether the forgetting policies also delete manual and agent facts.
    pub forget_curated_facts: Option<bool>,
    /// Keep at most this many messages per conversation; 0 turns it off.
    #[serde(default, deserialize_with = "whole_number")]
    #[schema(minimum = 0, maximum = 1000000)]
    pub max_messages_per_conversation: Option<i32>,
    /// Delete conversations this many days after they ended; 0 turns it off.
    #[serde(default, deserialize_with = "whole_number")]
    #[schema(minimum = 0, maximum = 36500)]
    pub delete_conversations_after_days: Option<i32>,
    /// Whether deleting a conversation also deletes the facts drawn only from it.
    pub delete_facts_with_conversation: Option<bool>,
    /// Other configured agents of the tenant whose facts this agent's memory context and
    /// search also read, at most 10, not itself; `[]` stops sharing.
    #[schema(max_items = 10)]
    pub reads_facts_of: Option<Vec<AgentId>>,
}

/// The largest integer a JSON number written as a float holds exactly (2^53 − 1, also
/// JavaScript's `Number.MAX_SAFE_INTEGER`): the spec's bound on integers that may come so.
pub(crate) const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// An optional integer that also takes a number with a zero fraction (`3.0`): JSON
/// Schema's `integer`, which the spec promises, counts `3.0` as an integer, and a
/// client's JSON library may write one so (up to [`MAX_SAFE_INTEGER`]).
pub fn whole_number<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<i64>,
{
    use serde::de::Error;
    match Option::<serde_json::Number>::deserialize(d)? {
        None => Ok(None),
        Some(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER).map(|f| f as i64))
            .and_then(|i| T::try_from(i).ok())
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("expected an integer, got {n}"))),
    }
}

fn double_option<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// [`whole_number`] for a field where `null` is a value (clear) and absence another (keep).
fn optional_whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<i32>>, D::Error> {
    whole_number(d).map(Some)
}

impl Settings {
    /// The settings an agent's first `PUT` stores: the defaults with the patch applied,
    /// where `extract_every_user_turns`, unless given, follows the `min_user_turns` they
    /// end with (a conversation too short to extract at its end is too short for a
    /// segment too).
    pub fn created_by(patch: &ConfigPatch) -> Settings {
        let mut settings = patch.apply(Settings::default());
        if patch.extract_every_user_turns.is_none() {
            settings.extract_every_user_turns = Some(settings.min_user_turns);
        }
        settings
    }
}

impl ConfigPatch {
    pub fn validate(&self) -> Result<(), String> {
        if let Some(n) = self.min_user_turns.filter(|n| !(1..=100).contains(n)) {
            return Err(format!("min_user_turns must be 1-100, got {n}"));
        }
        if let Some(n) = self.max_injected_facts.filter(|n| !(1..=100).contains(n)) {
            return Err(format!("max_injected_facts must be 1-100, got {n}"));
        }
        if let Some(n) = self.extract_every_user_turns.flatten().filter(|n| !(1..=100).contains(n)) {
            return Err(format!("extract_every_user_turns must be 1-100 or null, got {n}"));
        }
        if let Some(c) = self.min_confidence.filter(|c| !(0.0..=1.0).contains(c)) {
            return Err(format!("min_confidence must be between 0 and 1, got {c}"));
        }
        if let Some(n) = self.summarize_after_messages.filter(|n| !(0..=MAX_SUMMARIZE_AFTER).contains(n)) {
            return Err(format!("summarize_after_messages must be 0-{MAX_SUMMARIZE_AFTER}, got {n}"));
        }
        if let Some(n) = self.summary_window.filter(|n| !(0..=MAX_SUMMARY_WINDOW).contains(n)) {
            return Err(format!("summary_window must be 0-{MAX_SUMMARY_WINDOW}, got {n}"));
        }
        for (name, value, max) in [
            ("forget_extracted_after_days", self.forget_extracted_after_days, MAX_DAYS),
            ("forget_unrecalled_after_days", self.forget_unrecalled_after_days, MAX_DAYS),
            ("keep_best_facts", self.keep_best_facts, MAX_KEEP_BEST),
            ("max_messages_per_conversation", self.max_messages_per_conversation, MAX_MESSAGES_KEPT),
            ("delete_conversations_after_days", self.delete_conversations_after_days, MAX_DAYS),
        ] {
            if let Some(n) = value.filter(|n| !(0..=max).contains(n)) {
                return Err(format!("{name} must be 0 (off) to {max}, got {n}"));
            }
        }
        if let Some(Some(text)) = &self.extraction_instructions
            && text.chars().count() > 4000
        {
            return Err("extraction_instructions must be at most 4000 characters".into());
        }
        Ok(())
    }

    /// [`ConfigPatch::validate`], and the rules of `reads_facts_of` that need the agent
    /// being configured: at most [`MAX_SHARED_AGENTS`], each once, not the agent itself
    /// (whether each is configured is the store's to say).
    pub fn validate_for(&self, agent: &AgentId) -> Result<(), String> {
        self.validate()?;
        let Some(shared) = &self.reads_facts_of else { return Ok(()) };
        if shared.len() > MAX_SHARED_AGENTS {
            return Err(format!("reads_facts_of names at most {MAX_SHARED_AGENTS} agents, got {}", shared.len()));
        }
        if shared.contains(agent) {
            return Err("reads_facts_of must not name the agent itself".into());
        }
        if let Some(twice) = shared.iter().enumerate().find_map(|(at, id)| shared[..at].contains(id).then_some(id)) {
            return Err(format!("reads_facts_of names {twice} twice"));
        }
        Ok(())
    }

    /// The settings after applying this patch to `current`.
    pub fn apply(&self, current: Settings) -> Settings {
        Settings {
            memory_enabled: self.memory_enabled.unwrap_or(current.memory_enabled),
            min_user_turns: self.min_user_turns.unwrap_or(current.min_user_turns),
            max_injected_facts: self.max_injected_facts.unwrap_or(current.max_injected_facts),
            min_confidence: self.min_confidence.unwrap_or(current.min_confidence),
            extraction_instructions: match &self.extraction_instructions {
                Some(value) => value.clone(),
                None => current.extraction_instructions,
            },
            extract_every_user_turns: self.extract_every_user_turns.unwrap_or(current.extract_every_user_turns),
            summarize_after_messages: self.summarize_after_messages.unwrap_or(current.summarize_after_messages),
            summary_window: self.summary_window.unwrap_or(current.summary_window),
            forgetting: Forgetting {
                extracted_after_days: self
                    .forget_extracted_after_days
                    .unwrap_or(current.forgetting.extracted_after_days),
                unrecalled_after_days: self
                    .forget_unrecalled_after_days
                    .unwrap_or(current.forgetting.unrecalled_after_days),
                keep_best: self.keep_best_facts.unwrap_or(current.forgetting.keep_best),
                curated: self.forget_curated_facts.unwrap_or(current.forgetting.curated),
            },
            retention: Retention {
                max_messages: self.max_messages_per_conversation.unwrap_or(current.retention.max_messages),
                conversations_after_days: self
                    .delete_conversations_after_days
                    .unwrap_or(current.retention.conversations_after_days),
            },
            delete_facts_with_conversation: self
                .delete_facts_with_conversation
                .unwrap_or(current.delete_facts_with_conversation),
            reads_facts_of: self.reads_facts_of.clone().unwrap_or(current.reads_facts_of),
        }
    }
}

/// A stored configuration as the settings the rules read.
impl From<AgentConfig> for Settings {
    fn from(config: AgentConfig) -> Settings {
        Settings {
            memory_enabled: config.memory_enabled,
            min_user_turns: config.min_user_turns,
            max_injected_facts: config.max_injected_facts,
            min_confidence: config.min_confidence,
            extraction_instructions: config.extraction_instructions,
            extract_every_user_turns: config.extract_every_user_turns,
            summarize_after_messages: config.summarize_after_messages,
            summary_window: config.summary_window,
            forgetting: Forgetting {
                extracted_after_days: config.forget_extracted_after_days,
                unrecalled_after_days: config.forget_unrecalled_after_days,
                keep_best: config.keep_best_facts,
                curated: config.forget_curated_facts,
            },
            retention: Retention {
                max_messages: config.max_messages_per_conversation,
                conversations_after_days: config.delete_conversations_after_days,
            },
            delete_facts_with_conversation: config.delete_facts_with_conversation,
            reads_facts_of: config.reads_facts_of,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(json: &str) -> Result<ConfigPatch, String> {
        let patch: ConfigPatch = serde_json::from_str(json).map_err(|e| e.to_string())?;
        patch.validate()?;
        Ok(patch)
    }

    #[test]
    fn rejects_out_of_range_values() {
        for bad in [
            r#"{"min_user_turns": 0}"#,
            r#"{"min_user_turns": 101}"#,
            r#"{"max_injected_facts": 0}"#,
            r#"{"min_confidence": 2}"#,
            r#"{"min_confidence": -0.1}"#,
            r#"{"memory_enabled": "yes"}"#,
            r#"{"unknown": 1}"#,
            r#"{"summarize_after_messages": -1}"#,
            r#"{"summarize_after_messages": 1001}"#,
            r#"{"summary_window": -1}"#,
            r#"{"summary_window": 101}"#,
            r#"{"forget_extracted_after_days": -1}"#,
            r#"{"forget_extracted_after_days": 36501}"#,
            r#"{"forget_unrecalled_after_days": 36501}"#,
            r#"{"keep_best_facts": 100001}"#,
            r#"{"keep_best_facts": -3}"#,
            r#"{"forget_curated_facts": 1}"#,
            r#"{"max_messages_per_conversation": 1000001}"#,
            r#"{"delete_conversations_after_days": 36501}"#,
            r#"{"delete_conversations_after_days": 0.5}"#,
            r#"{"extract_every_user_turns": 0}"#,
            r#"{"extract_every_user_turns": 101}"#,
            r#"{"extract_every_user_turns": 2.5}"#,
            r#"{"extract_every_user_turns": "3"}"#,
        ] {
            assert!(patch(bad).is_err(), "{bad}");
        }
        for bad in [r#"{"min_user_turns": 2.5}"#, r#"{"max_injected_facts": 1e300}"#, r#"{"min_user_turns": true}"#] {
            assert!(patch(bad).is_err(), "{bad}");
        }
        let long = format!(r#"{{"extraction_instructions": "{}"}}"#, "x".repeat(4001));
        assert!(patch(&long).is_err());
    }

    /// JSON Schema's `integer` (what the spec says) includes `5.0`.
    #[test]
    fn integers_may_be_written_with_a_zero_fraction() {
        let written_as_float = patch(r#"{"min_user_turns": 5.0, "max_injected_facts": 7}"#).unwrap();
        assert_eq!((written_as_float.min_user_turns, written_as_float.max_injected_facts), (Some(5), Some(7)));
        assert_eq!(patch(r#"{"min_user_turns": null}"#).unwrap().min_user_turns, None);
    }

    #[test]
    fn summary_settings_take_their_whole_range() {
        let edges = patch(r#"{"summarize_after_messages": 0, "summary_window": 100}"#).unwrap();
        let applied = edges.apply(Settings::default());
        assert_eq!((applied.summarize_after_messages, applied.summary_window), (0, 100));
        let kept = patch(r#"{"memory_enabled": true}"#).unwrap().apply(Settings::default());
        assert_eq!((kept.summarize_after_messages, kept.summary_window), (20, 10));
        assert!(patch(r#"{"summarize_after_messages": 1000, "summary_window": 0}"#).is_ok());
    }

    #[test]
    fn forgetting_and_retention_take_their_whole_range_and_absent_keeps_them() {
        let set = patch(
            r#"{"forget_extracted_after_days": 36500, "forget_unrecalled_after_days": 1, "keep_best_facts": 100000,
                "forget_curated_facts": true, "max_messages_per_conversation": 1000000, "delete_conversations_after_days": 0}"#,
        )
        .unwrap()
        .apply(Settings::default());
        let forgetting =
            Forgetting { extracted_after_days: 36500, unrecalled_after_days: 1, keep_best: 100_000, curated: true };
        assert_eq!(set.forgetting, forgetting);
        assert_eq!(set.retention, Retention { max_messages: 1_000_000, conversations_after_days: 0 });
        let kept = patch(r#"{"memory_enabled": true}"#).unwrap().apply(set.clone());
        assert_eq!((kept.forgetting, kept.retention), (set.forgetting, set.retention));
        assert_eq!(Settings::default().forgetting, Forgetting::default(), "off unless set");
    }

    #[test]
    fn rolling_extraction_defaults_to_min_user_turns_and_null_turns_it_off() {
        assert_eq!(Settings::created_by(&patch(r#"{"min_user_turns": 5}"#).unwrap()).extract_every_user_turns, Some(5));
        let off = patch(r#"{"extract_every_user_turns": null}"#).unwrap();
        assert_eq!(Settings::created_by(&off).extract_every_user_turns, None);
        let every = Settings::created_by(&patch(r#"{"extract_every_user_turns": 7.0}"#).unwrap());
        assert_eq!(every.extract_every_user_turns, Some(7));
        let kept = patch(r#"{"min_user_turns": 9}"#).unwrap().apply(every);
        assert_eq!(kept.extract_every_user_turns, Some(7), "a later min_user_turns leaves it as set");
        assert_eq!(off.apply(kept).extract_every_user_turns, None);
    }

    #[test]
    fn shared_agents_are_few_distinct_and_not_the_agent_itself() {
        let me = AgentId::parse("sales".into()).unwrap();
        let ok = patch(r#"{"reads_facts_of": ["profile", "support"]}"#).unwrap();
        assert!(ok.validate_for(&me).is_ok());
        assert_eq!(ok.apply(Settings::default()).reads_facts_of.len(), 2);
        let kept = patch(r#"{"memory_enabled": true}"#).unwrap().apply(ok.apply(Settings::default()));
        assert_eq!(kept.reads_facts_of.len(), 2, "absent keeps");
        assert!(patch(r#"{"reads_facts_of": []}"#).unwrap().apply(kept).reads_facts_of.is_empty(), "[] stops");
        for bad in [
            r#"{"reads_facts_of": ["sales"]}"#,
            r#"{"reads_facts_of": ["profile", "profile"]}"#,
            r#"{"reads_facts_of": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]}"#,
        ] {
            assert!(patch(bad).unwrap().validate_for(&me).is_err(), "{bad}");
        }
        for bad in [r#"{"reads_facts_of": ["a/b"]}"#, r#"{"reads_facts_of": "profile"}"#] {
            assert!(patch(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn absent_keeps_and_null_clears_instructions() {
        let current = Settings { extraction_instructions: Some("be brief".into()), ..Settings::default() };
        let kept = patch(r#"{"memory_enabled": true}"#).unwrap().apply(current.clone());
        assert_eq!(kept.extraction_instructions.as_deref(), Some("be brief"));
        assert!(kept.memory_enabled);
        let cleared = patch(r#"{"extraction_instructions": null}"#).unwrap().apply(current);
        assert_eq!(cleared.extraction_instructions, None);
    }
}
