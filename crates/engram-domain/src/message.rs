//! Messages of a conversation, as stored and returned.

use super::metadata::{json_size, validate_metadata};
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

/// The roles a read asks for (`roles=user,assistant`): never empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleSet([bool; 4]);

impl RoleSet {
    /// Every role: a read without `roles=`.
    pub const ALL: RoleSet = RoleSet([true; 4]);

    /// Parses a comma-separated list of role names (repeats allowed, none missing).
    pub fn parse(text: &str) -> Result<RoleSet, String> {
        let mut set = [false; 4];
        for name in text.split(',') {
            let role = Role::parse(name).ok_or_else(|| {
                format!("roles must be a comma-separated list of system, user, assistant, tool; got {name:?}")
            })?;
            set[role as usize] = true;
        }
        Ok(RoleSet(set))
    }

    /// The roles in the set, in [`Role`] order.
    pub fn roles(self) -> impl Iterator<Item = Role> {
        [Role::System, Role::User, Role::Assistant, Role::Tool].into_iter().filter(move |role| self.0[*role as usize])
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    #[schema(min_length = 1)]
    pub id: String,
    #[schema(min_length = 1)]
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
    #[serde(serialize_with = "super::timestamp::serialize")]
    pub created_at: DateTime<Utc>,
}

/// The OpenAPI schema of `content`, which serde sees as any JSON value.
pub fn content_schema() -> utoipa::openapi::schema::Schema {
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

/// The content block in which Anthropic's Messages API sends a tool's answer, with role
/// `user`; see [`is_user_turn`] and `replay`.
pub const TOOL_RESULT_BLOCK: &str = "tool_result";

/// The `type` of a content part, if it has a string one.
pub fn part_type(part: &serde_json::Value) -> Option<&str> {
    part.get("type").and_then(serde_json::Value::as_str)
}

/// Whether a message is a turn of the end user, the unit of `min_user_turns`: role `user`
/// with something the person said. Anthropic sends tool answers as `user` messages made
/// of `tool_result` blocks; those are the tool speaking, so they never count, or an agent
/// loop of three tool calls would look like three user turns.
pub fn is_user_turn(role: Role, content: &serde_json::Value) -> bool {
    let only_tool_results = match content {
        serde_json::Value::Array(parts) => {
            !parts.is_empty() && parts.iter().all(|part| part_type(part) == Some(TOOL_RESULT_BLOCK))
        }
        _ => false,
    };
    role == Role::User && !only_tool_results
}

/// Largest serialized `content` of one message: big enough for any chat turn, small
/// enough that one message cannot crowd out a conversation's extraction prompt.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;

/// Longest `name` or `tool_call_id`, in characters (providers allow 64).
pub const MAX_NAME_CHARS: usize = 256;

/// Most tool calls on one assistant message.
pub const MAX_TOOL_CALLS: usize = 128;

/// Messages in one append: large enough to import a whole conversation in one call.
pub const MAX_BATCH: usize = 100;

/// A message as a client sends it, before it has an id and a seq. Its schema is
/// written by hand ([`new_message_schema`]) because where the tool fields may appear
/// depends on the role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewMessage {
    pub role: Role,
    /// At most 64 KiB serialized.
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
    pub metadata: Option<serde_json::Value>,
}

impl utoipa::PartialSchema for NewMessage {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        new_message_schema().into()
    }
}

impl ToSchema for NewMessage {
    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        schemas.push((ToolCall::name().into_owned(), <ToolCall as utoipa::PartialSchema>::schema()));
        <ToolCall as ToSchema>::schemas(schemas);
    }
}

/// The schema of [`NewMessage`]: one shape per role group, so that the spec states
/// what [`NewMessage::validate`] checks: `tool_calls` only on `assistant` messages,
/// `tool_call_id` only on `tool` messages (elsewhere absent or null), unknown fields
/// refused.
fn new_message_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::{
        Ref, RefOr,
        schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type},
    };
    let of_types = |types: &[Type]| ObjectBuilder::new().schema_type(types.iter().cloned().collect::<SchemaType>());
    let null = || RefOr::from(Schema::from(of_types(&[Type::Null])));
    let shape = |roles: &[&str], tool_calls: RefOr<Schema>, tool_call_id: RefOr<Schema>| {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("role", ObjectBuilder::new().schema_type(Type::String).enum_values(Some(roles.to_vec())))
            .required("role")
            .property("content", content_schema())
            .required("content")
            .property("name", of_types(&[Type::String, Type::Null]).max_length(Some(MAX_NAME_CHARS)))
            .property("tool_calls", tool_calls)
            .property("tool_call_id", tool_call_id)
            .property(
                "metadata",
                of_types(&[Type::Object, Type::Null])
                    .description(Some("A JSON object of at most 16 KiB serialized, kept as given.")),
            )
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
    };
    let tool_calls = ArrayBuilder::new()
        .schema_type([Type::Array, Type::Null].into_iter().collect::<SchemaType>())
        .items(Ref::from_schema_name("ToolCall"))
        .max_items(Some(MAX_TOOL_CALLS))
        .description(Some("The calls this message makes."));
    let tool_call_id = of_types(&[Type::String, Type::Null])
        .max_length(Some(MAX_NAME_CHARS))
        .description(Some("The id of the call this message answers."));
    OneOfBuilder::new()
        .item(shape(&["system", "user"], null(), null()).title(Some("SystemOrUserMessage")))
        .item(shape(&["assistant"], tool_calls.into(), null()).title(Some("AssistantMessage")))
        .item(shape(&["tool"], null(), tool_call_id.into()).title(Some("ToolMessage")))
        .description(Some("A message as a client sends it. `content` is at most 64 KiB serialized (413 above)."))
        .build()
        .into()
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
        let size = json_size(&self.content);
        if size > MAX_CONTENT_BYTES {
            return Err(MessageError::TooLarge(format!(
                "message content is {size} bytes; the maximum is {MAX_CONTENT_BYTES}"
            )));
        }
        let calls_size = self.tool_calls.as_ref().map_or(0, json_size);
        if calls_size > MAX_CONTENT_BYTES {
            return Err(MessageError::TooLarge(format!(
                "tool_calls are {calls_size} bytes; the maximum is {MAX_CONTENT_BYTES}"
            )));
        }
        let too_long = |field: &Option<String>| field.as_ref().is_some_and(|f| f.chars().nth(MAX_NAME_CHARS).is_some());
        if too_long(&self.name) || too_long(&self.tool_call_id) {
            return Err(MessageError::Invalid(format!(
                "name and tool_call_id must be at most {MAX_NAME_CHARS} characters"
            )));
        }
        if let Some(calls) = &self.tool_calls {
            if calls.len() > MAX_TOOL_CALLS {
                return Err(MessageError::Invalid(format!(
                    "an assistant message may carry at most {MAX_TOOL_CALLS} tool calls"
                )));
            }
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
        validate_metadata(self.metadata.as_ref()).map_err(MessageError::Invalid)
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
            if is_user_turn(message.role, &message.content) {
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

    #[test]
    fn role_sets_parse_comma_separated_role_names() {
        let roles = |text: &str| RoleSet::parse(text).map(|set| set.roles().collect::<Vec<_>>());
        assert_eq!(roles("user"), Ok(vec![Role::User]));
        assert_eq!(roles("tool,user,user"), Ok(vec![Role::User, Role::Tool]));
        assert_eq!(RoleSet::ALL.roles().count(), 4);
        for bad in ["", "user,", "User", "user, assistant", "bot"] {
            assert!(RoleSet::parse(bad).is_err(), "{bad:?}");
        }
    }

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

    #[test]
    fn tool_results_sent_as_user_messages_are_not_user_turns() {
        let user = |content| parse(json!({"role": "user", "content": content})).unwrap();
        let results_only = user(json!([
            {"type": "tool_result", "tool_use_id": "t1", "content": "22 degrees"},
            {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "sunny"}]}
        ]));
        let results_and_words = user(json!([
            {"type": "tool_result", "tool_use_id": "t3", "content": "ok"},
            {"type": "text", "text": "and I live in Lyon"}
        ]));
        let counts = BatchCounts::of(&[user(json!("hi")), results_only.clone(), results_and_words, results_only]);
        assert_eq!(counts, BatchCounts { messages: 4, user_turns: 2, last_user_offset: Some(3) });
        // An empty part list is not made of tool results: it stays a (silent) user turn, as before.
        assert!(is_user_turn(Role::User, &json!([])));
        assert!(!is_user_turn(Role::Tool, &json!("42")));
    }
}
