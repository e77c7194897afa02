//! Messages of a conversation, as stored and returned.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "system" => Some(Role::System),
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "tool" => Some(Role::Tool),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The call's arguments, a JSON object.
    #[schema(value_type = Object)]
    pub arguments: serde_json::Value,
}

/// A stored message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Message {
    pub id: Uuid,
    pub conversation_id: Uuid,
    /// 1, 2, 3… per conversation, no gaps.
    pub seq: i64,
    pub role: Role,
    #[schema(schema_with = content_schema)]
    pub content: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
}

/// The OpenAPI schema of `content`, which serde sees as any JSON value.
fn content_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    let part = ObjectBuilder::new()
        .schema_type(Type::Object)
        .required("type")
        .property("type", ObjectBuilder::new().schema_type(Type::String).examples(["text"]));
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::String))
        .item(ArrayBuilder::new().items(part))
        .description(Some("A string, or an array of content parts (objects with a string `type`)."))
        .build()
        .into()
}

impl Message {
    /// The message's text for extraction: a string content as is, or the `text` of its
    /// parts joined by newlines (images and other parts carry no words to extract).
    pub fn text(&self) -> String {
        match &self.content {
            serde_json::Value::String(text) => text.clone(),
            serde_json::Value::Array(parts) => {
                parts.iter().filter_map(|part| part.get("text").and_then(|t| t.as_str())).collect::<Vec<_>>().join("\n")
            }
            _ => String::new(),
        }
    }
}

/// Largest serialized `content` of one message: big enough for any chat turn, small
/// enough that one message cannot crowd out a conversation's extraction prompt.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;

/// Messages in one append: large enough to import a whole conversation in one call.
pub const MAX_BATCH: usize = 100;

/// A message as a client sends it, before it has an id and a seq.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMessage {
    pub role: Role,
    /// At most 64 KiB serialized.
    #[schema(schema_with = content_schema)]
    pub content: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Only on `assistant` messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// Only on `tool` messages: the id of the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// A JSON object, kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
}

/// Why a message (and so its whole batch) is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageError {
    /// A 400: the message does not follow the contract.
    Invalid(String),
    /// A 413: the content is over [`MAX_CONTENT_BYTES`].
    TooLarge(String),
}

impl NewMessage {
    /// Checks what serde cannot: the shape of `content` and its size, where tool fields
    /// may appear, and that objects are objects.
    pub fn validate(&self) -> Result<(), MessageError> {
        let invalid = |why: &str| Err(MessageError::Invalid(why.to_owned()));
        match &self.content {
            serde_json::Value::String(_) => {}
            serde_json::Value::Array(parts) => {
                let typed_object = |p: &serde_json::Value| p.get("type").is_some_and(serde_json::Value::is_string);
                if !parts.iter().all(typed_object) {
                    return invalid("each content part must be an object with a string `type`");
                }
            }
            _ => return invalid("content must be a string or an array of parts"),
        }
        let size = serde_json::to_vec(&self.content).map_or(usize::MAX, |bytes| bytes.len());
        if size > MAX_CONTENT_BYTES {
            return Err(MessageError::TooLarge(format!(
                "message content is {size} bytes; the maximum is {MAX_CONTENT_BYTES}"
            )));
        }
        if let Some(calls) = &self.tool_calls {
            if self.role != Role::Assistant {
                return invalid("tool_calls are only allowed on assistant messages");
            }
            for call in calls {
                if call.id.is_empty() || call.name.is_empty() {
                    return invalid("a tool call needs a non-empty id and name");
                }
                if !call.arguments.is_object() {
                    return invalid("tool call arguments must be a JSON object");
                }
            }
        }
        if self.tool_call_id.is_some() && self.role != Role::Tool {
            return invalid("tool_call_id is only allowed on tool messages");
        }
        if self.metadata.as_ref().is_some_and(|m| !m.is_object()) {
            return invalid("metadata must be a JSON object");
        }
        Ok(())
    }
}

/// Checks a whole batch: 1–[`MAX_BATCH`] messages, each valid. The error names the
/// first bad message by its index so a client can find it.
pub fn validate_batch(messages: &[NewMessage]) -> Result<(), MessageError> {
    if messages.is_empty() || messages.len() > MAX_BATCH {
        return Err(MessageError::Invalid(format!(
            "messages must hold 1-{MAX_BATCH} messages, got {}",
            messages.len()
        )));
    }
    for (index, message) in messages.iter().enumerate() {
        message.validate().map_err(|error| match error {
            MessageError::Invalid(why) => MessageError::Invalid(format!("messages[{index}]: {why}")),
            MessageError::TooLarge(why) => MessageError::TooLarge(format!("messages[{index}]: {why}")),
        })?;
    }
    Ok(())
}

/// What a batch does to a conversation's counters, computed before the append so the
/// conversation row is updated (and locked) by one statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchCounts {
    pub messages: i64,
    pub user_turns: i64,
    /// 1-based position of the last user message in the batch, if any.
    pub last_user_offset: Option<i64>,
}

impl BatchCounts {
    pub fn of(messages: &[NewMessage]) -> BatchCounts {
        let mut counts = BatchCounts { messages: 0, user_turns: 0, last_user_offset: None };
        for message in messages {
            counts.messages += 1;
            if message.role == Role::User {
                counts.user_turns += 1;
                counts.last_user_offset = Some(counts.messages);
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(value: serde_json::Value) -> Result<NewMessage, String> {
        let message: NewMessage = serde_json::from_value(value).map_err(|e| e.to_string())?;
        message.validate().map_err(|e| format!("{e:?}"))?;
        Ok(message)
    }

    #[test]
    fn text_joins_the_text_parts_only() {
        let message = |content| Message {
            id: uuid::Uuid::now_v7(),
            conversation_id: uuid::Uuid::now_v7(),
            seq: 1,
            role: Role::User,
            content,
            name: None,
            tool_calls: None,
            tool_call_id: None,
            metadata: None,
            created_at: chrono::Utc::now(),
        };
        assert_eq!(message(json!("I live in Lyon")).text(), "I live in Lyon");
        let parts = json!([
            {"type": "text", "text": "My name is Alice."},
            {"type": "image_url", "image_url": {"url": "https://example.org/a.png"}},
            {"type": "text", "text": "I like tea."}
        ]);
        assert_eq!(message(parts).text(), "My name is Alice.\nI like tea.");
    }

    #[test]
    fn accepts_every_role_and_content_shape() {
        for ok in [
            json!({"role": "system", "content": "Be kind"}),
            json!({"role": "user", "content": "hi", "name": "alice", "metadata": {"channel": "sms"}}),
            json!({"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "x"}}]}),
            json!({"role": "user", "content": []}),
            json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f", "arguments": {"a": 1}}]}),
            json!({"role": "tool", "content": "42", "tool_call_id": "c1"}),
            json!({"role": "tool", "content": "42"}),
        ] {
            assert!(parse(ok.clone()).is_ok(), "{ok}: {:?}", parse(ok.clone()));
        }
    }

    #[test]
    fn rejects_malformed_messages() {
        for bad in [
            json!({"role": "robot", "content": "x"}),
            json!({"role": "user"}),
            json!({"role": "user", "content": null}),
            json!({"role": "user", "content": 42}),
            json!({"role": "user", "content": {"text": "x"}}),
            json!({"role": "user", "content": ["x"]}),
            json!({"role": "user", "content": [{"text": "no type"}]}),
            json!({"role": "user", "content": "x", "unknown": 1}),
            json!({"role": "user", "content": "x", "metadata": [1]}),
            json!({"role": "user", "content": "x", "tool_calls": []}),
            json!({"role": "assistant", "content": "x", "tool_calls": [{"id": "c", "name": "f", "arguments": "{}"}]}),
            json!({"role": "assistant", "content": "x", "tool_calls": [{"id": "", "name": "f", "arguments": {}}]}),
            json!({"role": "assistant", "content": "x", "tool_calls": [{"id": "c", "name": "f", "arguments": {}, "x": 1}]}),
            json!({"role": "user", "content": "x", "tool_call_id": "c1"}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn content_over_64_kib_is_too_large_and_at_the_limit_is_not() {
        // A JSON string serializes with its two quotes.
        let at_limit = NewMessage {
            role: Role::User,
            content: json!("x".repeat(MAX_CONTENT_BYTES - 2)),
            name: None,
            tool_calls: None,
            tool_call_id: None,
            metadata: None,
        };
        assert_eq!(at_limit.validate(), Ok(()));
        let over = NewMessage { content: json!("x".repeat(MAX_CONTENT_BYTES - 1)), ..at_limit };
        assert!(matches!(over.validate(), Err(MessageError::TooLarge(_))));
    }

    #[test]
    fn batch_size_is_bounded_and_names_the_bad_message() {
        let good = parse(json!({"role": "user", "content": "x"})).unwrap();
        assert!(matches!(validate_batch(&[]), Err(MessageError::Invalid(_))));
        assert_eq!(validate_batch(&vec![good.clone(); MAX_BATCH]), Ok(()));
        assert!(matches!(validate_batch(&vec![good.clone(); MAX_BATCH + 1]), Err(MessageError::Invalid(_))));
        let mut bad = good.clone();
        bad.content = json!(1);
        match validate_batch(&[good.clone(), bad]) {
            Err(MessageError::Invalid(why)) => assert!(why.starts_with("messages[1]"), "{why}"),
            other => panic!("expected invalid, got {other:?}"),
        }
        let mut big = good.clone();
        big.content = json!("x".repeat(70_000));
        assert!(matches!(validate_batch(&[good, big]), Err(MessageError::TooLarge(_))));
    }

    #[test]
    fn batch_counts_track_user_turns_and_the_last_one() {
        let msg = |role: &str| parse(json!({"role": role, "content": "x"})).unwrap();
        let counts = BatchCounts::of(&[msg("system"), msg("user"), msg("assistant"), msg("user"), msg("assistant")]);
        assert_eq!(counts, BatchCounts { messages: 5, user_turns: 2, last_user_offset: Some(4) });
        let none = BatchCounts::of(&[msg("assistant")]);
        assert_eq!(none, BatchCounts { messages: 1, user_turns: 0, last_user_offset: None });
    }
}
