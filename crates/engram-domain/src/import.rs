//! The NDJSON import and export format: one record a line, tagged by `type`
//! (`conversation`, `fact`, `consent`), each with the client's own `id` (what makes a
//! re-run add nothing twice) and its original times. `engram export` writes the same
//! records, so an export imports into an empty database as it was. The JSON Schema of a
//! line (`openapi/import-record.schema.json`) is generated from these types.
//!
//! Here: the types, their validation into what the store writes, and the codes a bad
//! line is reported with.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    conversation::{MAX_TITLE_CHARS, NewConversation},
    fact::{FactInput, NewFact, OBSERVED_AT_SKEW_SECONDS, Source, storable},
    ids::{AgentId, ConversationKey, ExternalRef, TenantId},
    message::{NewMessage, Role, ToolCall},
};

/// Longest client id, in bytes.
pub const MAX_CLIENT_ID_BYTES: usize = 256;

/// One line of an import (or export) file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImportRecord {
    Conversation(ConversationRecord),
    Fact(FactRecord),
    Consent(ConsentRecord),
}

/// A conversation with all its messages, as it was: its times, its end, its key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationRecord {
    /// The client's id of this conversation (1–256 bytes): importing it again adds
    /// nothing, and facts name it in `conversation_id`.
    pub id: String,
    /// The tenant this line is for; when present it must be the importing tenant's,
    /// or the line is reported (`tenant_mismatch`) and skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub agent_id: AgentId,
    pub external_ref: ExternalRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<ConversationKey>)]
    pub key: Option<ConversationKey>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 500)]
    pub title: Option<String>,
    /// A JSON object of at most 16 KiB serialized; `{}` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    /// `false` opts the conversation out of extraction; default `true`.
    #[serde(default = "yes")]
    pub memory: bool,
    pub created_at: DateTime<Utc>,
    /// Default: the last message's time (or `created_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<DateTime<Utc>>,
    /// When it ended; absent for a conversation still open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    /// Oldest first; they get `seq` 1, 2, 3… in this order.
    #[serde(default)]
    pub messages: Vec<MessageRecord>,
}

fn yes() -> bool {
    true
}

/// A message as it was sent, with its original time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageRecord {
    pub role: Role,
    #[schema(schema_with = super::message::content_schema)]
    pub content: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
}

/// A fact with its original times and source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FactRecord {
    /// The client's id of this fact (1–256 bytes).
    pub id: String,
    /// As on a conversation record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub agent_id: AgentId,
    pub external_ref: ExternalRef,
    #[schema(value_type = crate::fact::FactString)]
    pub fact: String,
    #[serde(default)]
    #[schema(value_type = Vec<crate::fact::Tag>, max_items = 20)]
    pub tags: Vec<String>,
    #[serde(default)]
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub score: Option<f64>,
    /// Default `manual`. `extracted` and `builtin_fallback` need `conversation_id`.
    #[serde(default = "manual")]
    pub source: Source,
    /// The client id of the conversation record (imported before, in this file or an
    /// earlier one) an extracted fact came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// When it was first stored; default the time of the import. Not in the future.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    /// When the person said it; default `created_at`. A fact of a single-valued slot
    /// takes its place on the slot's timeline by this time, whatever the order of lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<DateTime<Utc>>,
    /// When it expires (in the future); not with `ttl_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Expire this many seconds after the import (1–315 360 000); not with `expires_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 315_360_000)]
    pub ttl_seconds: Option<i64>,
}

fn manual() -> Source {
    Source::Manual
}

/// A person's AI consent. Consent is the person's, whatever the agent, so the record
/// names no agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsentRecord {
    /// The client's id of this record (1–256 bytes).
    pub id: String,
    /// As on a conversation record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub external_ref: ExternalRef,
    pub ai_consent: bool,
    /// When it was given or refused; default the time of the import.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<DateTime<Utc>>,
}

/// Why a line was skipped: its code (stable, for programs) and a message that never
/// quotes the line (it holds personal data, and the report is kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LineError {
    /// `malformed_json`, `invalid_record`, `nul_byte`, `invalid_utf8`, `line_too_long`,
    /// `tenant_mismatch`, `unknown_conversation`, `key_taken`.
    pub code: String,
    pub message: String,
}

impl LineError {
    pub fn new(code: &str, message: impl Into<String>) -> LineError {
        LineError { code: code.to_owned(), message: message.into() }
    }

    fn invalid(message: impl Into<String>) -> LineError {
        LineError::new("invalid_record", message)
    }

    /// A line that is not a record: bad JSON, or JSON of the wrong shape. serde's own
    /// message may quote a value ("invalid type: string \"…\""), so only messages
    /// that name fields, or the format's own rules, are kept; the rest say where.
    pub fn from_json(error: &serde_json::Error) -> LineError {
        use serde_json::error::Category;
        let column = error.column();
        match error.classify() {
            Category::Syntax | Category::Eof | Category::Io => {
                LineError::new("malformed_json", format!("malformed JSON at column {column}"))
            }
            Category::Data => {
                let text = error.to_string();
                let quotes_a_value =
                    ["invalid type", "invalid value", "invalid length"].iter().any(|p| text.starts_with(p));
                if quotes_a_value {
                    LineError::invalid(format!("a field has the wrong type or value (column {column})"))
                } else {
                    LineError::invalid(text)
                }
            }
        }
    }
}

/// A bad line: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LineReport {
    /// 1 for the first line.
    pub line: u64,
    #[serde(flatten)]
    pub error: LineError,
}

/// How many bad lines an import keeps the report of; the rest are counted only.
pub const MAX_LINE_REPORTS: usize = 100;

/// An import's counts so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Progress {
    /// Lines read, blank ones included.
    pub lines_read: i64,
    /// Records written (a fact said before is written as that fact: it counts here).
    pub added: i64,
    /// Records whose client id was imported before: nothing written.
    pub duplicates: i64,
    /// Bad lines, reported and skipped.
    pub failed: i64,
    /// Conversations written that were queued for extraction (`extract=true`: ended,
    /// and meeting the agent's rules as a live conversation's end would).
    pub queued_for_extraction: i64,
    /// The first 100 bad lines' reports; `GET /api/import/{id}/errors` pages through
    /// all of them.
    pub errors: Vec<LineReport>,
    /// Reports not saved yet (with the next progress save, which empties it).
    #[serde(skip)]
    pub unsaved: Vec<LineReport>,
}

impl Progress {
    /// Counts a bad line, keeping its report for the next save, and among the first
    /// ones while there is room.
    pub fn fail(&mut self, line: u64, error: LineError) {
        self.failed += 1;
        let report = LineReport { line, error };
        if self.errors.len() < MAX_LINE_REPORTS {
            self.errors.push(report.clone());
        }
        self.unsaved.push(report);
    }
}

/// How an import writes: who its events name, whether its conversations go to
/// extraction (`extract=true`), and the consent of a person who never said
/// (`ENGRAM_DEFAULT_AI_CONSENT`), which that decision reads as a live conversation's end
/// does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportOptions {
    pub actor: super::event::Actor,
    pub extract: bool,
    pub default_consent: bool,
}

/// A client id one of the person's records was imported under, as their GDPR export
/// holds it (the id is the client's, and names the person's record).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ImportedId {
    /// `conversation`, `fact` or `consent`.
    pub kind: String,
    pub client_id: String,
    /// The record it became: null for a consent (the person's own row).
    pub record_id: Option<uuid::Uuid>,
    /// When it was imported.
    pub created_at: DateTime<Utc>,
}

/// An import and its progress, as `GET /api/import/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ImportJob {
    pub id: uuid::Uuid,
    /// `running`, `succeeded`, `failed` (stopped by the database or a broken upload:
    /// what was committed before stays, and a re-run completes it), or `interrupted`
    /// (its process died: found silent at a later start; a re-run completes it).
    pub status: String,
    #[serde(flatten)]
    pub progress: Progress,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// A record checked and ready to write.
#[derive(Debug, Clone)]
pub enum ValidRecord {
    Conversation(ValidConversation),
    Fact(ValidFact),
    Consent(ValidConsent),
}

impl ValidRecord {
    pub fn client_id(&self) -> &str {
        match self {
            ValidRecord::Conversation(c) => &c.client_id,
            ValidRecord::Fact(f) => &f.client_id,
            ValidRecord::Consent(c) => &c.client_id,
        }
    }

    /// The kind, as the idempotency table keys it: client ids are the client's per kind.
    pub fn kind(&self) -> RecordKind {
        match self {
            ValidRecord::Conversation(_) => RecordKind::Conversation,
            ValidRecord::Fact(_) => RecordKind::Fact,
            ValidRecord::Consent(_) => RecordKind::Consent,
        }
    }

    pub fn external_ref(&self) -> &ExternalRef {
        match self {
            ValidRecord::Conversation(c) => &c.new.external_ref,
            ValidRecord::Fact(f) => &f.external_ref,
            ValidRecord::Consent(c) => &c.external_ref,
        }
    }
}

/// The three kinds of record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    Conversation,
    Fact,
    Consent,
}

impl RecordKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::Conversation => "conversation",
            RecordKind::Fact => "fact",
            RecordKind::Consent => "consent",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ValidConversation {
    pub client_id: String,
    pub new: NewConversation,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    /// Each message with its time.
    pub messages: Vec<(NewMessage, DateTime<Utc>)>,
}

#[derive(Debug, Clone)]
pub struct ValidFact {
    pub client_id: String,
    pub agent_id: AgentId,
    pub external_ref: ExternalRef,
    pub fact: NewFact,
    pub source: Source,
    /// The client id of its conversation (extracted facts).
    pub conversation: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct ValidConsent {
    pub client_id: String,
    pub external_ref: ExternalRef,
    pub ai_consent: bool,
    pub updated_at: DateTime<Utc>,
}

/// A time as both databases keep it ([`storable`]), not in the future beyond the skew a
/// client's clock may have (taken as now).
fn past(field: &str, time: DateTime<Utc>, now: DateTime<Utc>) -> Result<DateTime<Utc>, LineError> {
    let time = storable(field, time).map_err(LineError::invalid)?;
    if time > now + chrono::TimeDelta::seconds(OBSERVED_AT_SKEW_SECONDS) {
        return Err(LineError::invalid(format!("{field} must not be in the future")));
    }
    Ok(time.min(now))
}

fn client_id(id: String) -> Result<String, LineError> {
    if id.is_empty() || id.len() > MAX_CLIENT_ID_BYTES || id.chars().any(char::is_control) {
        return Err(LineError::invalid(format!("id must be 1-{MAX_CLIENT_ID_BYTES} bytes without control characters")));
    }
    Ok(id)
}

fn same_tenant(line: Option<&str>, tenant: &TenantId) -> Result<(), LineError> {
    match line {
        Some(named) if named != tenant.as_str() => {
            Err(LineError::new("tenant_mismatch", "the line names another tenant than the importing one"))
        }
        _ => Ok(()),
    }
}

impl ImportRecord {
    /// Checks the record for `tenant` against `now` (times may not be in the future),
    /// with the rules of the live API (a fact's text, tags, score and expiry; a
    /// conversation's title and metadata; each message).
    pub fn validate(self, tenant: &TenantId, now: DateTime<Utc>) -> Result<ValidRecord, LineError> {
        match self {
            ImportRecord::Conversation(record) => {
                same_tenant(record.tenant.as_deref(), tenant)?;
                let created_at = past("created_at", record.created_at, now)?;
                let mut messages = Vec::with_capacity(record.messages.len());
                for (index, m) in record.messages.into_iter().enumerate() {
                    let at = past("a message's created_at", m.created_at, now)?;
                    let new = NewMessage {
                        role: m.role,
                        content: m.content,
                        name: m.name,
                        tool_calls: m.tool_calls,
                        tool_call_id: m.tool_call_id,
                        metadata: m.metadata,
                    };
                    new.validate().map_err(|e| {
                        let why = match e {
                            super::message::MessageError::Invalid(why)
                            | super::message::MessageError::TooLarge(why) => why,
                        };
                        LineError::invalid(format!("message {index}: {why}"))
                    })?;
                    messages.push((new, at));
                }
                let last = messages.last().map_or(created_at, |(_, at)| *at).max(created_at);
                let updated_at = record.updated_at.map(|t| past("updated_at", t, now)).transpose()?.unwrap_or(last);
                let ended_at = record.ended_at.map(|t| past("ended_at", t, now)).transpose()?;
                if record.title.as_ref().is_some_and(|t| t.chars().count() > MAX_TITLE_CHARS) {
                    return Err(LineError::invalid(format!("title must be at most {MAX_TITLE_CHARS} characters")));
                }
                let new = NewConversation {
                    agent_id: record.agent_id,
                    external_ref: record.external_ref,
                    key: record.key,
                    title: record.title,
                    metadata: record.metadata,
                    memory: Some(record.memory),
                };
                new.validate().map_err(LineError::invalid)?;
                Ok(ValidRecord::Conversation(ValidConversation {
                    client_id: client_id(record.id)?,
                    new,
                    created_at,
                    updated_at,
                    ended_at,
                    messages,
                }))
            }
            ImportRecord::Fact(record) => {
                same_tenant(record.tenant.as_deref(), tenant)?;
                let created_at = record.created_at.map(|t| past("created_at", t, now)).transpose()?.unwrap_or(now);
                let input = FactInput {
                    fact: record.fact,
                    tags: Some(record.tags),
                    score: record.score,
                    observed_at: Some(record.observed_at.unwrap_or(created_at)),
                    expires_at: record.expires_at,
                    ttl_seconds: record.ttl_seconds,
                };
                let fact = input.validate(now).map_err(LineError::invalid)?;
                let needs_conversation = matches!(record.source, Source::Extracted | Source::BuiltinFallback);
                if needs_conversation != record.conversation_id.is_some() {
                    return Err(LineError::invalid(
                        "conversation_id is required with source extracted or builtin_fallback, and only with them",
                    ));
                }
                Ok(ValidRecord::Fact(ValidFact {
                    client_id: client_id(record.id)?,
                    agent_id: record.agent_id,
                    external_ref: record.external_ref,
                    fact,
                    source: record.source,
                    conversation: record.conversation_id,
                    created_at,
                }))
            }
            ImportRecord::Consent(record) => {
                same_tenant(record.tenant.as_deref(), tenant)?;
                let updated_at = record.updated_at.map(|t| past("updated_at", t, now)).transpose()?.unwrap_or(now);
                Ok(ValidRecord::Consent(ValidConsent {
                    client_id: client_id(record.id)?,
                    external_ref: record.external_ref,
                    ai_consent: record.ai_consent,
                    updated_at,
                }))
            }
        }
    }
}

/// Parses one line (already checked for size, NUL and UTF-8) and validates it.
/// A line that is not JSON at all is `malformed_json` even where the record's reader
/// stopped first at a wrong type (a line of `[`s is no record's start): such a line is
/// read once more, as any JSON.
pub fn parse_line(line: &str, tenant: &TenantId, now: DateTime<Utc>) -> Result<ValidRecord, LineError> {
    let record: ImportRecord = serde_json::from_str(line).map_err(|e| {
        let not_json = e.is_data().then(|| serde_json::from_str::<serde::de::IgnoredAny>(line).err()).flatten();
        LineError::from_json(not_json.as_ref().unwrap_or(&e))
    })?;
    record.validate(tenant, now)
}

/// The JSON Schema (2020-12) of one line, from the types above: what
/// `openapi/import-record.schema.json` holds (a test checks that it is current). The
/// types' OpenAPI schemas are JSON Schema already; the ones they refer to go in `$defs`.
pub fn json_schema() -> serde_json::Result<serde_json::Value> {
    use serde_json::{Value, json};
    use utoipa::PartialSchema;
    let mut named = Vec::new();
    <ImportRecord as ToSchema>::schemas(&mut named);
    let mut defs: serde_json::Map<String, Value> = named
        .into_iter()
        .map(|(name, schema)| Ok((name, serde_json::to_value(schema)?)))
        .collect::<serde_json::Result<_>>()?;
    // OpenAPI writes each variant of a tagged enum as `allOf: [record, {type}]`; beside
    // the record's `additionalProperties: false` that would refuse `type` itself, so the
    // tag goes into the record's own schema and the variant refers to it alone.
    let mut variants = Vec::new();
    if let Value::Object(root) = serde_json::to_value(ImportRecord::schema())? {
        for variant in root.get("oneOf").and_then(Value::as_array).into_iter().flatten() {
            let (Some(reference), Some(tag)) =
                (variant.pointer("/allOf/0/$ref").and_then(Value::as_str), variant.pointer("/allOf/1/properties/type"))
            else {
                variants.push(variant.clone());
                continue;
            };
            let name = reference.rsplit('/').next().unwrap_or_default();
            if let Some(Value::Object(record)) = defs.get_mut(name) {
                if let Some(Value::Object(properties)) = record.get_mut("properties") {
                    properties.insert("type".into(), tag.clone());
                }
                if let Some(Value::Array(required)) = record.get_mut("required") {
                    required.insert(0, json!("type"));
                }
            }
            variants.push(json!({ "$ref": reference }));
        }
    }
    let document = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://engram.invalid/openapi/import-record.schema.json",
        "title": "ImportRecord",
        "description": "One line of an Engram NDJSON import or export: a conversation with its messages, a fact, or a person's consent, tagged by `type`.",
        "oneOf": variants,
        "$defs": defs,
    });
    // OpenAPI's references point into its components; here they point into `$defs`.
    let text = serde_json::to_string(&document)?.replace("#/components/schemas/", "#/$defs/");
    serde_json::from_str(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant() -> TenantId {
        TenantId::parse("acme".into()).unwrap()
    }

    fn code(line: &str) -> String {
        parse_line(line, &tenant(), Utc::now()).map(|_| String::new()).unwrap_or_else(|e| e.code)
    }

    #[test]
    fn each_kind_parses() {
        let fact = r#"{"type":"fact","id":"f1","agent_id":"a","external_ref":"u","fact":"Plays the oboe","observed_at":"2024-03-01T10:00:00Z"}"#;
        let conversation = r#"{"type":"conversation","id":"c1","agent_id":"a","external_ref":"u","created_at":"2024-03-01T10:00:00Z","messages":[{"role":"user","content":"hello","created_at":"2024-03-01T10:00:01Z"}]}"#;
        let consent = r#"{"type":"consent","id":"k1","external_ref":"u","ai_consent":false}"#;
        for line in [fact, conversation, consent] {
            assert_eq!(code(line), "", "{line}");
        }
    }

    #[test]
    fn bad_lines_have_codes_and_messages_quote_no_value() {
        assert_eq!(code("{not json"), "malformed_json");
        assert_eq!(code(&"[".repeat(100_000)), "malformed_json");
        assert_eq!(code("true"), "invalid_record");
        for time in ["-0001-01-01T00:00:00Z", "0000-06-01T00:00:00Z"] {
            let line =
                format!(r#"{{"type":"consent","id":"k","external_ref":"u","ai_consent":true,"updated_at":"{time}"}}"#);
            assert_eq!(code(&line), "invalid_record", "{line}");
            let line = format!(
                r#"{{"type":"fact","id":"f","agent_id":"a","external_ref":"u","fact":"x","observed_at":"{time}"}}"#
            );
            assert_eq!(code(&line), "invalid_record", "{line}");
        }
        assert_eq!(
            code(r#"{"type":"fact","id":"f","agent_id":"a","external_ref":"u","fact":"x","tenant":"other"}"#),
            "tenant_mismatch"
        );
        assert_eq!(code(r#"{"type":"song","id":"f"}"#), "invalid_record");
        let wrong = parse_line(
            r#"{"type":"fact","id":"f","agent_id":"a","external_ref":"u","fact":12,"score":"secret words"}"#,
            &tenant(),
            Utc::now(),
        )
        .unwrap_err();
        assert!(!wrong.message.contains("secret"), "{wrong:?}");
        assert_eq!(
            code(r#"{"type":"fact","id":"f","agent_id":"a","external_ref":"u","fact":"x","source":"extracted"}"#),
            "invalid_record"
        );
        assert_eq!(code(r#"{"type":"fact","id":"","agent_id":"a","external_ref":"u","fact":"x"}"#), "invalid_record");
        assert_eq!(
            code(
                r#"{"type":"consent","id":"k","external_ref":"u","ai_consent":true,"updated_at":"2999-01-01T00:00:00Z"}"#
            ),
            "invalid_record"
        );
    }

    #[test]
    fn export_form_round_trips() {
        let line = r#"{"type":"fact","id":"f1","agent_id":"a","external_ref":"u","fact":"Plays the oboe","tags":["music"],"score":0.5,"source":"manual","created_at":"2024-03-01T10:00:00Z","observed_at":"2024-03-01T09:00:00Z"}"#;
        let record: ImportRecord = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::to_string(&record).unwrap(), line);
    }
}
