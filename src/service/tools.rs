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
use schemars::{
    JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings, json_schema, transform::RecursiveTransform,
};
use serde::{Deserialize, Deserializer, de, de::DeserializeOwned};
use serde_json::{Map, Value, json};
use utoipa::PartialSchema;
use uuid::Uuid;

use super::{AppState, facts, memory_context, working_memory};
use crate::{
    auth::{Caller, Scope},
    domain::{
        agent_config::whole_number,
        event::Actor,
        fact::{FactInput, FactPatch, FactString, MAX_TAGS, MAX_TTL_SECONDS, Origin, Tag, present},
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

    /// The JSON Schema of the tool's arguments, derived from the struct they are read
    /// into. A user-bound caller's tools take no `agent_id` and `external_ref` (the token
    /// names them); anyone else's require both.
    pub fn input_schema(self, bound: bool) -> Map<String, Value> {
        let mut schema = match self {
            Tool::Remember => schema_for::<RememberArgs>(),
            Tool::Recall => schema_for::<RecallArgs>(),
            Tool::ListMemories => schema_for::<ListArgs>(),
            Tool::UpdateMemory => schema_for::<UpdateArgs>(),
            Tool::Forget => schema_for::<ForgetArgs>(),
            Tool::MemoryContext => schema_for::<ContextArgs>(),
            Tool::ReadWorkingMemory => schema_for::<NoArgs>(),
            Tool::WriteWorkingMemory => schema_for::<WriteWorkingMemoryArgs>(),
        };
        if !bound {
            for (key, more) in schema_for::<OwnerArgs>() {
                match (schema.get_mut(&key), more) {
                    (Some(Value::Object(own)), Value::Object(more)) => own.extend(more),
                    (Some(Value::Array(own)), Value::Array(more)) => own.extend(more),
                    _ => {}
                }
            }
        }
        schema
    }
}

/// The schema of the arguments `T` reads, as a model is shown it: every schema inline (a
/// model resolves no `$ref`), no `$schema`, `title` or `description` (the tool has its
/// own, and `T`'s doc comment is for people), and `properties` and `required` always there.
fn schema_for<T: JsonSchema>() -> Map<String, Value> {
    let settings = SchemaSettings::draft2020_12().with(|settings| {
        settings.meta_schema = None;
        settings.inline_subschemas = true;
    });
    let schema = settings.with_transform(RecursiveTransform(for_models)).into_generator().into_root_schema_for::<T>();
    let mut schema = match schema.to_value() {
        Value::Object(schema) => schema,
        _ => Map::new(),
    };
    schema.remove("title");
    schema.remove("description");
    schema.entry("properties").or_insert_with(|| Value::Object(Map::new()));
    schema.entry("required").or_insert_with(|| Value::Array(Vec::new()));
    schema
}

/// Each argument with its one type: an optional argument also takes `null` (as if
/// absent), which is not offered, nor a `null` default; number formats (`int64`,
/// `double`) are OpenAPI's, no constraint of JSON Schema.
fn for_models(schema: &mut Schema) {
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|kind| kind != "null");
        if let [kind] = types.as_slice() {
            let kind = kind.clone();
            schema.insert("type".into(), kind);
        }
    }
    if schema.get("default").is_some_and(Value::is_null) {
        schema.remove("default");
    }
    if matches!(schema.get("type").and_then(Value::as_str), Some("integer" | "number")) {
        schema.remove("format");
    }
}

/// A type's schema as the OpenAPI document states it (OpenAPI 3.1 schemas are JSON
/// Schema), so a constraint is written once for both, without what is there for people
/// reading the document: its description (the argument gives its own) and OpenAPI's
/// `example`, which is no JSON Schema keyword.
fn openapi<T: PartialSchema>(_: &mut SchemaGenerator) -> Schema {
    let mut schema = match serde_json::to_value(T::schema()) {
        Ok(Value::Object(schema)) => schema,
        _ => Map::new(),
    };
    schema.remove("description");
    schema.remove("example");
    Schema::from(schema)
}

/// A fact's tags: [`Tag`]s, at most [`MAX_TAGS`].
fn tag_list(generator: &mut SchemaGenerator) -> Schema {
    let mut tag = openapi::<Tag>(generator);
    tag.insert("description".into(), "A short label.".into());
    json_schema!({"type": "array", "items": tag, "maxItems": MAX_TAGS})
}

/// The owner of the memory a tool reaches, for a caller whose token names none. Read
/// before the tool's own arguments (see [`run`]).
#[derive(JsonSchema)]
#[allow(dead_code)] // only its schema is used: the fields are taken from the map
struct OwnerArgs {
    /// The agent whose memory this is.
    #[schemars(schema_with = "openapi::<AgentId>")]
    agent_id: String,
    /// The end user's id on your channel.
    #[schemars(schema_with = "openapi::<ExternalRef>")]
    external_ref: String,
}

const AS_OF: &str = "Read the facts that were true at this time (RFC 3339) instead of now: said by then, not yet replaced, not expired.";
const SCORE: &str = "How sure or important the fact is, 0-1.";

/// `remember`: the body of `POST …/facts` ([`FactInput`]), described for a model.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RememberArgs {
    /// The fact, in one short sentence about the user.
    #[schemars(schema_with = "openapi::<FactString>")]
    fact: String,
    /// Short labels, e.g. "diet"; repeats are kept once.
    #[serde(default)]
    #[schemars(schema_with = "tag_list")]
    tags: Option<Vec<String>>,
    #[schemars(description = SCORE, range(min = 0.0, max = 1.0))]
    score: Option<f64>,
    /// When the user said it (RFC 3339), if not now; never in the future.
    observed_at: Option<DateTime<Utc>>,
    /// When the fact stops being worth knowing (RFC 3339, in the future), for something temporary; not with ttl_seconds.
    expires_at: Option<DateTime<Utc>>,
    /// Forget the fact this many seconds from now, for something temporary; not with expires_at.
    #[serde(default, deserialize_with = "whole_number")]
    #[schemars(range(min = 1, max = MAX_TTL_SECONDS))]
    ttl_seconds: Option<i64>,
}

impl From<RememberArgs> for FactInput {
    fn from(args: RememberArgs) -> Self {
        // Every field named: one added to the REST body is a build error here until the
        // tool takes it too.
        let RememberArgs { fact, tags, score, observed_at, expires_at, ttl_seconds } = args;
        FactInput { fact, tags, score, observed_at, expires_at, ttl_seconds }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RecallArgs {
    /// What to look for, in the user's or your own words.
    #[schemars(length(min = 1, max = MAX_QUERY_CHARS))]
    query: String,
    #[schemars(range(min = 1, max = 200), extend("default" = 10))]
    limit: Option<i64>,
    #[schemars(description = AS_OF)]
    as_of: Option<DateTime<Utc>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// Only facts carrying this tag.
    #[serde(default)]
    #[schemars(schema_with = "openapi::<Tag>")]
    tag: Option<String>,
    #[schemars(range(min = 1, max = 200), extend("default" = 50))]
    limit: Option<i64>,
    /// The next_cursor of the previous page.
    #[schemars(length(min = 1), pattern("^[A-Za-z0-9_-]+$"))]
    cursor: Option<String>,
    #[schemars(description = AS_OF)]
    as_of: Option<DateTime<Utc>>,
}

/// `update_memory`: the fact's id and the body of `PATCH …/facts/{fact_id}`
/// ([`FactPatch`]), described for a model.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateArgs {
    /// The fact's id.
    #[serde(deserialize_with = "fact_id")]
    #[schemars(with = "String", extend("format" = "uuid"))]
    id: Uuid,
    /// The corrected fact.
    #[serde(default, deserialize_with = "present")]
    #[schemars(schema_with = "openapi::<FactString>")]
    fact: Option<String>,
    /// Replaces every tag.
    #[serde(default, deserialize_with = "present")]
    #[schemars(schema_with = "tag_list")]
    tags: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(description = SCORE, range(min = 0.0, max = 1.0))]
    score: Option<Option<f64>>,
}

impl From<UpdateArgs> for (Uuid, FactPatch) {
    fn from(args: UpdateArgs) -> Self {
        // As for `remember`: a field added to the REST body is a build error here.
        let UpdateArgs { id, fact, tags, score } = args;
        (id, FactPatch { fact, tags, score })
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ForgetArgs {
    /// The fact's id.
    #[serde(deserialize_with = "fact_id")]
    #[schemars(with = "String", extend("format" = "uuid"))]
    id: Uuid,
}

/// A fact's id, refused with what it should be.
fn fact_id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Uuid, D::Error> {
    let id = String::deserialize(deserializer)?;
    Uuid::parse_str(&id).map_err(|_| de::Error::custom("`id` must be a fact's id (a UUID)"))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ContextArgs {
    /// What the conversation is about: matching facts come first.
    #[schemars(length(max = MAX_QUERY_CHARS))]
    query: Option<String>,
    /// Default: the agent's max_injected_facts.
    #[schemars(range(min = 1, max = MAX_FACTS))]
    max_facts: Option<i64>,
    /// Tokens (about characters / 4) the prompt block may take.
    #[schemars(range(min = 1))]
    token_budget: Option<i64>,
    /// Also your working memory about the user, as a <working-memory> block.
    #[serde(default)]
    working_memory: bool,
    #[schemars(description = AS_OF)]
    as_of: Option<DateTime<Utc>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteWorkingMemoryArgs {
    /// The whole new text (Markdown is fine); it replaces the old one. At most 32 768 characters.
    #[schemars(length(max = document::MAX_CHARS))]
    content: String,
    /// The etag read_working_memory gave: the write is refused if the text changed since. Omit only for the first write.
    #[schemars(length(min = 1))]
    etag: Option<String>,
}

/// No further arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

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
            let input: FactInput = parse::<RememberArgs>(args)?.into();
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
            let (id, patch): (Uuid, FactPatch) = parse::<UpdateArgs>(args)?.into();
            to_value(facts::update(state, owner, id, patch, Actor::Agent).await?)
        }
        Tool::Forget => {
            let ForgetArgs { id } = parse(args)?;
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
            parse::<NoArgs>(args)?;
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
    use std::collections::BTreeSet;

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

    /// The fields serde reads into `T` (a struct), in its order: what a `Deserializer`
    /// is told when asked for the struct.
    fn fields_read<T: DeserializeOwned>() -> &'static [&'static str] {
        struct Fields<'a>(&'a mut &'static [&'static str]);
        impl<'de> Deserializer<'de> for Fields<'_> {
            type Error = de::value::Error;
            fn deserialize_any<V: de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
                Err(de::Error::custom("not a struct"))
            }
            fn deserialize_struct<V: de::Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                *self.0 = fields;
                Err(de::Error::custom("fields read"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
                unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
            }
        }
        let mut fields: &'static [&'static str] = &[];
        let _ = T::deserialize(Fields(&mut fields));
        fields
    }

    /// A tool's schema names exactly the arguments it reads: a field added to an argument
    /// struct is offered to models, and nothing is offered that the tool would refuse.
    #[test]
    fn schemas_name_every_argument_read() {
        for tool in Tool::ALL {
            let read = match tool {
                Tool::Remember => fields_read::<RememberArgs>(),
                Tool::Recall => fields_read::<RecallArgs>(),
                Tool::ListMemories => fields_read::<ListArgs>(),
                Tool::UpdateMemory => fields_read::<UpdateArgs>(),
                Tool::Forget => fields_read::<ForgetArgs>(),
                Tool::MemoryContext => fields_read::<ContextArgs>(),
                Tool::ReadWorkingMemory => fields_read::<NoArgs>(),
                Tool::WriteWorkingMemory => fields_read::<WriteWorkingMemoryArgs>(),
            };
            assert!(!read.is_empty() || tool == Tool::ReadWorkingMemory, "{}: no fields found", tool.name());
            for (bound, owner) in [(true, &[][..]), (false, &["agent_id", "external_ref"][..])] {
                let schema = tool.input_schema(bound);
                let offered: BTreeSet<&str> =
                    schema["properties"].as_object().unwrap().keys().map(String::as_str).collect();
                let expected: BTreeSet<&str> = read.iter().chain(owner).copied().collect();
                assert_eq!(offered, expected, "{} (bound: {bound})", tool.name());
                for name in schema["required"].as_array().unwrap() {
                    assert!(
                        offered.contains(name.as_str().unwrap()),
                        "{}: required {name} is no property",
                        tool.name()
                    );
                }
            }
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
