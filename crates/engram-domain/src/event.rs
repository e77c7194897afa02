//! Events: one record of every change to memory, written by the store in the change's own
//! transaction (the outbox), read as a feed (`GET /api/events`), kept as a fact's history
//! and pushed to webhooks. This module holds their vocabulary: the types, who acted, and
//! what an event says.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::fact::Fact;

/// Who made a change: the door it came through, or the job that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// A REST call (`/api/…`).
    Api,
    /// An agent's model, through a memory tool (`/mcp` or `/api/tools/call`).
    Agent,
    /// An operator, in the admin panel.
    Admin,
    /// The sweeper (idle conversations ended, expired events pruned, expired facts deleted).
    Sweeper,
    /// An extraction job.
    Extraction(Uuid),
    /// A summary job.
    Summary(Uuid),
}

impl Actor {
    pub fn kind(self) -> &'static str {
        match self {
            Actor::Api => "api",
            Actor::Agent => "agent",
            Actor::Admin => "admin",
            Actor::Sweeper => "sweeper",
            Actor::Extraction(_) => "extraction",
            Actor::Summary(_) => "summary",
        }
    }

    /// The job that acted, for job actors.
    pub fn job_id(self) -> Option<Uuid> {
        match self {
            Actor::Extraction(id) | Actor::Summary(id) => Some(id),
            _ => None,
        }
    }
}

/// Who made a change, as events and fact versions show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActorView {
    /// `api`, `agent` (a memory tool), `admin` (the panel), `sweeper`, `extraction` or
    /// `summary` (a job), or `unrecorded` (a fact stored before history was kept).
    pub kind: String,
    /// The job, for `extraction` and `summary`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<Uuid>,
}

macro_rules! event_types {
    ($($variant:ident => $name:tt, $doc:tt;)*) => {
        /// What changed. The names are part of the API (`types=` filters and webhook
        /// subscriptions name them).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
        pub enum EventType {
            $(#[doc = $doc] #[serde(rename = $name)] $variant,)*
        }

        impl EventType {
            pub const ALL: &[EventType] = &[$(EventType::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(EventType::$variant => $name,)*
                }
            }

            pub fn parse(name: &str) -> Option<EventType> {
                match name {
                    $($name => Some(EventType::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

event_types! {
    FactAdded => "fact.added", "A fact was stored.";
    FactUpdated => "fact.updated", "A fact's text, tags or score changed, or an extraction heard it again.";
    FactSuperseded => "fact.superseded", "A newer fact of the same slot replaced it.";
    FactRestored => "fact.restored", "A superseded fact was said again and is current once more.";
    FactDeleted => "fact.deleted", "One fact was deleted (by a caller, an extraction's revision, eviction, expiry or a forgetting policy).";
    FactsForgotten => "facts.forgotten", "Every fact an agent held about a person was deleted.";
    ConversationCreated => "conversation.created", "A conversation was created.";
    ConversationEnded => "conversation.ended", "A conversation was ended.";
    ConversationCleared => "conversation.cleared", "A conversation's messages were deleted (all by a caller, or the oldest by the agent's message retention).";
    ConversationDeleted => "conversation.deleted", "A conversation was deleted (by a caller, or by the agent's retention after it ended).";
    ConversationSummarized => "conversation.summarized", "A conversation's rolling summary was written.";
    JobSucceeded => "job.succeeded", "An extraction or summary job succeeded.";
    JobDead => "job.dead", "An extraction or summary job used its last attempt.";
    ConsentChanged => "consent.changed", "A person's AI-processing consent was set.";
    AgentSettingsChanged => "agent.settings_changed", "An agent's settings were changed or reset.";
    PersonErased => "person.erased", "A person was erased; the event carries the receipt, never the identifier.";
    WorkingMemoryWritten => "working_memory.written", "A working-memory document was written.";
    WorkingMemoryDeleted => "working_memory.deleted", "A working-memory document was deleted.";
}

/// What `types=` accepts: event type names separated by commas (no space), or nothing for
/// every type. Written out for the OpenAPI document; a test checks it against
/// [`EventType::ALL`].
pub const TYPES_PATTERN: &str = "^(?:(?:fact\\.added|fact\\.updated|fact\\.superseded|fact\\.restored|fact\\.deleted|facts\\.forgotten|conversation\\.created|conversation\\.ended|conversation\\.cleared|conversation\\.deleted|conversation\\.summarized|job\\.succeeded|job\\.dead|consent\\.changed|agent\\.settings_changed|person\\.erased|working_memory\\.written|working_memory\\.deleted)(?:,(?:fact\\.added|fact\\.updated|fact\\.superseded|fact\\.restored|fact\\.deleted|facts\\.forgotten|conversation\\.created|conversation\\.ended|conversation\\.cleared|conversation\\.deleted|conversation\\.summarized|job\\.succeeded|job\\.dead|consent\\.changed|agent\\.settings_changed|person\\.erased|working_memory\\.written|working_memory\\.deleted))*)?$";

/// Parses a comma-separated list of event type names (`types=`, see [`TYPES_PATTERN`]);
/// empty means every type.
pub fn parse_types(list: &str) -> Result<Vec<EventType>, String> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    list.split(',').map(|name| EventType::parse(name).ok_or_else(|| format!("unknown event type `{name}`"))).collect()
}

/// The stored form of a list of types: `,a,b,`, so that one `LIKE '%,' || type || ',%'`
/// matches a type exactly; empty for every type.
pub fn types_key(types: &[EventType]) -> String {
    if types.is_empty() {
        return String::new();
    }
    let mut key = String::from(",");
    for t in types {
        key.push_str(t.as_str());
        key.push(',');
    }
    key
}

/// The names in a stored list of types (see [`types_key`]).
pub fn types_of_key(key: &str) -> Vec<String> {
    key.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// What an event says besides its type, time and actor: the ids it concerns, the fact as
/// it now is (fact events), counts. Only the fields an event type uses are present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema)]
pub struct EventData {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fact_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<Uuid>,
    /// The job the event is about (`job.*`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<Uuid>,
    /// `extract_facts` or `summarize` (`job.*`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_kind: Option<String>,
    /// The erasure receipt (`person.erased`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt_id: Option<Uuid>,
    /// The fact as it is after the change (`fact.*` but `fact.deleted`, where it is the
    /// fact as it was).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Fact>)]
    pub fact: Option<serde_json::Value>,
    /// How many: facts forgotten, messages cleared (or trimmed by retention), facts an
    /// extraction added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The new consent (`consent.changed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consent: Option<bool>,
    /// Why: `evicted` (a deleted fact over the per-user cap), `revised` (an extraction
    /// deleted it), `expired` (past its `expires_at`: deleted by the sweeper, or when the
    /// same fact was remembered again), `max_age`, `unrecalled` and `keep_best` (the
    /// agent's forgetting policies), `retention` (`conversation.cleared` and
    /// `conversation.deleted` by the agent's message retention), `reset` (agent settings
    /// back to defaults).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// The agent's settings after the change (`agent.settings_changed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<serde_json::Value>,
    /// The conversation's or document's scope for `working_memory.*`: `user` or
    /// `conversation`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<&'static str>,
}

impl EventData {
    /// The data of a fact event: the fact's id and the fact itself.
    pub fn fact(fact: &Fact) -> EventData {
        EventData {
            fact_id: Some(fact.id),
            fact: serde_json::to_value(fact).ok(),
            conversation_id: fact.conversation_id,
            ..EventData::default()
        }
    }
}

/// An event to write: its type, whose memory (agent, person) and what it says. The store
/// adds its id, the time and the actor.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub kind: EventType,
    pub agent_id: Option<String>,
    pub external_ref: Option<String>,
    pub data: EventData,
}

/// One event of the feed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Event {
    /// The feed's cursor: it only grows, and a reader paging `after` it never passes an
    /// event still to come. Not dense (SQLite counts 1, 2, 3 per tenant; PostgreSQL
    /// derives it from its transaction ids).
    pub id: i64,
    /// See the event types in the API reference (`fact.added`, `person.erased`…).
    #[serde(rename = "type")]
    pub kind: String,
    pub created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The person the event concerns; absent for agent settings and erasures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_ref: Option<String>,
    pub actor: ActorView,
    pub data: serde_json::Value,
}

/// One version of a fact: what it was after one change, who made it and when.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FactVersion {
    /// 1 for the fact as first stored, then one more per change.
    pub version: i32,
    /// The event type of the change (`fact.added`, `fact.updated`, `fact.superseded`,
    /// `fact.restored`).
    pub change: String,
    pub created_at: DateTime<Utc>,
    pub actor: ActorView,
    /// The fact after the change (its text, score, tags, and `superseded_by`).
    #[schema(value_type = Fact)]
    pub fact: serde_json::Value,
}

/// A version of one of the person's facts, as the GDPR export holds it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ExportedVersion {
    pub fact_id: Uuid,
    #[serde(flatten)]
    pub version: FactVersion,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_reads_back_from_its_name_and_names_are_unique() {
        let mut names: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(*t));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EventType::ALL.len());
    }

    #[test]
    fn the_types_pattern_names_every_type() {
        let names: Vec<String> = EventType::ALL.iter().map(|t| t.as_str().replace('.', "\\.")).collect();
        let one = format!("(?:{})", names.join("|"));
        assert_eq!(TYPES_PATTERN, format!("^(?:{one}(?:,{one})*)?$"));
    }

    #[test]
    fn a_types_key_matches_exactly_one_name_per_entry() {
        assert!(parse_types("fact.added, fact.deleted").is_err(), "no spaces, as the pattern says");
        assert!(parse_types("fact.added,").is_err());
        let types = parse_types("fact.added,fact.deleted").unwrap();
        let key = types_key(&types);
        assert_eq!(key, ",fact.added,fact.deleted,");
        assert_eq!(types_of_key(&key), ["fact.added", "fact.deleted"]);
        assert!(!key.contains(",fact.updated,"));
        assert_eq!(types_key(&[]), "");
        assert!(parse_types("fact.added,fact.eaten").unwrap_err().contains("fact.eaten"));
        assert_eq!(parse_types("").unwrap(), []);
    }
}
