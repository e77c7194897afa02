//! The memory tools a model can call — `remember`, `recall`, `list_memories`,
//! `update_memory`, `forget`, `memory_context`, `read_working_memory`,
//! `write_working_memory` — written once: their descriptions, their
//! JSON Schemas and the code that runs them. The MCP server (`/mcp`) and the plain HTTP
//! routes (`/api/tools`) both serve this catalogue, and each tool calls the same operation
//! of `service/` as the REST route it mirrors, so a tool answers exactly what that route
//! answers.
//!
//! `forget_all` is deliberately not a tool: bulk deletion stays with people (REST, the
//! admin panel), never with a model.
//!
//! Rules on top of the routes': a tool only runs while the agent's memory is on and the
//! user consents (otherwise a `conflict` error, and nothing is read or stored); facts it
//! stores carry `source: "agent"`; a user-bound caller's tools reach only its own agent
//! and user (see [`Caller::whose`]). Arguments are never logged: they hold what people
//! said about themselves.

use chrono::{DateTime, Utc};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::{Map, Value, json};
use utoipa::PartialSchema;
use uuid::Uuid;

use super::{AppState, facts, memory_context, working_memory};
use crate::{
    auth::{Caller, Scope},
    domain::{
        event::Actor,
        fact::{FactInput, FactPatch, FactString, MAX_TAGS, MAX_TTL_SECONDS, Origin, Tag},
        ids::{AgentId, ExternalRef},
        memory_context::{ContextRequest, MAX_FACTS},
        nul,
        owner::OwnerSet,
        search_query::MAX_QUERY_CHARS,
        working_memory::{self as document, Condition},
    },
    service::error::ServiceError,
    store::facts::FactFilter,
};

/// One tool of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Remember,
    Recall,
    ListMemories,
    UpdateMemory,
    Forget,
    MemoryContext,
    ReadWorkingMemory,
    WriteWorkingMemory,
}

impl Tool {
    pub const ALL: [Tool; 8] = [
        Tool::Remember,
        Tool::Recall,
        Tool::ListMemories,
        Tool::UpdateMemory,
        Tool::Forget,
        Tool::MemoryContext,
        Tool::ReadWorkingMemory,
        Tool::WriteWorkingMemory,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Remember => "remember",
            Tool::Recall => "recall",
            Tool::ListMemories => "list_memories",
            Tool::UpdateMemory => "update_memory",
            Tool::Forget => "forget",
            Tool::MemoryContext => "memory_context",
            Tool::ReadWorkingMemory => "read_working_memory",
            Tool::WriteWorkingMemory => "write_working_memory",
        }
    }

    pub fn parse(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|tool| tool.name() == name)
    }

    /// One line a model can act on.
    pub fn description(self) -> &'static str {
        match self {
            Tool::Remember => {
                "Store a lasting fact about the user (a preference, a detail of their life) when they share one or ask you to remember it."
            }
            Tool::Recall => {
                "Search what you know about the user: the stored facts most relevant to a question, best first."
            }
            Tool::ListMemories => {
                "List the facts stored about the user, newest first (optionally only those with a tag); pass next_cursor to get more."
            }
            Tool::UpdateMemory => {
                "Correct a stored fact about the user (its text, tags or score), by the id that recall or list_memories gave."
            }
            Tool::Forget => {
                "Delete one stored fact about the user, by its id, when they ask you to forget it or it is wrong."
            }
            Tool::MemoryContext => {
                "Get what to keep in mind about the user for this conversation, as facts and a ready-made <user-memory> prompt block."
            }
            Tool::ReadWorkingMemory => {
                "Read your working memory about the user: the notes you keep and rewrite as you learn, with the etag to write them back (not_found before the first write)."
            }
            Tool::WriteWorkingMemory => {
                "Replace your working memory about the user with a new version of the whole text; pass the etag you read so that a newer version is not overwritten."
            }
        }
    }

    /// The scope a caller needs, as for the REST route the tool mirrors.
    fn scope(self) -> Scope {
        match self {
            Tool::Remember | Tool::UpdateMemory | Tool::Forget | Tool::WriteWorkingMemory => Scope::MemoryWrite,
            Tool::Recall | Tool::ListMemories | Tool::MemoryContext | Tool::ReadWorkingMemory => Scope::MemoryRead,
        }
    }

    /// The JSON Schema of the tool's arguments. A user-bound caller's tools take no
    /// `agent_id` and `external_ref` (the token names them); anyone else's require both.
    /// The constraints are the REST routes' own: the leaf schemas come from the same
    /// types the OpenAPI document uses.
    pub fn input_schema(self, bound: bool) -> Map<String, Value> {
        let limit = |default: i64| json!({"type": "integer", "minimum": 1, "maximum": 200, "default": default});
        let tags = json!({"type": "array", "items": described(schema_of::<Tag>(), "A short label."), "maxItems": MAX_TAGS,
            "description": "Short labels, e.g. \"diet\"; repeats are kept once."});
        let score = json!({"type": "number", "minimum": 0.0, "maximum": 1.0,
            "description": "How sure or important the fact is, 0-1."});
        let id = json!({"type": "string", "format": "uuid", "description": "The fact's id."});
        let as_of = json!({"type": "string", "format": "date-time",
            "description": "Read the facts that were true at this time (RFC 3339) instead of now: said by then, not yet replaced, not expired."});
        let (properties, required): (Value, &[&str]) = match self {
            Tool::Remember => (
                json!({"fact": described(schema_of::<FactString>(), "The fact, in one short sentence about the user."),
                    "tags": tags, "score": score,
                    "observed_at": {"type": "string", "format": "date-time",
                        "description": "When the user said it (RFC 3339), if not now; never in the future."},
                    "expires_at": {"type": "string", "format": "date-time",
                        "description": "When the fact stops being worth knowing (RFC 3339, in the future), for something temporary; not with ttl_seconds."},
                    "ttl_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_TTL_SECONDS,
                        "description": "Forget the fact this many seconds from now, for something temporary; not with expires_at."}}),
                &["fact"],
            ),
            Tool::Recall => (
                json!({"query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                        "description": "What to look for, in the user's or your own words."},
                    "limit": limit(10), "as_of": as_of}),
                &["query"],
            ),
            Tool::ListMemories => (
                json!({"tag": described(schema_of::<Tag>(), "Only facts carrying this tag."), "limit": limit(50),
                    "cursor": {"type": "string", "minLength": 1, "pattern": "^[A-Za-z0-9_-]+$",
                        "description": "The next_cursor of the previous page."}, "as_of": as_of}),
                &[],
            ),
            Tool::UpdateMemory => (
                json!({"id": id, "fact": described(schema_of::<FactString>(), "The corrected fact."),
                    "tags": described(tags, "Replaces every tag."), "score": score}),
                &["id"],
            ),
            Tool::Forget => (json!({"id": id}), &["id"]),
            Tool::MemoryContext => (
                json!({"query": {"type": "string", "maxLength": MAX_QUERY_CHARS,
                        "description": "What the conversation is about: matching facts come first."},
                    "max_facts": {"type": "integer", "minimum": 1, "maximum": MAX_FACTS,
                        "description": "Default: the agent's max_injected_facts."},
                    "token_budget": {"type": "integer", "minimum": 1,
                        "description": "Tokens (about characters / 4) the prompt block may take."},
                    "working_memory": {"type": "boolean", "default": false,
                        "description": "Also your working memory about the user, as a <working-memory> block."},
                    "as_of": as_of}),
                &[],
            ),
            Tool::ReadWorkingMemory => (json!({}), &[]),
            Tool::WriteWorkingMemory => (
                json!({"content": {"type": "string", "maxLength": document::MAX_CHARS,
                        "description": "The whole new text (Markdown is fine); it replaces the old one. At most 32 768 characters."},
                    "etag": {"type": "string", "minLength": 1,
                        "description": "The etag read_working_memory gave: the write is refused if the text changed since. Omit only for the first write."}}),
                &["content"],
            ),
        };
        let mut properties = match properties {
            Value::Object(properties) => properties,
            _ => Map::new(),
        };
        let mut required: Vec<&str> = required.to_vec();
        if !bound {
            properties.insert("agent_id".into(), described(schema_of::<AgentId>(), "The agent whose memory this is."));
            properties.insert(
                "external_ref".into(),
                described(schema_of::<ExternalRef>(), "The end user's id on your channel."),
            );
            required.extend(["agent_id", "external_ref"]);
        }
        let mut schema = Map::new();
        schema.insert("type".into(), "object".into());
        schema.insert("properties".into(), properties.into());
        schema.insert("required".into(), required.into());
        schema.insert("additionalProperties".into(), false.into());
        schema
    }
}

/// A type's schema as the OpenAPI document states it (OpenAPI 3.1 schemas are JSON
/// Schema), without what is there for people reading the document: its description (the
/// tool gives its own) and OpenAPI's `example`, which is no JSON Schema keyword.
fn schema_of<T: PartialSchema>() -> Value {
    let mut schema = serde_json::to_value(T::schema()).unwrap_or_default();
    if let Some(object) = schema.as_object_mut() {
        object.remove("description");
        object.remove("example");
    }
    schema
}

/// `schema` with a `description` a model reads.
fn described(mut schema: Value, description: &str) -> Value {
    if let Some(object) = schema.as_object_mut() {
        object.insert("description".into(), description.into());
    }
    schema
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecallArgs {
    query: String,
    limit: Option<i64>,
    as_of: Option<DateTime<Utc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    tag: Option<String>,
    limit: Option<i64>,
    cursor: Option<String>,
    as_of: Option<DateTime<Utc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextArgs {
    query: Option<String>,
    max_facts: Option<i64>,
    token_budget: Option<i64>,
    #[serde(default)]
    working_memory: bool,
    as_of: Option<DateTime<Utc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteWorkingMemoryArgs {
    content: String,
    etag: Option<String>,
}

/// Runs tool `name` with `arguments` for `caller`; its result is what the mirrored REST
/// route answers (the tool's error is that route's error).
pub async fn call(
    state: &AppState,
    caller: &Caller,
    name: &str,
    arguments: Map<String, Value>,
) -> Result<Value, ServiceError> {
    let Some(tool) = Tool::parse(name) else {
        tracing::info!(tool = "unknown", "tool call refused");
        let names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
        return Err(ServiceError::invalid(format!("unknown tool; the tools are {}", names.join(", "))));
    };
    let outcome = run(state, caller, tool, arguments).await;
    match &outcome {
        Ok(_) => tracing::info!(tool = tool.name(), "tool called"),
        Err(error) => tracing::info!(tool = tool.name(), error = error.kind(), "tool call refused"),
    }
    outcome
}

async fn run(
    state: &AppState,
    caller: &Caller,
    tool: Tool,
    mut args: Map<String, Value>,
) -> Result<Value, ServiceError> {
    // As at the REST edge: PostgreSQL cannot store NUL, so both backends refuse it alike.
    if holds_nul(&args) {
        return Err(ServiceError::invalid(nul::REFUSED));
    }
    caller.require(tool.scope())?;
    let agent = take_string(&mut args, "agent_id")?;
    let user = take_string(&mut args, "external_ref")?;
    let (agent, user) = caller.whose(agent.as_deref(), user.as_deref())?;
    let owner = caller.owner(&agent, &user);
    let policy = state.store.policy(owner).await?;
    let default_consent = state.config.default_ai_consent;
    if !policy.memory_on(default_consent) {
        let why = if policy.consent(default_consent) {
            "memory is off for this agent"
        } else {
            "this user refused AI processing"
        };
        return Err(ServiceError::Conflict(format!("{why}: nothing was read or stored")));
    }
    let value = match tool {
        Tool::Remember => {
            let input: FactInput = parse(args)?;
            to_value(facts::remember(state, owner, input, Origin::Agent, Actor::Agent).await?.1)
        }
        Tool::Recall => {
            let args: RecallArgs = parse(args)?;
            let filter = FactFilter { as_of: args.as_of, ..FactFilter::CURRENT };
            let owners = OwnerSet::new(owner, policy.shared_agents(default_consent));
            to_value(facts::search(state, owners, &args.query, args.limit, filter).await?)
        }
        Tool::ListMemories => {
            let args: ListArgs = parse(args)?;
            let page = facts::list(
                state,
                owner,
                FactFilter { tag: args.tag.as_deref(), as_of: args.as_of, ..FactFilter::CURRENT },
                None,
                args.limit,
                args.cursor.as_deref(),
            );
            to_value(page.await?)
        }
        Tool::UpdateMemory => {
            let id = take_id(&mut args)?;
            let patch: FactPatch = parse(args)?;
            to_value(facts::update(state, owner, id, patch, Actor::Agent).await?)
        }
        Tool::Forget => {
            let id = take_id(&mut args)?;
            parse::<Empty>(args)?;
            facts::forget(state, owner, id, Actor::Agent).await?;
            json!({"id": id, "deleted": true})
        }
        Tool::MemoryContext => {
            let args: ContextArgs = parse(args)?;
            let request =
                ContextRequest::parse(args.query.as_deref(), args.max_facts, args.token_budget, args.working_memory)
                    .map_err(ServiceError::Invalid)?;
            let request = ContextRequest { as_of: args.as_of, ..request };
            to_value(memory_context::build(state, owner, &policy, request).await?)
        }
        Tool::ReadWorkingMemory => {
            parse::<Empty>(args)?;
            to_value(working_memory::read(state, document::Scope::User(owner)).await?)
        }
        Tool::WriteWorkingMemory => {
            let args: WriteWorkingMemoryArgs = parse(args)?;
            // An etag is the version the model read: the write is a compare-and-swap on it.
            let condition = args.etag.map_or(Condition::ALWAYS, Condition::matching);
            to_value(
                working_memory::write(state, document::Scope::User(owner), &args.content, &condition, Actor::Agent)
                    .await?
                    .1,
            )
        }
    };
    Ok(value)
}

/// No further arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

/// The arguments as `T`: unknown ones and wrong types are a 400, as in a REST body.
fn parse<T: DeserializeOwned>(args: Map<String, Value>) -> Result<T, ServiceError> {
    serde_json::from_value(Value::Object(args)).map_err(|e| ServiceError::invalid(format!("invalid arguments: {e}")))
}

fn to_value(value: impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// Removes the string argument `key`; a non-string one is a 400.
fn take_string(args: &mut Map<String, Value>, key: &str) -> Result<Option<String>, ServiceError> {
    match args.remove(key) {
        None => Ok(None),
        Some(Value::String(value)) => Ok(Some(value)),
        Some(_) => Err(ServiceError::invalid(format!("`{key}` must be a string"))),
    }
}

/// Removes the required `id` argument, a fact's UUID.
fn take_id(args: &mut Map<String, Value>) -> Result<Uuid, ServiceError> {
    let id = take_string(args, "id")?.ok_or_else(|| ServiceError::invalid("`id` is required"))?;
    Uuid::parse_str(&id).map_err(|_| ServiceError::invalid("`id` must be a fact's id (a UUID)"))
}

/// A NUL anywhere in the arguments, in a key or a value at any depth: the arguments are
/// already parsed here, so the tree is walked rather than written out again as JSON for
/// the edge's byte check (`domain::nul`).
fn holds_nul(args: &Map<String, Value>) -> bool {
    fn value_holds_nul(value: &Value) -> bool {
        match value {
            Value::String(text) => text.contains('\0'),
            Value::Array(items) => items.iter().any(value_holds_nul),
            Value::Object(map) => holds_nul(map),
            _ => false,
        }
    }
    args.iter().any(|(key, value)| key.contains('\0') || value_holds_nul(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert!(Tool::ALL.into_iter().all(|tool| Tool::parse(tool.name()) == Some(tool)));
        assert_eq!(Tool::parse("forget_all"), None);
    }

    #[test]
    fn bound_schemas_take_no_owner() {
        for tool in Tool::ALL {
            let bound = tool.input_schema(true);
            assert!(!bound["properties"].as_object().unwrap().contains_key("agent_id"), "{}", tool.name());
            let open = tool.input_schema(false);
            let required = open["required"].as_array().unwrap();
            assert!(required.contains(&json!("agent_id")) && required.contains(&json!("external_ref")));
            assert!(!Value::Object(open).to_string().contains("$ref"), "{}", tool.name());
        }
    }

    #[test]
    fn nul_is_found_anywhere() {
        let args = |v: Value| v.as_object().unwrap().clone();
        assert!(holds_nul(&args(json!({"fact": "a\u{0}b"}))));
        assert!(holds_nul(&args(json!({"tags": ["x", "\u{0}"]}))));
        assert!(holds_nul(&args(json!({"metadata": {"k\u{0}": 1}}))));
        assert!(!holds_nul(&args(json!({"fact": "a\\u0000b", "score": 1}))));
    }
}
