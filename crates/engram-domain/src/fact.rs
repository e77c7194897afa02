//! User facts: the stored object, and the validation of a new fact and of a partial
//! update, as pure functions so every write path (manual remember, extraction) applies
//! the same limits before touching storage.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    fact_text,
    ids::{AgentId, ExternalRef},
};

/// Longest fact, in characters of its cleaned form.
pub const MAX_FACT_CHARS: usize = 1000;
/// Most tags on one fact.
pub const MAX_TAGS: usize = 20;
/// Longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 64;

/// How a fact came to be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Found in a conversation by the extraction worker.
    Extracted,
    /// Sent through `POST …/facts`.
    Manual,
    /// Remembered by an agent's model through a tool (`/mcp` or `POST /api/tools/call`).
    Agent,
    /// Found in a conversation by the builtin rules, after the configured LLM extractor
    /// gave up on it (`ENGRAM_LLM_FALLBACK`): extracted like `extracted`, by the weaker
    /// extractor, which is worth knowing when the fact is judged.
    #[serde(rename = "builtin_fallback")]
    BuiltinFallback,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Extracted => "extracted",
            Source::Manual => "manual",
            Source::Agent => "agent",
            Source::BuiltinFallback => "builtin_fallback",
        }
    }

    pub fn parse(value: &str) -> Result<Source, String> {
        match value {
            "extracted" => Ok(Source::Extracted),
            "manual" => Ok(Source::Manual),
            "agent" => Ok(Source::Agent),
            "builtin_fallback" => Ok(Source::BuiltinFallback),
            other => Err(format!("unknown fact source {other:?}")),
        }
    }
}

/// Where a stored fact comes from: its `source` and `conversation_id` together, so an
/// extracted fact cannot lack its conversation nor a manual one have one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Manual,
    /// Remembered through a tool.
    Agent,
    Extracted {
        conversation_id: Uuid,
    },
    /// Extracted by the builtin rules after the LLM extractor gave up.
    Fallback {
        conversation_id: Uuid,
    },
}

impl Origin {
    pub fn source(self) -> Source {
        match self {
            Origin::Manual => Source::Manual,
            Origin::Agent => Source::Agent,
            Origin::Extracted { .. } => Source::Extracted,
            Origin::Fallback { .. } => Source::BuiltinFallback,
        }
    }

    pub fn conversation_id(self) -> Option<Uuid> {
        match self {
            Origin::Manual | Origin::Agent => None,
            Origin::Extracted { conversation_id } | Origin::Fallback { conversation_id } => Some(conversation_id),
        }
    }
}

/// A fact about one end user, as one agent knows it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Fact {
    pub id: Uuid,
    pub agent_id: AgentId,
    pub external_ref: ExternalRef,
    /// The fact as stored: control characters and whitespace runs collapsed to one space.
    #[schema(example = "Prefers tea over coffee")]
    pub fact: String,
    pub tags: Vec<String>,
    /// 0–1, or null when unscored (counts as 0.5 when a token budget must drop facts).
    pub score: Option<f64>,
    pub source: Source,
    /// The conversation an extracted fact came from; null for manual and agent facts.
    pub conversation_id: Option<Uuid>,
    /// The messages an extracted fact was drawn from, oldest first (at most 10, the
    /// newest kept); empty for manual and agent facts, and for facts extracted before
    /// provenance was recorded. A message cleared since (by retention, or on request)
    /// keeps its reference here.
    pub source_messages: Vec<SourceMessage>,
    #[serde(serialize_with = "super::timestamp::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "super::timestamp::serialize")]
    pub updated_at: DateTime<Utc>,
    /// The newer fact that replaced this one in a single-valued slot (a name, a home
    /// city, a job, an employer, an age, a relationship status, a birthday); null while
    /// the fact is current. Superseded facts leave memory context and search unless
    /// asked for with `include_superseded=true`.
    pub superseded_by: Option<Uuid>,
    /// When it was superseded; null while current.
    #[serde(serialize_with = "super::timestamp::option::serialize")]
    pub superseded_at: Option<DateTime<Utc>>,
    /// When the person said it: the time of the message an extracted fact came from, or
    /// the `observed_at` given when it was remembered (default: when it was stored).
    #[serde(serialize_with = "super::timestamp::serialize")]
    pub observed_at: DateTime<Utc>,
    /// Until when it was true: the `observed_at` of the fact that superseded it; null
    /// while current. `as_of` reads compare with it, so that a time before the
    /// replacement still finds this fact.
    #[serde(serialize_with = "super::timestamp::option::serialize")]
    pub valid_until: Option<DateTime<Utc>>,
    /// When it expires: from then on it is left out of every read, and the sweeper
    /// deletes it with its vector and history. Null for a fact that never expires.
    #[serde(serialize_with = "super::timestamp::option::serialize")]
    pub expires_at: Option<DateTime<Utc>>,
    /// How many times a read (memory context, search, the tools) returned it. Counted in
    /// memory and written every `ENGRAM_RECALL_FLUSH_SECS`, so it trails reads by up to
    /// that long.
    pub recall_count: i64,
    /// When a read last returned it (as written by the last flush); null if none did.
    #[serde(serialize_with = "super::timestamp::option::serialize")]
    pub last_recalled_at: Option<DateTime<Utc>>,
}

/// One message a fact was drawn from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub struct SourceMessage {
    pub conversation_id: Uuid,
    /// The message's `seq` in its conversation.
    pub seq: i64,
}

/// Most source messages one fact keeps: a fact said again and again keeps where it was
/// said most recently, and its row stays small.
pub const MAX_SOURCE_MESSAGES: usize = 10;

/// `held` with `added` appended, each message once, oldest first, cut to the newest
/// [`MAX_SOURCE_MESSAGES`]: the sources of a stored fact said again.
pub fn merge_sources(held: &[SourceMessage], added: &[SourceMessage]) -> Vec<SourceMessage> {
    let mut merged = held.to_vec();
    for source in added {
        if !merged.contains(source) {
            merged.push(*source);
        }
    }
    let cut = merged.len().saturating_sub(MAX_SOURCE_MESSAGES);
    merged.drain(..cut);
    merged
}

/// A fact's text, parsed once: the display form that is stored and its duplicate key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactText {
    text: String,
    normalized: String,
}

impl FactText {
    /// Cleans `raw` ([`fact_text::clean`]) and checks the length of the result. A text
    /// whose duplicate key is empty (only punctuation or invisible characters) is
    /// refused too: it says nothing, and all such texts would be "the same fact".
    /// The length is checked on `raw` too, so that the limit is the one a client can
    /// check before sending (the spec's `maxLength`), whatever cleaning removes.
    pub fn parse(raw: &str) -> Result<FactText, String> {
        let raw_chars = raw.chars().count();
        if raw_chars > MAX_FACT_CHARS {
            return Err(format!("fact must be 1-{MAX_FACT_CHARS} characters, got {raw_chars}"));
        }
        let text = fact_text::clean(raw);
        let chars = text.chars().count();
        if chars == 0 || chars > MAX_FACT_CHARS {
            return Err(format!("fact must be 1-{MAX_FACT_CHARS} characters (after trimming), got {chars}"));
        }
        let normalized = fact_text::normalize(&text);
        if normalized.is_empty() {
            return Err("fact must contain more than punctuation and invisible characters".into());
        }
        Ok(FactText { text, normalized })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The duplicate key (see [`fact_text::normalize`]).
    pub fn normalized(&self) -> &str {
        &self.normalized
    }
}

/// A validated fact, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewFact {
    pub text: FactText,
    pub tags: Vec<String>,
    pub score: Option<f64>,
    /// When the person said it; `None` for the time it is stored.
    pub observed_at: Option<DateTime<Utc>>,
    /// When it expires; `None` for never.
    pub expires_at: Option<DateTime<Utc>>,
    /// The `seq`s of the messages of its origin's conversation it was drawn from (an
    /// extracted fact's; empty otherwise), stored as its `source_messages`.
    pub said_in: Vec<i64>,
}

/// Longest `ttl_seconds`: ten years. Longer is not an expiry anyone means, and it keeps
/// `now + ttl` far inside what both databases store.
pub const MAX_TTL_SECONDS: i64 = 10 * 365 * 24 * 3600;

/// How far ahead of the server's clock an `observed_at` may be and still be taken (as
/// now): a client's clock a little ahead should not make its facts fail. Further ahead
/// is refused: a fact cannot have been said in the future.
pub const OBSERVED_AT_SKEW_SECONDS: i64 = 60;

/// A time as both databases keep it (PostgreSQL stores microseconds), so that a time a
/// client gives is the time it reads back.
pub fn stored_precision(time: DateTime<Utc>) -> DateTime<Utc> {
    chrono::SubsecRound::trunc_subsecs(time, 6)
}

/// A client's time as both databases store and order it alike: in the years 1–9999
/// (SQLite keeps times as text, which sorts by four digits; PostgreSQL would keep a
/// negative year as a year BC), at [`stored_precision`]; `field` names it in the refusal.
pub fn storable(field: &str, time: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    if (1..=9999).contains(&chrono::Datelike::year(&time)) {
        Ok(stored_precision(time))
    } else {
        Err(format!("{field} must be in the years 0001-9999"))
    }
}

/// When a fact to remember was said, and when it expires (`None`: now, and never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactTimes {
    pub observed_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// Checks the optional times of a fact to remember against `now`: `observed_at` not in
/// the future (beyond [`OBSERVED_AT_SKEW_SECONDS`], which is taken as now); at most one
/// of `expires_at` and `ttl_seconds` (1–[`MAX_TTL_SECONDS`]); an expiry after `now`.
pub fn validate_times(
    observed_at: Option<DateTime<Utc>>,
    expires_at: Option<DateTime<Utc>>,
    ttl_seconds: Option<i64>,
    now: DateTime<Utc>,
) -> Result<FactTimes, String> {
    let observed_at = match observed_at.map(|t| storable("observed_at", t)).transpose()? {
        Some(t) if t > now + chrono::TimeDelta::seconds(OBSERVED_AT_SKEW_SECONDS) => {
            return Err("observed_at must not be in the future".into());
        }
        Some(t) => Some(t.min(now)),
        None => None,
    };
    let expires_at = match (expires_at, ttl_seconds) {
        (Some(_), Some(_)) => return Err("give expires_at or ttl_seconds, not both".into()),
        (Some(t), None) => Some(storable("expires_at", t)?),
        (None, Some(ttl)) if (1..=MAX_TTL_SECONDS).contains(&ttl) => Some(now + chrono::TimeDelta::seconds(ttl)),
        (None, Some(ttl)) => return Err(format!("ttl_seconds must be 1-{MAX_TTL_SECONDS}, got {ttl}")),
        (None, None) => None,
    };
    if expires_at.is_some_and(|t| t <= now) {
        return Err("expires_at must be in the future".into());
    }
    Ok(FactTimes { observed_at, expires_at })
}

/// A tag as the spec states it (the rule is [`validate_tag`]): 1–64 characters, none of
/// them a control character.
#[derive(ToSchema)]
#[schema(value_type = String, min_length = 1, max_length = 64, pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$")]
#[allow(dead_code)] // only its schema is used
pub struct Tag(String);

/// A fact's text as the spec states it (the rule is [`FactText::parse`]): 1–1000
/// characters as sent, stored with whitespace runs collapsed and the ends trimmed. It
/// must hold something besides white space, control and invisible (format) characters
/// and the trailing punctuation `. , ; : ! ? …` (the pattern lists those of the Basic
/// Multilingual Plane).
#[derive(ToSchema)]
#[schema(value_type = String, min_length = 1, max_length = 1000, pattern = "[^\\u0000-\\u0020\\u007F-\\u00A0\\u00AD\\u0600-\\u0605\\u061C\\u06DD\\u070F\\u0890\\u0891\\u08E2\\u1680\\u180E\\u2000-\\u200F\\u2028-\\u202F\\u205F-\\u2064\\u2066-\\u206F\\u3000\\uFEFF\\uFFF9-\\uFFFB.,;:!?\\u2026]", example = "Prefers tea over coffee")]
#[allow(dead_code)] // only its schema is used
pub struct FactString(String);

/// The body of `POST …/facts`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"fact": "Is waiting at the ferry terminal", "tags": ["travel"], "ttl_seconds": 3600}))]
pub struct FactInput {
    #[schema(value_type = FactString)]
    pub fact: String,
    /// At most 20 tags; repeated tags are kept once.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Tag>>, max_items = 20)]
    pub tags: Option<Vec<String>>,
    /// 0–1; omitted or null for an unscored fact.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub score: Option<f64>,
    /// When the person said it (RFC 3339); default now. Not in the future (up to 60 s
    /// ahead is taken as now). A fact of a single-valued slot said before the slot's
    /// current fact is stored already superseded by it.
    #[serde(default)]
    pub observed_at: Option<DateTime<Utc>>,
    /// When the fact expires (RFC 3339, in the future); not with `ttl_seconds`.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    /// Expire the fact this many seconds from now (1–315 360 000, ten years); not with
    /// `expires_at`.
    #[serde(default, deserialize_with = "super::agent_config::whole_number")]
    #[schema(minimum = 1, maximum = 315_360_000)]
    pub ttl_seconds: Option<i64>,
}

impl FactInput {
    /// The fact as it will be stored; `now` is the time its expiry and `observed_at` are
    /// judged against.
    pub fn validate(self, now: DateTime<Utc>) -> Result<NewFact, String> {
        let FactTimes { observed_at, expires_at } =
            validate_times(self.observed_at, self.expires_at, self.ttl_seconds, now)?;
        Ok(NewFact {
            text: FactText::parse(&self.fact)?,
            tags: validate_tags(self.tags.unwrap_or_default())?,
            score: self.score.map(validate_score).transpose()?,
            observed_at,
            expires_at,
            said_in: Vec::new(),
        })
    }
}

/// The body of `PATCH …/facts/{fact_id}`: absent fields keep their value. `score: null`
/// clears the score (the fact becomes unscored); `fact` and `tags` cannot be null
/// (send `[]` to remove every tag). An empty patch is refused, so a client whose
/// update silently carried nothing finds out.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(min_properties = 1)]
pub struct FactPatch {
    /// As in `POST …/facts`; 409 when another stored fact of this user is the same fact.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = FactString)]
    pub fact: Option<String>,
    /// Replaces the whole tag list (at most 20).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Vec<Tag>, max_items = 20)]
    pub tags: Option<Vec<String>>,
    /// 0–1, or null to clear.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<f64>, minimum = 0.0, maximum = 1.0)]
    pub score: Option<Option<f64>>,
}

/// A validated patch; `None` keeps the stored value.
#[derive(Debug, Clone, PartialEq)]
pub struct FactChanges {
    pub text: Option<FactText>,
    pub tags: Option<Vec<String>>,
    pub score: Option<Option<f64>>,
}

impl FactPatch {
    pub fn validate(self) -> Result<FactChanges, String> {
        if self.fact.is_none() && self.tags.is_none() && self.score.is_none() {
            return Err("patch must set at least one of fact, tags, score".into());
        }
        Ok(FactChanges {
            text: self.fact.as_deref().map(FactText::parse).transpose()?,
            tags: self.tags.map(validate_tags).transpose()?,
            score: self.score.map(|score| score.map(validate_score).transpose()).transpose()?,
        })
    }
}

/// A field that is there, even as `null` (which then reaches `T`'s own deserializer:
/// an `Option` takes it, a `String` refuses it).
pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Checks one tag; also used for the `tag` filter of lists and search.
pub fn validate_tag(tag: &str) -> Result<(), String> {
    let chars = tag.chars().count();
    if chars == 0 || chars > MAX_TAG_CHARS {
        return Err(format!("a tag must be 1-{MAX_TAG_CHARS} characters, got {chars}"));
    }
    if tag.chars().any(char::is_control) {
        return Err("a tag must not contain control characters".into());
    }
    Ok(())
}

/// Checks a tag list and drops repeats (keeping the first), since tags are a set.
fn validate_tags(tags: Vec<String>) -> Result<Vec<String>, String> {
    if tags.len() > MAX_TAGS {
        return Err(format!("at most {MAX_TAGS} tags, got {}", tags.len()));
    }
    let mut unique: Vec<String> = Vec::with_capacity(tags.len());
    for tag in tags {
        validate_tag(&tag)?;
        if !unique.contains(&tag) {
            unique.push(tag);
        }
    }
    Ok(unique)
}

fn validate_score(score: f64) -> Result<f64, String> {
    if score.is_finite() && (0.0..=1.0).contains(&score) {
        Ok(score)
    } else {
        Err(format!("score must be between 0 and 1, got {score}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(json: &str) -> Result<NewFact, String> {
        serde_json::from_str::<FactInput>(json).map_err(|e| e.to_string())?.validate(Utc::now())
    }

    fn patch(json: &str) -> Result<FactChanges, String> {
        serde_json::from_str::<FactPatch>(json).map_err(|e| e.to_string())?.validate()
    }

    #[test]
    fn new_fact_is_cleaned_and_keyed() {
        let fact = input(r#"{"fact": "  Prefers TEA\nover   coffee. ", "tags": ["drinks"], "score": 0.9}"#).unwrap();
        assert_eq!(fact.text.text(), "Prefers TEA over coffee.");
        assert_eq!(fact.text.normalized(), "prefers tea over coffee");
        assert_eq!(fact.tags, ["drinks"]);
        assert_eq!(fact.score, Some(0.9));
        let bare = input(r#"{"fact": "x", "score": null}"#).unwrap();
        assert_eq!((bare.tags.len(), bare.score), (0, None));
    }

    #[test]
    fn fact_length_is_counted_in_characters_as_sent_and_after_cleaning() {
        assert!(FactText::parse(&"é".repeat(MAX_FACT_CHARS)).is_ok());
        assert!(FactText::parse(&"é".repeat(MAX_FACT_CHARS + 1)).is_err());
        // The spec's maxLength is on the text as sent: whitespace that cleaning would
        // remove still counts, so a client's own check agrees with the server.
        let padded = format!(" {} ", "x".repeat(MAX_FACT_CHARS - 2));
        assert_eq!(FactText::parse(&padded).map(|t| t.text().len()), Ok(MAX_FACT_CHARS - 2));
        assert!(FactText::parse(&format!("  {}", "x".repeat(MAX_FACT_CHARS - 1))).is_err());
        for empty in ["", "   ", "\n\t", "\u{0}"] {
            assert!(FactText::parse(empty).is_err(), "{empty:?}");
        }
    }

    #[test]
    fn fact_without_content_is_refused() {
        for nothing in ["?!.", "…", "\u{200B}", ". ,"] {
            assert!(FactText::parse(nothing).is_err(), "{nothing:?}");
        }
        assert!(FactText::parse("42").is_ok());
    }

    #[test]
    fn invalid_inputs_are_refused() {
        let too_many = serde_json::to_string(&(0..=MAX_TAGS).map(|i| format!("t{i}")).collect::<Vec<_>>()).unwrap();
        let long_tag = "x".repeat(MAX_TAG_CHARS + 1);
        for bad in [
            r#"{"fact": ""}"#.to_string(),
            r#"{"tags": ["a"]}"#.to_string(),
            r#"{"fact": null}"#.to_string(),
            format!(r#"{{"fact": "{}"}}"#, "x".repeat(MAX_FACT_CHARS + 1)),
            format!(r#"{{"fact": "x", "tags": {too_many}}}"#),
            format!(r#"{{"fact": "x", "tags": ["{long_tag}"]}}"#),
            r#"{"fact": "x", "tags": [""]}"#.to_string(),
            r#"{"fact": "x", "tags": ["a\nb"]}"#.to_string(),
            r#"{"fact": "x", "score": 1.5}"#.to_string(),
            r#"{"fact": "x", "score": -0.1}"#.to_string(),
            r#"{"fact": "x", "score": "high"}"#.to_string(),
            r#"{"fact": "x", "source": "manual"}"#.to_string(),
        ] {
            assert!(input(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn limits_are_inclusive() {
        let tags = serde_json::to_string(&(0..MAX_TAGS).map(|i| format!("t{i}")).collect::<Vec<_>>()).unwrap();
        let tag = "x".repeat(MAX_TAG_CHARS);
        assert!(input(&format!(r#"{{"fact": "x", "tags": {tags}}}"#)).is_ok());
        assert!(input(&format!(r#"{{"fact": "x", "tags": ["{tag}"], "score": 0}}"#)).is_ok());
        assert!(input(r#"{"fact": "x", "score": 1}"#).is_ok());
    }

    #[test]
    fn repeated_tags_are_kept_once() {
        let fact = input(r#"{"fact": "x", "tags": ["b", "a", "b", "A"]}"#).unwrap();
        assert_eq!(fact.tags, ["b", "a", "A"]);
    }

    #[test]
    fn score_must_be_finite() {
        assert!(validate_score(f64::NAN).is_err());
        assert!(validate_score(f64::INFINITY).is_err());
        assert!(validate_score(0.5).is_ok());
    }

    #[test]
    fn patch_distinguishes_absent_from_null() {
        let keep = patch(r#"{"tags": []}"#).unwrap();
        assert_eq!(keep, FactChanges { text: None, tags: Some(vec![]), score: None });
        let clear = patch(r#"{"score": null}"#).unwrap();
        assert_eq!(clear.score, Some(None));
        let set = patch(r#"{"score": 0.25, "fact": " Likes  tea "}"#).unwrap();
        assert_eq!(set.score, Some(Some(0.25)));
        assert_eq!(set.text.map(|t| t.text().to_owned()).as_deref(), Some("Likes tea"));
    }

    #[test]
    fn invalid_patches_are_refused() {
        for bad in [
            "{}",
            r#"{"fact": null}"#,
            r#"{"tags": null}"#,
            r#"{"fact": " "}"#,
            r#"{"score": 2}"#,
            r#"{"tags": ["", "a"]}"#,
            r#"{"fact": "x", "source": "manual"}"#,
        ] {
            assert!(patch(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn times_are_checked_against_now() {
        let now = "2026-05-01T12:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let at = |s: &str| Some(s.parse::<DateTime<Utc>>().unwrap());
        let times = |observed_at, expires_at| Ok(FactTimes { observed_at, expires_at });
        let earlier = at("2025-01-01T08:30:00+02:00");
        assert_eq!(validate_times(earlier, None, None, now), times(earlier, None));
        assert_eq!(validate_times(None, None, Some(60), now), times(None, at("2026-05-01T12:01:00Z")));
        let tomorrow = at("2026-05-02T00:00:00Z");
        assert_eq!(validate_times(None, tomorrow, None, now), times(None, tomorrow));
        // A client's clock a little ahead is taken as now; further ahead is refused.
        assert_eq!(validate_times(at("2026-05-01T12:00:30Z"), None, None, now), times(Some(now), None));
        assert!(validate_times(at("2026-05-01T12:01:01Z"), None, None, now).is_err());
        assert!(validate_times(None, at("2026-05-02T00:00:00Z"), Some(60), now).unwrap_err().contains("not both"));
        assert!(validate_times(None, Some(now), None, now).is_err(), "an expiry must be after now");
        assert!(validate_times(None, at("2020-01-01T00:00:00Z"), None, now).is_err());
        for ttl in [0, -5, MAX_TTL_SECONDS + 1] {
            assert!(validate_times(None, None, Some(ttl), now).is_err(), "{ttl}");
        }
        assert!(validate_times(None, None, Some(MAX_TTL_SECONDS), now).is_ok());
        // Kept at the precision the databases store.
        let fine = at("2025-01-01T00:00:00.123456789Z");
        assert_eq!(validate_times(fine, None, None, now).unwrap().observed_at, at("2025-01-01T00:00:00.123456Z"));
    }

    #[test]
    fn source_round_trips() {
        for source in [Source::Extracted, Source::Manual, Source::Agent, Source::BuiltinFallback] {
            assert_eq!(Source::parse(source.as_str()), Ok(source));
            assert_eq!(serde_json::to_value(source).unwrap(), source.as_str());
        }
        assert!(Source::parse("other").is_err());
    }
}
