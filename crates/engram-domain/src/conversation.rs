//! Conversations: the object of the API, what a client may set on one, the
//! `Idempotency-Key` of an append, and the rule that decides whether ending a
//! conversation queues a fact extraction.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    ids::{AgentId, ConversationKey, ExternalRef},
    message::{Message, NewMessage},
    metadata::validate_metadata,
};

/// Longest title, in characters: a label for a list, not a document.
pub const MAX_TITLE_CHARS: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConversationStatus {
    Open,
    Ended,
}

impl ConversationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConversationStatus::Open => "open",
            ConversationStatus::Ended => "ended",
        }
    }

    pub fn parse(text: &str) -> Option<ConversationStatus> {
        match text {
            "open" => Some(ConversationStatus::Open),
            "ended" => Some(ConversationStatus::Ended),
            _ => None,
        }
    }
}

/// A conversation, as returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Conversation {
    pub id: Uuid,
    pub agent_id: AgentId,
    pub external_ref: ExternalRef,
    /// The client's own name for the thread, unique per agent; `null` when none was given.
    #[schema(value_type = Option<ConversationKey>)]
    pub key: Option<ConversationKey>,
    pub title: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    /// False: this conversation is never extracted (its end says `conversation_opted_out`).
    pub memory: bool,
    pub status: ConversationStatus,
    pub message_count: i64,
    /// Messages with role `user`.
    pub user_turns: i64,
    /// The last `seq` a finished extraction covered (0: none yet): the messages up to it
    /// were read by an extraction (or imported as extracted) and are never read as new
    /// again. Rolling extraction moves it while the conversation is open. 0 in an answer
    /// replayed for an `Idempotency-Key` stored before the field existed.
    #[serde(default)]
    #[schema(required = true)]
    pub extracted_through_seq: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
}

/// `POST /api/conversations`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewConversation {
    pub agent_id: AgentId,
    pub external_ref: ExternalRef,
    /// The client's own name for the thread, unique per agent. Creating again with a key
    /// that exists returns that thread (200) when every other field agrees, else 409.
    #[serde(default)]
    #[schema(value_type = Option<ConversationKey>)]
    pub key: Option<ConversationKey>,
    #[serde(default)]
    #[schema(max_length = 500)]
    pub title: Option<String>,
    /// A JSON object of at most 16 KiB serialized; `{}` when absent.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    /// `false` opts this conversation out of extraction; default `true`.
    #[serde(default)]
    #[schema(default = true)]
    pub memory: Option<bool>,
}

impl NewConversation {
    pub fn validate(&self) -> Result<(), String> {
        validate_title(self.title.as_deref())?;
        validate_metadata(self.metadata.as_ref())
    }

    /// The metadata to store: `{}` when absent.
    pub fn metadata_or_empty(&self) -> serde_json::Value {
        self.metadata.clone().unwrap_or_else(|| serde_json::json!({}))
    }

    /// Whether a thread found under this request's key is the one this request would
    /// create: same user, title, metadata and `memory`, absent fields read as their
    /// defaults. A retried create agrees; a second thread that reused the key does not.
    pub fn agrees_with(&self, existing: &Conversation) -> bool {
        existing.agent_id == self.agent_id
            && existing.external_ref == self.external_ref
            && existing.title == self.title
            && existing.metadata == self.metadata_or_empty()
            && existing.memory == self.memory.unwrap_or(true)
    }
}

/// `PATCH /api/conversations/{id}`: absent fields are kept; a `null` title clears it;
/// `metadata` replaces the stored object whole.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationPatch {
    /// `null` clears it.
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<String>, max_length = 500)]
    pub title: Option<Option<String>>,
    /// A JSON object of at most 16 KiB serialized.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    /// `false` opts the conversation out of extraction from now on: queued or running
    /// extractions of it are cancelled. `true` opts it back in.
    #[serde(default)]
    pub memory: Option<bool>,
}

fn double_option<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

impl ConversationPatch {
    pub fn validate(&self) -> Result<(), String> {
        validate_title(self.title.as_ref().and_then(Option::as_deref))?;
        validate_metadata(self.metadata.as_ref())
    }
}

fn validate_title(title: Option<&str>) -> Result<(), String> {
    match title {
        Some(t) if t.chars().count() > MAX_TITLE_CHARS => {
            Err(format!("title must be at most {MAX_TITLE_CHARS} characters"))
        }
        _ => Ok(()),
    }
}

/// `POST /api/conversations/{id}/messages`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendRequest {
    /// Stored in this order, all or none.
    #[schema(min_items = 1, max_items = 100)]
    pub messages: Vec<NewMessage>,
    /// Store only if the conversation's newest `seq` is still this (0: no message yet);
    /// otherwise 409 `conflict` with the current one in `error.last_seq`, nothing stored.
    /// Left out of the fingerprint when absent, so keys stored before it existed still match.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "super::agent_config::whole_number")]
    #[schema(minimum = 0, maximum = 9_007_199_254_740_991_i64)]
    pub expected_last_seq: Option<i64>,
}

impl AppendRequest {
    /// The fingerprint an `Idempotency-Key` is bound to: the SHA-256 of the parsed
    /// request re-serialized, so whitespace and field order of a resent body do not
    /// count as a different request, while any change of value does.
    pub fn fingerprint(&self) -> String {
        crate::crypto::sha256_hex(&serde_json::to_vec(self).unwrap_or_default())
    }
}

/// The answer to an append, also what a repeated `Idempotency-Key` gets back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Appended {
    pub messages: Vec<Message>,
    pub conversation: Conversation,
}

/// A client's `Idempotency-Key`: 1–255 visible ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(value: &str) -> Result<IdempotencyKey, String> {
        if value.is_empty() || value.len() > 255 || !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("Idempotency-Key must be 1-255 visible ASCII characters".into());
        }
        Ok(IdempotencyKey(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why ending a conversation queued no extraction, in the order the rule checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    MemoryDisabled,
    ConversationOptedOut,
    ConsentRefused,
    TooFewUserTurns,
    NothingNew,
}

/// What the extraction rule looks at, read under the conversation's row lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtractionInputs {
    /// False when the agent was never configured.
    pub memory_enabled: bool,
    /// The conversation's own `memory` flag.
    pub conversation_memory: bool,
    pub min_user_turns: i64,
    /// The user's consent, resolved by [`Policy::consent`](super::policy::Policy::consent).
    pub consent: bool,
    pub user_turns: i64,
    pub last_user_seq: i64,
    pub extracted_through_seq: i64,
    pub queued_through_seq: i64,
}

/// Whether ending a conversation queues an extraction: `Ok` to queue, else the first
/// failing condition of docs/api.md (`POST …/end`), checked in its order.
pub fn extraction_decision(inputs: &ExtractionInputs) -> Result<(), SkipReason> {
    if !inputs.memory_enabled {
        return Err(SkipReason::MemoryDisabled);
    }
    if !inputs.conversation_memory {
        return Err(SkipReason::ConversationOptedOut);
    }
    if !inputs.consent {
        return Err(SkipReason::ConsentRefused);
    }
    if inputs.user_turns < inputs.min_user_turns {
        return Err(SkipReason::TooFewUserTurns);
    }
    // A queued (not yet done) extraction already covers everything up to its mark.
    if inputs.last_user_seq <= inputs.extracted_through_seq.max(inputs.queued_through_seq) {
        return Err(SkipReason::NothingNew);
    }
    Ok(())
}

/// What an append looks at to decide whether its user turns complete a segment of rolling
/// extraction, read from the conversation row it bumped. A due segment is then checked
/// by [`extraction_decision`] (consent, `min_user_turns`) under the same row lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInputs {
    /// False when the agent was never configured.
    pub memory_enabled: bool,
    /// The conversation's own `memory` flag.
    pub conversation_memory: bool,
    /// The agent's `extract_every_user_turns`; `None`: extraction at the end only.
    pub every: Option<i32>,
    pub user_turns: i64,
    /// `user_turns` when the last segment was due.
    pub segment_user_turns: i64,
}

/// Whether the user turns since the last due segment make a new one.
pub fn segment_due(inputs: &SegmentInputs) -> bool {
    let Some(every) = inputs.every else { return false };
    inputs.memory_enabled
        && inputs.conversation_memory
        && inputs.user_turns - inputs.segment_user_turns >= i64::from(every)
}

/// The `extraction` part of the end response.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Extraction {
    pub queued: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<SkipReason>,
}

impl Extraction {
    pub fn queued(job_id: Uuid) -> Extraction {
        Extraction { queued: true, job_id: Some(job_id), reason: None }
    }

    pub fn skipped(reason: SkipReason) -> Extraction {
        Extraction { queued: false, job_id: None, reason: Some(reason) }
    }
}

/// The answer to `POST /api/conversations/{id}/end` (and what the idle sweeper does).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Ended {
    pub conversation: Conversation,
    pub extraction: Extraction,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ready() -> ExtractionInputs {
        ExtractionInputs {
            memory_enabled: true,
            conversation_memory: true,
            min_user_turns: 3,
            consent: true,
            user_turns: 3,
            last_user_seq: 6,
            extracted_through_seq: 0,
            queued_through_seq: 0,
        }
    }

    #[test]
    fn expected_last_seq_may_be_written_with_a_zero_fraction() {
        let body =
            |seq: serde_json::Value| json!({"messages": [{"role": "user", "content": "x"}], "expected_last_seq": seq});
        let read = |seq| serde_json::from_value::<AppendRequest>(body(seq)).map(|r| r.expected_last_seq);
        assert_eq!(read(json!(1.0)).expect("1.0 is an integer"), Some(1));
        // Any float that holds an integer exactly, up to 2^53 − 1, the spec's maximum.
        assert_eq!(read(json!(6_402_373_705_727_999.0)).expect("exact"), Some(6_402_373_705_727_999));
        assert_eq!(read(json!(9_007_199_254_740_991.0)).expect("2^53 - 1"), Some(9_007_199_254_740_991));
        assert!(read(json!(1e300)).is_err());
        assert_eq!(read(json!(7)).expect("7"), Some(7));
        assert!(read(json!(1.5)).is_err());
        assert!(read(json!("1")).is_err());
    }

    #[test]
    fn queues_when_every_condition_holds() {
        assert_eq!(extraction_decision(&ready()), Ok(()));
        let after_a_partial_extraction = ExtractionInputs { extracted_through_seq: 5, ..ready() };
        assert_eq!(extraction_decision(&after_a_partial_extraction), Ok(()));
    }

    #[test]
    fn each_condition_has_its_reason() {
        let cases = [
            (ExtractionInputs { memory_enabled: false, ..ready() }, SkipReason::MemoryDisabled),
            (ExtractionInputs { conversation_memory: false, ..ready() }, SkipReason::ConversationOptedOut),
            (ExtractionInputs { consent: false, ..ready() }, SkipReason::ConsentRefused),
            (ExtractionInputs { user_turns: 2, ..ready() }, SkipReason::TooFewUserTurns),
            (ExtractionInputs { extracted_through_seq: 6, ..ready() }, SkipReason::NothingNew),
            (ExtractionInputs { queued_through_seq: 7, ..ready() }, SkipReason::NothingNew),
        ];
        for (inputs, reason) in cases {
            assert_eq!(extraction_decision(&inputs), Err(reason), "{inputs:?}");
        }
    }

    #[test]
    fn reasons_are_checked_in_contract_order() {
        let everything_wrong = ExtractionInputs {
            memory_enabled: false,
            conversation_memory: false,
            consent: false,
            user_turns: 0,
            last_user_seq: 0,
            ..ready()
        };
        assert_eq!(extraction_decision(&everything_wrong), Err(SkipReason::MemoryDisabled));
        let agent_on = ExtractionInputs { memory_enabled: true, ..everything_wrong };
        assert_eq!(extraction_decision(&agent_on), Err(SkipReason::ConversationOptedOut));
        let memory_on = ExtractionInputs { conversation_memory: true, ..agent_on };
        assert_eq!(extraction_decision(&memory_on), Err(SkipReason::ConsentRefused));
        let consented = ExtractionInputs { consent: true, ..memory_on };
        assert_eq!(extraction_decision(&consented), Err(SkipReason::TooFewUserTurns));
        let enough_turns = ExtractionInputs { user_turns: 3, ..consented };
        assert_eq!(extraction_decision(&enough_turns), Err(SkipReason::NothingNew));
    }

    #[test]
    fn a_segment_is_due_every_n_user_turns_when_memory_is_on() {
        let at = |user_turns, segment_user_turns| SegmentInputs {
            memory_enabled: true,
            conversation_memory: true,
            every: Some(3),
            user_turns,
            segment_user_turns,
        };
        assert!(!segment_due(&at(2, 0)));
        assert!(segment_due(&at(3, 0)));
        assert!(!segment_due(&at(5, 3)));
        assert!(segment_due(&at(7, 3)), "a batch may bring more than N");
        assert!(!segment_due(&SegmentInputs { every: None, ..at(40, 0) }), "null: at the end only");
        assert!(!segment_due(&SegmentInputs { memory_enabled: false, ..at(3, 0) }));
        assert!(!segment_due(&SegmentInputs { conversation_memory: false, ..at(3, 0) }));
    }

    #[test]
    fn idempotency_keys_are_visible_ascii_up_to_255() {
        for ok in ["a", "retry-1", "2f1c:9", &"k".repeat(255)] {
            assert!(IdempotencyKey::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "has space", "tab\t", "é", &"k".repeat(256)] {
            assert!(IdempotencyKey::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn fingerprint_ignores_layout_but_not_values() {
        let parse = |text: &str| serde_json::from_str::<AppendRequest>(text).unwrap().fingerprint();
        let a = parse(r#"{"messages":[{"role":"user","content":"hi"}]}"#);
        let b = parse(r#"{ "messages" : [ { "content" : "hi", "role" : "user" } ] }"#);
        let c = parse(r#"{"messages":[{"role":"user","content":"hello"}]}"#);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn new_conversation_and_patch_validation() {
        let parse_new = |v: serde_json::Value| {
            serde_json::from_value::<NewConversation>(v).map_err(|e| e.to_string()).and_then(|n| n.validate())
        };
        assert!(parse_new(json!({"agent_id": "bot", "external_ref": "u1"})).is_ok());
        assert!(parse_new(json!({"agent_id": "bot", "external_ref": "u1", "title": "t", "metadata": {}})).is_ok());
        for bad in [
            json!({"agent_id": "bot"}),
            json!({"agent_id": "b/t", "external_ref": "u1"}),
            json!({"agent_id": "bot", "external_ref": ""}),
            json!({"agent_id": "bot", "external_ref": "u1", "metadata": []}),
            json!({"agent_id": "bot", "external_ref": "u1", "title": "x".repeat(501)}),
            json!({"agent_id": "bot", "external_ref": "u1", "status": "open"}),
        ] {
            assert!(parse_new(bad.clone()).is_err(), "{bad}");
        }
        let parse_patch = |v: serde_json::Value| {
            serde_json::from_value::<ConversationPatch>(v)
                .map_err(|e| e.to_string())
                .and_then(|p| p.validate().map(|()| p))
        };
        assert_eq!(parse_patch(json!({"title": null})).unwrap().title, Some(None));
        assert_eq!(parse_patch(json!({})).unwrap().title, None);
        assert!(parse_patch(json!({"metadata": "x"})).is_err());
        assert!(parse_patch(json!({"agent_id": "other"})).is_err());
    }
}
