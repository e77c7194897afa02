//! `/admin/agents`: every agent with its settings, a memory switch per agent, and the
//! settings form, validated by the domain's own rules with each message shown next to
//! its field.

use askama::Template;
use axum::extract::{Query, State};
use serde::Deserialize;

use super::{
    AdminPath, AdminResult, Done, Layout, Switch, encode_segment,
    forms::FieldErrors,
    render, see_other,
    session::{Guarded, Operator},
    when,
};
use crate::{
    auth::{Admin, Scope},
    domain::{
        agent_config::{AgentConfig, ConfigPatch, Settings},
        event::Actor,
        ids::AgentId,
    },
    service::{AppState, agents, error::ServiceError},
};

const PAGE: i64 = 50;

/// One row of the list.
struct Row {
    config: AgentConfig,
    path: String,
    updated: String,
}

#[derive(Template)]
#[template(path = "admin/agents.html")]
struct AgentsPage {
    layout: Layout,
    can_list: bool,
    can_change: bool,
    rows: Vec<Row>,
    next: Option<String>,
    new_agent_id: String,
    errors: FieldErrors,
}

#[derive(Deserialize)]
pub struct ListQuery {
    done: Option<String>,
    after: Option<String>,
    /// The "look up an agent" form.
    agent_id: Option<String>,
}

pub async fn list(State(state): State<AppState>, operator: Operator, Query(q): Query<ListQuery>) -> AdminResult {
    if let Some(agent) = q.agent_id.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
        return see_other(&format!("/admin/agents/{}", encode_segment(agent)));
    }
    let page = list_page(&state, &operator, q.after, q.done.as_deref(), String::new(), FieldErrors::default()).await?;
    render(&page)
}

async fn list_page(
    state: &AppState,
    operator: &Operator,
    after: Option<String>,
    done: Option<&str>,
    new_agent_id: String,
    errors: FieldErrors,
) -> AdminResult<AgentsPage> {
    let can_list = operator.can(Scope::Admin);
    let (mut rows, mut next) = (Vec::new(), None);
    if can_list {
        let mut configs = agents::list(state, operator.tenant(), after.as_deref(), PAGE + 1).await?;
        if configs.len() > PAGE as usize {
            configs.truncate(PAGE as usize);
            next = configs.last().map(|c| format!("/admin/agents?after={}", encode_segment(c.agent_id.as_str())));
        }
        rows = configs
            .into_iter()
            .map(|config| Row {
                path: encode_segment(config.agent_id.as_str()),
                updated: when(&config.updated_at),
                config,
            })
            .collect();
    }
    Ok(AgentsPage {
        layout: operator.layout("Agents", "agents", done),
        can_list,
        can_change: operator.can(Scope::Admin),
        rows,
        next,
        new_agent_id,
        errors,
    })
}

#[derive(Deserialize)]
pub struct NewAgentForm {
    #[serde(default)]
    agent_id: String,
    memory_enabled: Option<String>,
}

/// Configures a new agent (or an existing one: the same upsert as `PUT /api/agents-config`).
pub async fn create(
    State(state): State<AppState>,
    Guarded { operator, form, .. }: Guarded<NewAgentForm, Admin>,
) -> AdminResult {
    let agent = match AgentId::parse(form.agent_id.trim().to_owned()) {
        Ok(agent) => agent,
        Err(message) => {
            let mut errors = FieldErrors::default();
            errors.add("agent_id", message);
            let page = list_page(&state, &operator, None, None, form.agent_id, errors).await?;
            return render(&page);
        }
    };
    let patch = ConfigPatch { memory_enabled: Some(form.memory_enabled.is_some()), ..ConfigPatch::default() };
    agents::configure(&state, operator.tenant(), &agent, &patch, Actor::Admin).await?;
    see_other(&format!("/admin/agents/{}?done=created", encode_segment(agent.as_str())))
}

#[derive(Deserialize)]
pub struct MemoryForm {
    enabled: Switch,
}

/// The memory switch: takes effect at once (the next memory context or conversation end
/// reads the stored setting).
pub async fn switch_memory(
    State(state): State<AppState>,
    AdminPath(agent): AdminPath<AgentId>,
    Guarded { operator, form, .. }: Guarded<MemoryForm, Admin>,
) -> AdminResult {
    let on = form.enabled.is_on();
    let patch = ConfigPatch { memory_enabled: Some(on), ..ConfigPatch::default() };
    agents::configure(&state, operator.tenant(), &agent, &patch, Actor::Admin).await?;
    tracing::info!(memory_enabled = on, "agent memory switched from the admin panel");
    see_other(if on { "/admin/agents?done=memory-on" } else { "/admin/agents?done=memory-off" })
}

/// The settings form's values, as typed (shown again when invalid).
pub struct SettingsValues {
    memory_enabled: bool,
    min_user_turns: String,
    /// Empty: extraction at the end only.
    extract_every_user_turns: String,
    max_injected_facts: String,
    min_confidence: String,
    extraction_instructions: String,
    /// The forgetting and retention numbers, in [`POLICY_FIELDS`] order.
    policies: [String; 5],
    forget_curated_facts: bool,
    delete_facts_with_conversation: bool,
    /// The agents whose facts it reads too, separated by spaces; empty: none.
    reads_facts_of: String,
}

/// The forgetting and retention settings the panel edits as whole numbers (0 = off): field
/// name, label and hint, in the form's order.
const POLICY_FIELDS: [(&str, &str, &str); 5] = [
    (
        "forget_extracted_after_days",
        "Forget extracted facts after (days)",
        "Extracted facts said longer ago are deleted (0 = never, up to 36500).",
    ),
    (
        "forget_unrecalled_after_days",
        "Forget unrecalled facts after (days)",
        "Facts no read returned for this long are deleted (0 = never, up to 36500).",
    ),
    (
        "keep_best_facts",
        "Keep best facts per user",
        "Only this many per user are kept, the best by confidence, recency and recalls (0 = all, up to 100000).",
    ),
    (
        "max_messages_per_conversation",
        "Messages kept per conversation",
        "Older messages are deleted once the rolling summary covers them (0 = all, up to 1000000).",
    ),
    (
        "delete_conversations_after_days",
        "Delete conversations after (days)",
        "Ended conversations are deleted this long after they ended (0 = never, up to 36500).",
    ),
];

impl SettingsValues {
    fn of(settings: &Settings) -> SettingsValues {
        SettingsValues {
            memory_enabled: settings.memory_enabled,
            min_user_turns: settings.min_user_turns.to_string(),
            extract_every_user_turns: settings.extract_every_user_turns.map(|n| n.to_string()).unwrap_or_default(),
            max_injected_facts: settings.max_injected_facts.to_string(),
            min_confidence: settings.min_confidence.to_string(),
            extraction_instructions: settings.extraction_instructions.clone().unwrap_or_default(),
            policies: [
                settings.forgetting.extracted_after_days,
                settings.forgetting.unrecalled_after_days,
                settings.forgetting.keep_best,
                settings.retention.max_messages,
                settings.retention.conversations_after_days,
            ]
            .map(|n| n.to_string()),
            forget_curated_facts: settings.forgetting.curated,
            delete_facts_with_conversation: settings.delete_facts_with_conversation,
            reads_facts_of: settings.reads_facts_of.iter().map(AgentId::as_str).collect::<Vec<_>>().join(" "),
        }
    }

    /// The forgetting and retention fields for the template: (name, label, hint, value).
    fn policy_fields(&self) -> impl Iterator<Item = (&'static str, &'static str, &'static str, &str)> + '_ {
        POLICY_FIELDS
            .iter()
            .zip(&self.policies)
            .map(|((name, label, hint), value)| (*name, *label, *hint, value.as_str()))
    }
}

#[derive(Template)]
#[template(path = "admin/agent.html")]
struct AgentPage {
    layout: Layout,
    agent_id: String,
    path: String,
    configured: bool,
    updated: Option<String>,
    can_change: bool,
    values: SettingsValues,
    errors: FieldErrors,
}

pub async fn show(
    State(state): State<AppState>,
    operator: Operator,
    AdminPath(agent): AdminPath<AgentId>,
    Query(q): Query<Done>,
) -> AdminResult {
    operator.require(Scope::MemoryRead)?;
    let config = agents::get(&state, operator.tenant(), &agent).await?;
    let settings = config.clone().map_or_else(Settings::default, Settings::from);
    render(&AgentPage {
        layout: operator.layout(format!("Agent {}", agent.as_str()), "agents", q.done.as_deref()),
        path: encode_segment(agent.as_str()),
        agent_id: agent.as_str().to_owned(),
        configured: config.is_some(),
        updated: config.as_ref().map(|c| when(&c.updated_at)),
        can_change: operator.can(Scope::Admin),
        values: SettingsValues::of(&settings),
        errors: FieldErrors::default(),
    })
}

#[derive(Deserialize)]
pub struct SettingsForm {
    memory_enabled: Option<String>,
    #[serde(default)]
    min_user_turns: String,
    /// Empty: at the end only; absent (a form from before the field): kept.
    #[serde(default)]
    extract_every_user_turns: Option<String>,
    #[serde(default)]
    max_injected_facts: String,
    #[serde(default)]
    min_confidence: String,
    #[serde(default)]
    extraction_instructions: String,
    #[serde(default)]
    forget_extracted_after_days: Option<String>,
    #[serde(default)]
    forget_unrecalled_after_days: Option<String>,
    #[serde(default)]
    keep_best_facts: Option<String>,
    #[serde(default)]
    max_messages_per_conversation: Option<String>,
    #[serde(default)]
    delete_conversations_after_days: Option<String>,
    forget_curated_facts: Option<String>,
    delete_facts_with_conversation: Option<String>,
    /// Agent ids separated by spaces or commas; empty: none; absent (a form from before
    /// the field): kept.
    #[serde(default)]
    reads_facts_of: Option<String>,
}

impl SettingsForm {
    /// The forgetting and retention fields as typed, in [`POLICY_FIELDS`] order (absent:
    /// empty, which keeps the stored value).
    fn policies(&self) -> [String; 5] {
        [
            &self.forget_extracted_after_days,
            &self.forget_unrecalled_after_days,
            &self.keep_best_facts,
            &self.max_messages_per_conversation,
            &self.delete_conversations_after_days,
        ]
        .map(|value| value.clone().unwrap_or_default())
    }
}

/// Turns the form into the API's patch. Each field is checked on its own by the domain's
/// [`ConfigPatch::validate`], so that each message lands next to its field.
fn patch_of(form: &SettingsForm) -> Result<ConfigPatch, FieldErrors> {
    let mut errors = FieldErrors::default();
    let mut check = |field: &'static str, patch: ConfigPatch| match patch.validate() {
        Ok(()) => Some(patch),
        Err(message) => {
            errors.add(field, message);
            None
        }
    };
    let whole = |text: &str| text.trim().parse::<i32>().ok();
    let turns = match whole(&form.min_user_turns) {
        Some(n) => check("min_user_turns", ConfigPatch { min_user_turns: Some(n), ..ConfigPatch::default() }),
        None => None,
    };
    let every = match form.extract_every_user_turns.as_deref().map(str::trim) {
        None => Some(ConfigPatch::default()),
        Some("") => Some(ConfigPatch { extract_every_user_turns: Some(None), ..ConfigPatch::default() }),
        Some(typed) => match whole(typed) {
            Some(n) => check(
                "extract_every_user_turns",
                ConfigPatch { extract_every_user_turns: Some(Some(n)), ..ConfigPatch::default() },
            ),
            None => None,
        },
    };
    let facts = match whole(&form.max_injected_facts) {
        Some(n) => check("max_injected_facts", ConfigPatch { max_injected_facts: Some(n), ..ConfigPatch::default() }),
        None => None,
    };
    let confidence = match form.min_confidence.trim().parse::<f64>().ok().filter(|c| c.is_finite()) {
        Some(c) => check("min_confidence", ConfigPatch { min_confidence: Some(c), ..ConfigPatch::default() }),
        None => None,
    };
    let text = form.extraction_instructions.trim();
    let instructions = Some((!text.is_empty()).then(|| text.to_owned()));
    let instructions_ok = check(
        "extraction_instructions",
        ConfigPatch { extraction_instructions: Some(instructions.clone().flatten()), ..ConfigPatch::default() },
    )
    .is_some();
    // Each policy on its own, so that its message lands next to it; empty keeps it.
    let mut unparsed = Vec::new();
    let mut policies = ConfigPatch {
        forget_curated_facts: Some(form.forget_curated_facts.is_some()),
        delete_facts_with_conversation: Some(form.delete_facts_with_conversation.is_some()),
        ..ConfigPatch::default()
    };
    for ((name, ..), typed) in POLICY_FIELDS.iter().zip(form.policies()) {
        if typed.trim().is_empty() {
            continue;
        }
        let Some(n) = whole(&typed) else {
            unparsed.push(*name);
            continue;
        };
        let mut one = ConfigPatch::default();
        *policy_of(&mut one, name) = Some(n);
        if check(name, one).is_some() {
            *policy_of(&mut policies, name) = Some(n);
        }
    }
    for name in unparsed {
        errors.add(name, format!("{name} must be a whole number (0 = off)"));
    }
    if whole(&form.min_user_turns).is_none() {
        errors.add("min_user_turns", "min_user_turns must be a whole number from 1 to 100".into());
    }
    if form.extract_every_user_turns.as_deref().map(str::trim).is_some_and(|t| !t.is_empty() && whole(t).is_none()) {
        errors.add(
            "extract_every_user_turns",
            "extract_every_user_turns must be a whole number from 1 to 100, or empty".into(),
        );
    }
    if whole(&form.max_injected_facts).is_none() {
        errors.add("max_injected_facts", "max_injected_facts must be a whole number from 1 to 100".into());
    }
    let shared = match form.reads_facts_of.as_deref().map(shared_agents) {
        None => Some(None),
        Some(Ok(agents)) => Some(Some(agents)),
        Some(Err(message)) => {
            errors.add("reads_facts_of", message);
            None
        }
    };
    if confidence.is_none() && errors.get("min_confidence").is_none() {
        errors.add("min_confidence", "min_confidence must be a number between 0 and 1".into());
    }
    match (turns, every, facts, confidence, shared, instructions_ok, errors.is_empty()) {
        (Some(turns), Some(every), Some(facts), Some(confidence), Some(shared), true, true) => Ok(ConfigPatch {
            memory_enabled: Some(form.memory_enabled.is_some()),
            min_user_turns: turns.min_user_turns,
            extract_every_user_turns: every.extract_every_user_turns,
            max_injected_facts: facts.max_injected_facts,
            min_confidence: confidence.min_confidence,
            extraction_instructions: instructions,
            reads_facts_of: shared,
            // The panel leaves the summary settings as they are.
            ..policies
        }),
        _ => Err(errors),
    }
}

/// The agent ids typed in the shared memory field, separated by spaces or commas (the
/// rules that need the agent or the store are the service's, see [`agents::configure`]).
fn shared_agents(typed: &str) -> Result<Vec<AgentId>, String> {
    typed
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|id| !id.is_empty())
        .map(|id| AgentId::parse(id.to_owned()).map_err(|_| format!("reads_facts_of: {id:?} is not an agent id")))
        .collect()
}

/// The field of `patch` that the policy setting `name` (one of [`POLICY_FIELDS`]) sets.
fn policy_of<'p>(patch: &'p mut ConfigPatch, name: &str) -> &'p mut Option<i32> {
    match name {
        "forget_extracted_after_days" => &mut patch.forget_extracted_after_days,
        "forget_unrecalled_after_days" => &mut patch.forget_unrecalled_after_days,
        "keep_best_facts" => &mut patch.keep_best_facts,
        "max_messages_per_conversation" => &mut patch.max_messages_per_conversation,
        _ => &mut patch.delete_conversations_after_days,
    }
}

pub async fn save(
    State(state): State<AppState>,
    AdminPath(agent): AdminPath<AgentId>,
    Guarded { operator, form, .. }: Guarded<SettingsForm, Admin>,
) -> AdminResult {
    let refused = match patch_of(&form) {
        Ok(patch) => match agents::configure(&state, operator.tenant(), &agent, &patch, Actor::Admin).await {
            Ok(_) => return see_other(&format!("/admin/agents/{}?done=saved", encode_segment(agent.as_str()))),
            // Every other field was checked by `patch_of`: what the service refuses is the
            // list of agents read (itself, twice, or not configured in this tenant).
            Err(ServiceError::Invalid(message)) => {
                let mut errors = FieldErrors::default();
                errors.add("reads_facts_of", message);
                errors
            }
            Err(other) => return Err(other.into()),
        },
        Err(errors) => errors,
    };
    let config = agents::get(&state, operator.tenant(), &agent).await?;
    let page = AgentPage {
        layout: operator.layout(format!("Agent {}", agent.as_str()), "agents", None),
        path: encode_segment(agent.as_str()),
        agent_id: agent.as_str().to_owned(),
        configured: config.is_some(),
        updated: config.as_ref().map(|c| when(&c.updated_at)),
        can_change: true,
        values: SettingsValues {
            memory_enabled: form.memory_enabled.is_some(),
            policies: form.policies(),
            forget_curated_facts: form.forget_curated_facts.is_some(),
            delete_facts_with_conversation: form.delete_facts_with_conversation.is_some(),
            min_user_turns: form.min_user_turns,
            extract_every_user_turns: form.extract_every_user_turns.unwrap_or_default(),
            max_injected_facts: form.max_injected_facts,
            min_confidence: form.min_confidence,
            extraction_instructions: form.extraction_instructions,
            reads_facts_of: form.reads_facts_of.unwrap_or_default(),
        },
        errors: refused,
    };
    render(&page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(turns: &str, facts: &str, confidence: &str, instructions: &str) -> SettingsForm {
        SettingsForm {
            memory_enabled: Some("on".into()),
            min_user_turns: turns.into(),
            extract_every_user_turns: Some("3".into()),
            max_injected_facts: facts.into(),
            min_confidence: confidence.into(),
            extraction_instructions: instructions.into(),
            forget_extracted_after_days: None,
            forget_unrecalled_after_days: None,
            keep_best_facts: Some("0".into()),
            max_messages_per_conversation: None,
            delete_conversations_after_days: None,
            forget_curated_facts: None,
            delete_facts_with_conversation: None,
            reads_facts_of: Some("profile, billing".into()),
        }
    }

    #[test]
    fn each_message_belongs_to_its_field() {
        let errors = patch_of(&form("0", "x", "2", "")).unwrap_err();
        assert_eq!(errors.get("min_user_turns").map(String::as_str), Some("min_user_turns must be 1-100, got 0"));
        assert!(errors.get("max_injected_facts").is_some());
        assert_eq!(
            errors.get("min_confidence").map(String::as_str),
            Some("min_confidence must be between 0 and 1, got 2")
        );
        assert!(errors.get("extraction_instructions").is_none());
        let long = "x".repeat(4001);
        assert!(patch_of(&form("3", "10", "0.7", &long)).unwrap_err().get("extraction_instructions").is_some());
    }

    #[test]
    fn a_valid_form_is_the_whole_patch() {
        let patch = patch_of(&form("2", "5", "0.5", "  ")).unwrap();
        assert_eq!(patch.memory_enabled, Some(true));
        assert_eq!(patch.min_user_turns, Some(2));
        assert_eq!(patch.max_injected_facts, Some(5));
        assert_eq!(patch.min_confidence, Some(0.5));
        assert_eq!(patch.extraction_instructions, Some(None));
        assert_eq!((patch.keep_best_facts, patch.forget_extracted_after_days), (Some(0), None), "empty keeps");
        assert_eq!(patch.forget_curated_facts, Some(false));
        assert_eq!(patch.delete_facts_with_conversation, Some(false), "an unticked box is off");
        assert_eq!(patch.extract_every_user_turns, Some(Some(3)));
    }

    #[test]
    fn rolling_extraction_empty_is_end_only_and_a_bad_value_is_refused_at_its_field() {
        let mut end_only = form("3", "10", "0.7", "");
        end_only.extract_every_user_turns = Some(" ".into());
        assert_eq!(patch_of(&end_only).unwrap().extract_every_user_turns, Some(None));
        end_only.extract_every_user_turns = None;
        assert_eq!(patch_of(&end_only).unwrap().extract_every_user_turns, None, "absent keeps");
        for bad in ["0", "101", "often"] {
            let mut form = form("3", "10", "0.7", "");
            form.extract_every_user_turns = Some(bad.into());
            assert!(patch_of(&form).unwrap_err().get("extract_every_user_turns").is_some(), "{bad}");
        }
    }

    #[test]
    fn shared_agents_are_typed_as_ids_and_empty_reads_none() {
        let ids = |patch: ConfigPatch| {
            patch.reads_facts_of.map(|ids| ids.iter().map(|id| id.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(ids(patch_of(&form("3", "10", "0.7", "")).unwrap()), Some(vec!["profile".into(), "billing".into()]));
        let mut none = form("3", "10", "0.7", "");
        none.reads_facts_of = Some(" ".into());
        assert_eq!(ids(patch_of(&none).unwrap()), Some(vec![]));
        none.reads_facts_of = None;
        assert_eq!(ids(patch_of(&none).unwrap()), None, "absent keeps");
        none.reads_facts_of = Some("profile a/b".into());
        assert!(patch_of(&none).unwrap_err().get("reads_facts_of").is_some());
    }

    #[test]
    fn each_policy_is_checked_next_to_its_field() {
        let mut bad = form("3", "10", "0.7", "");
        bad.forget_extracted_after_days = Some("36501".into());
        bad.keep_best_facts = Some("many".into());
        bad.delete_conversations_after_days = Some("30".into());
        let errors = patch_of(&bad).unwrap_err();
        assert_eq!(
            errors.get("forget_extracted_after_days").map(String::as_str),
            Some("forget_extracted_after_days must be 0 (off) to 36500, got 36501")
        );
        assert!(errors.get("keep_best_facts").is_some());
        assert!(errors.get("delete_conversations_after_days").is_none());
        let mut good = form("3", "10", "0.7", "");
        good.delete_conversations_after_days = Some(" 30 ".into());
        good.forget_curated_facts = Some("on".into());
        good.delete_facts_with_conversation = Some("on".into());
        let patch = patch_of(&good).unwrap();
        assert_eq!((patch.delete_conversations_after_days, patch.forget_curated_facts), (Some(30), Some(true)));
        assert_eq!(patch.delete_facts_with_conversation, Some(true));
    }
}
