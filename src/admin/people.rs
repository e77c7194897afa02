//! `/admin/people`: one end user, found by external ref — their consent, per agent their
//! facts (search, add, edit, delete, forget all) and working memory, their conversations
//! with messages, the export of everything held about them, and erasure with its receipt.

use askama::Template;
use axum::{
    extract::{Query, State},
    http::{HeaderValue, header},
    response::IntoResponse,
};
use std::collections::HashMap;

use serde::Deserialize;
use uuid::Uuid;

use super::{
    AdminError, AdminPath, AdminResult, Done, Layout, Switch, encode_segment,
    forms::FieldErrors,
    render, see_other,
    session::{Guarded, NoFields, Operator},
    when,
};
use crate::{
    auth::{Gdpr, MemoryWrite, Scope},
    domain::{
        conversation::Conversation,
        event::{Actor, FactVersion},
        fact::{Fact, FactInput, FactPatch, Origin, SourceMessage},
        ids::{AgentId, ExternalRef},
        message::{Message, RoleSet},
        policy::Consent,
        working_memory::{Condition, Scope as DocumentScope},
    },
    service::{
        AppState, ConversationFilter, ErasedCounts, FactFilter, Window, agents, consent, conversations, erasure,
        error::ServiceError, events, facts, gdpr_export::export_body, working_memory,
    },
};

const FACTS_PAGE: i64 = 50;
const CONVERSATIONS_SHOWN: i64 = 50;
const MESSAGES_SHOWN: i64 = 1000;
/// One per agent: a person is rarely known to more.
const DOCUMENTS_SHOWN: i64 = 50;

fn person(raw: String) -> Result<ExternalRef, AdminError> {
    ExternalRef::parse(raw).map_err(AdminError::BadRequest)
}

fn agent(raw: String) -> Result<AgentId, AdminError> {
    AgentId::parse(raw).map_err(AdminError::BadRequest)
}

fn person_path(user: &ExternalRef) -> String {
    format!("/admin/people/{}", encode_segment(user.as_str()))
}

fn facts_path(user: &ExternalRef, agent: &AgentId) -> String {
    format!("{}/agents/{}", person_path(user), encode_segment(agent.as_str()))
}

/// The consent as the API shows it: the stored record, or the configured default.

#[derive(Template)]
#[template(path = "admin/people.html")]
struct FindPage {
    layout: Layout,
}

#[derive(Deserialize)]
pub struct FindQuery {
    #[serde(rename = "ref")]
    external_ref: Option<String>,
}

/// The search form; a ref typed into it opens that person's page.
pub async fn find(operator: Operator, Query(q): Query<FindQuery>) -> AdminResult {
    if let Some(user) = q.external_ref.filter(|r| !r.trim().is_empty()) {
        let user = person(user.trim().to_owned())?;
        return see_other(&person_path(&user));
    }
    render(&FindPage { layout: operator.layout("People", "people", None) })
}

struct ConversationRow {
    conversation: Conversation,
    path: String,
    updated: String,
}

struct AgentLink {
    id: String,
    path: String,
}

#[derive(Template)]
#[template(path = "admin/person.html")]
struct PersonPage {
    layout: Layout,
    external_ref: String,
    path: String,
    can_read: bool,
    can_write: bool,
    can_gdpr: bool,
    consent: Option<Consent>,
    consent_updated: Option<String>,
    agents: Vec<AgentLink>,
    conversations: Vec<ConversationRow>,
    documents: Vec<DocumentView>,
}

/// One agent's working memory document about the person.
struct DocumentView {
    agent_id: String,
    etag: String,
    content: String,
    updated: String,
    /// Where its delete form posts.
    delete_path: String,
}

#[derive(Deserialize)]
pub struct PersonQuery {
    done: Option<String>,
    /// The "open an agent" form.
    agent_id: Option<String>,
}

pub async fn show(
    State(state): State<AppState>,
    operator: Operator,
    AdminPath(user): AdminPath<ExternalRef>,
    Query(q): Query<PersonQuery>,
) -> AdminResult {
    if let Some(raw) = q.agent_id.map(|a| a.trim().to_owned()).filter(|a| !a.is_empty()) {
        return see_other(&facts_path(&user, &agent(raw)?));
    }
    let (can_read, can_gdpr) = (operator.can(Scope::MemoryRead), operator.can(Scope::Gdpr));
    if !can_read && !can_gdpr {
        operator.require(Scope::MemoryRead)?;
    }
    let tenant = operator.tenant();
    let (mut consent, mut agents, mut conversations, mut documents) = (None, Vec::new(), Vec::new(), Vec::new());
    if can_read {
        consent = Some(consent::get(&state, tenant, &user).await?);
        agents = agents::of_user(&state, tenant, &user)
            .await?
            .into_iter()
            .map(|agent| AgentLink { path: facts_path(&user, &agent), id: agent.as_str().to_owned() })
            .collect();
        let filter = ConversationFilter { external_ref: Some(&user), ..ConversationFilter::default() };
        conversations = conversations::list(&state, tenant, &filter, None, CONVERSATIONS_SHOWN)
            .await?
            .into_iter()
            .map(|conversation| ConversationRow {
                path: format!("{}/conversations/{}", person_path(&user), conversation.id),
                updated: when(&conversation.updated_at),
                conversation,
            })
            .collect();
        documents = working_memory::of_person(&state, tenant, &user, DOCUMENTS_SHOWN)
            .await?
            .into_iter()
            .map(|document| DocumentView {
                delete_path: format!("{}/working-memory/delete", facts_path(&user, &document.agent_id)),
                agent_id: document.agent_id.as_str().to_owned(),
                updated: when(&document.memory.updated_at),
                etag: document.memory.etag,
                content: document.memory.content,
            })
            .collect();
    }
    render(&PersonPage {
        layout: operator.layout(format!("Person {}", user.as_str()), "people", q.done.as_deref()),
        path: person_path(&user),
        external_ref: user.as_str().to_owned(),
        can_read,
        can_write: operator.can(Scope::MemoryWrite),
        can_gdpr,
        consent_updated: consent.as_ref().and_then(|c| c.updated_at.as_ref()).map(when),
        consent,
        agents,
        conversations,
        documents,
    })
}

#[derive(Deserialize)]
pub struct ConsentForm {
    ai_consent: Switch,
}

/// Switches consent, as `PUT /api/users/{external_ref}/consent` does (a refusal also
/// cancels the person's queued jobs, in the store).
pub async fn set_consent(
    State(state): State<AppState>,
    AdminPath(user): AdminPath<ExternalRef>,
    Guarded { operator, form, .. }: Guarded<ConsentForm, MemoryWrite>,
) -> AdminResult {
    let on = form.ai_consent.is_on();
    consent::set(&state, operator.tenant(), &user, on, Actor::Admin).await?;
    let done = if on { "consent-on" } else { "consent-off" };
    see_other(&format!("{}?done={done}", person_path(&user)))
}

struct MessageView {
    message: Message,
    text: String,
    time: String,
}

#[derive(Template)]
#[template(path = "admin/conversation.html")]
struct ConversationPage {
    layout: Layout,
    external_ref: String,
    person_path: String,
    conversation: Conversation,
    created: String,
    messages: Vec<MessageView>,
    truncated: bool,
}

pub async fn conversation(
    State(state): State<AppState>,
    operator: Operator,
    AdminPath((user, id)): AdminPath<(ExternalRef, Uuid)>,
) -> AdminResult {
    operator.require(Scope::MemoryRead)?;
    let tenant = operator.tenant();
    let conversation = conversations::get(&state, tenant, id).await?;
    if conversation.external_ref != user {
        return Err(AdminError::NotFound("conversation"));
    }
    let messages = conversations::messages(&state, tenant, id, 0, RoleSet::ALL, Window::First(MESSAGES_SHOWN)).await?;
    render(&ConversationPage {
        layout: operator.layout("Conversation", "people", None),
        external_ref: user.as_str().to_owned(),
        person_path: person_path(&user),
        created: when(&conversation.created_at),
        truncated: conversation.message_count > MESSAGES_SHOWN,
        conversation,
        messages: messages
            .into_iter()
            .map(|message| MessageView { text: message.text(), time: when(&message.created_at), message })
            .collect(),
    })
}

#[derive(Template)]
#[template(path = "admin/fact_history.html")]
struct HistoryPage {
    layout: Layout,
    external_ref: String,
    agent_id: String,
    facts_path: String,
    versions: Vec<VersionView>,
}

struct VersionView {
    version: FactVersion,
    text: String,
    tags: String,
    score: String,
    superseded_by: Option<String>,
    at: String,
}

/// Every version of one fact, with who changed it (`GET …/facts/{id}/history`).
pub async fn fact_history(
    State(state): State<AppState>,
    operator: Operator,
    AdminPath((user, agent, id)): AdminPath<(ExternalRef, AgentId, Uuid)>,
) -> AdminResult {
    operator.require(Scope::MemoryRead)?;
    let versions = events::fact_history(&state, operator.caller.owner(&agent, &user), id).await?;
    let field = |v: &FactVersion, name: &str| v.fact.get(name).cloned().unwrap_or_default();
    render(&HistoryPage {
        layout: operator.layout("Fact history", "people", None),
        external_ref: user.as_str().to_owned(),
        agent_id: agent.as_str().to_owned(),
        facts_path: facts_path(&user, &agent),
        versions: versions
            .into_iter()
            .map(|v| VersionView {
                text: field(&v, "fact").as_str().unwrap_or_default().to_owned(),
                tags: field(&v, "tags")
                    .as_array()
                    .map(|tags| tags.iter().filter_map(|t| t.as_str()).collect::<Vec<_>>().join(", "))
                    .unwrap_or_default(),
                score: field(&v, "score").as_f64().map_or_else(|| "—".to_owned(), |s| format!("{s:.2}")),
                superseded_by: field(&v, "superseded_by").as_str().map(str::to_owned),
                at: when(&v.created_at),
                version: v,
            })
            .collect(),
    })
}

/// A fact form's values as typed.
#[derive(Default, Deserialize)]
pub struct FactForm {
    #[serde(default)]
    fact: String,
    #[serde(default)]
    tags: String,
    #[serde(default)]
    score: String,
}

struct FactView {
    fact: Fact,
    /// The edit form: the stored values, or what was typed when it was refused.
    form: FactForm,
    errors: FieldErrors,
    open: bool,
    tags: String,
    score: String,
    relevance: Option<String>,
    updated: String,
    /// When it was said, until when it was true, when it expires (`observed_at`,
    /// `valid_until`, `expires_at`).
    observed: String,
    valid_until: Option<String>,
    expires: Option<String>,
    /// The messages it was drawn from, with their words.
    sources: Vec<SourceView>,
}

/// A message a fact was drawn from, as the facts page quotes it beside the fact.
struct SourceView {
    seq: i64,
    /// The message in its conversation's page.
    href: String,
    /// Its words, cut to [`QUOTE_CHARS`]; `None` once the message was cleared.
    quote: Option<String>,
}

/// The most characters of a source message quoted beside a fact: enough to check the
/// fact against; the link shows the rest.
const QUOTE_CHARS: usize = 280;

/// `text` cut to [`QUOTE_CHARS`], with an ellipsis where it was cut.
fn quote(text: &str) -> String {
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

impl FactView {
    /// `words`: the text of the source messages still stored ([`facts::source_words`]).
    fn of(fact: Fact, relevance: Option<f64>, user: &ExternalRef, words: &HashMap<SourceMessage, String>) -> FactView {
        let tags = fact.tags.join(", ");
        let score = fact.score.map(|s| s.to_string()).unwrap_or_default();
        let sources = fact
            .source_messages
            .iter()
            .map(|source| SourceView {
                seq: source.seq,
                href: format!("{}/conversations/{}#m{}", person_path(user), source.conversation_id, source.seq),
                quote: words.get(source).map(|text| quote(text)),
            })
            .collect();
        FactView {
            sources,
            form: FactForm { fact: fact.fact.clone(), tags: tags.clone(), score: score.clone() },
            errors: FieldErrors::default(),
            open: false,
            relevance: relevance.map(|r| format!("{r:.2}")),
            updated: when(&fact.updated_at),
            observed: when(&fact.observed_at),
            valid_until: fact.valid_until.as_ref().map(when),
            expires: fact.expires_at.as_ref().map(when),
            tags,
            score,
            fact,
        }
    }
}

#[derive(Template)]
#[template(path = "admin/facts.html")]
struct FactsPage {
    layout: Layout,
    external_ref: String,
    agent_id: String,
    person_path: String,
    path: String,
    can_write: bool,
    query: String,
    query_error: Option<String>,
    facts: Vec<FactView>,
    next: Option<String>,
    add: FactForm,
    add_errors: FieldErrors,
    forget_error: Option<String>,
}

#[derive(Deserialize)]
pub struct FactsQuery {
    done: Option<String>,
    q: Option<String>,
    cursor: Option<String>,
}

/// What a facts page shows besides the list: a refused form, shown again.
#[derive(Default)]
struct Refused {
    add: Option<(FactForm, FieldErrors)>,
    edit: Option<(Uuid, FactForm, FieldErrors)>,
    forget: Option<String>,
}

async fn facts_page(
    state: &AppState,
    operator: &Operator,
    user: &ExternalRef,
    agent: &AgentId,
    q: FactsQuery,
    refused: Refused,
) -> AdminResult<FactsPage> {
    operator.require(Scope::MemoryRead)?;
    let owner = operator.caller.owner(agent, user);
    let path = facts_path(user, agent);
    let query = q.q.unwrap_or_default();
    let (mut facts, mut next, mut query_error) = (Vec::new(), None, None);
    if query.trim().is_empty() {
        let page = facts::list(state, owner, FactFilter::CURRENT, None, Some(FACTS_PAGE), q.cursor.as_deref()).await?;
        next = page.next_cursor.map(|cursor| format!("{path}?cursor={cursor}"));
        let words = facts::source_words(state, owner.tenant(), &page.items).await?;
        facts = page.items.into_iter().map(|f| FactView::of(f, None, user, &words)).collect();
    } else {
        // The API's search, recall by meaning included: the panel finds what an agent finds
        // among its own facts (the page edits them, so a shared agent's are not here).
        match facts::search(state, owner.into(), &query, Some(FACTS_PAGE), FactFilter::CURRENT).await {
            Ok(found) => {
                let words = facts::source_words(state, owner.tenant(), found.items.iter().map(|hit| &hit.fact)).await?;
                facts = found
                    .items
                    .into_iter()
                    .map(|hit| FactView::of(hit.fact, Some(hit.relevance), user, &words))
                    .collect()
            }
            Err(ServiceError::Invalid(message)) => query_error = Some(message),
            Err(other) => return Err(other.into()),
        }
    }
    if let Some((id, form, errors)) = refused.edit
        && let Some(view) = facts.iter_mut().find(|view| view.fact.id == id)
    {
        view.form = form;
        view.errors = errors;
        view.open = true;
    }
    let (add, add_errors) = refused.add.unwrap_or_default();
    Ok(FactsPage {
        layout: operator.layout(format!("Facts of {}", agent.as_str()), "people", q.done.as_deref()),
        external_ref: user.as_str().to_owned(),
        agent_id: agent.as_str().to_owned(),
        person_path: person_path(user),
        path,
        can_write: operator.can(Scope::MemoryWrite),
        query,
        query_error,
        facts,
        next,
        add,
        add_errors,
        forget_error: refused.forget,
    })
}

pub async fn facts(
    State(state): State<AppState>,
    operator: Operator,
    AdminPath((user, agent)): AdminPath<(ExternalRef, AgentId)>,
    Query(q): Query<FactsQuery>,
) -> AdminResult {
    render(&facts_page(&state, &operator, &user, &agent, q, Refused::default()).await?)
}

/// The facts page again, with the form the service refused (the cap, a duplicate) and
/// its reason under the fact field: the same words the API's 409 carries.
async fn refused_fact(
    state: &AppState,
    operator: &Operator,
    user: &ExternalRef,
    agent: &AgentId,
    form: FactForm,
    message: String,
    refuse: impl FnOnce(FactForm, FieldErrors) -> Refused,
) -> AdminResult {
    let mut errors = FieldErrors::default();
    errors.add("fact", message);
    render(&facts_page(state, operator, user, agent, no_query(), refuse(form, errors)).await?)
}

fn no_query() -> FactsQuery {
    FactsQuery { done: None, q: None, cursor: None }
}

/// A fact form checked field by field with the domain's own rules (the ones behind
/// `POST …/facts` and `PATCH …/facts/{id}`), so that each message sits next to its field.
fn checked(form: &FactForm) -> Result<(String, Vec<String>, Option<f64>), FieldErrors> {
    let mut errors = FieldErrors::default();
    let only = |fact: &str, tags: Option<Vec<String>>, score: Option<f64>| {
        let input = FactInput { fact: fact.to_owned(), tags, score, ..Default::default() };
        input.validate(chrono::Utc::now()).err()
    };
    let tags: Vec<String> = form.tags.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect();
    if let Some(message) = only(&form.fact, None, None) {
        errors.add("fact", message);
    }
    if let Some(message) = only("x", Some(tags.clone()), None) {
        errors.add("tags", message);
    }
    let score = match form.score.trim() {
        "" => None,
        text => match text.parse::<f64>() {
            Ok(score) => {
                if let Some(message) = only("x", None, Some(score)) {
                    errors.add("score", message);
                }
                Some(score)
            }
            Err(_) => {
                errors.add("score", "score must be a number between 0 and 1".into());
                None
            }
        },
    };
    if errors.is_empty() { Ok((form.fact.clone(), tags, score)) } else { Err(errors) }
}

pub async fn add_fact(
    State(state): State<AppState>,
    AdminPath((user, agent)): AdminPath<(ExternalRef, AgentId)>,
    Guarded { operator, form, .. }: Guarded<FactForm, MemoryWrite>,
) -> AdminResult {
    let refuse = |form: FactForm, errors: FieldErrors| Refused { add: Some((form, errors)), ..Refused::default() };
    let (text, tags, score) = match checked(&form) {
        Ok(parts) => parts,
        Err(errors) => {
            let page = facts_page(&state, &operator, &user, &agent, no_query(), refuse(form, errors)).await?;
            return render(&page);
        }
    };
    let input = FactInput { fact: text, tags: Some(tags), score, ..Default::default() };
    let done = match facts::remember(&state, operator.caller.owner(&agent, &user), input, Origin::Manual, Actor::Admin)
        .await
    {
        Ok((true, _)) => "fact-added",
        Ok((false, _)) => "fact-existing",
        Err(ServiceError::Conflict(message)) => {
            return refused_fact(&state, &operator, &user, &agent, form, message, refuse).await;
        }
        Err(other) => return Err(other.into()),
    };
    see_other(&format!("{}?done={done}", facts_path(&user, &agent)))
}

pub async fn edit_fact(
    State(state): State<AppState>,
    AdminPath((user, agent, id)): AdminPath<(ExternalRef, AgentId, Uuid)>,
    Guarded { operator, form, .. }: Guarded<FactForm, MemoryWrite>,
) -> AdminResult {
    let refuse = |form: FactForm, errors: FieldErrors| Refused { edit: Some((id, form, errors)), ..Refused::default() };
    let (text, tags, score) = match checked(&form) {
        Ok(parts) => parts,
        Err(errors) => {
            let page = facts_page(&state, &operator, &user, &agent, no_query(), refuse(form, errors)).await?;
            return render(&page);
        }
    };
    // Every field of the form is sent: an empty score clears it, as `"score": null` does.
    let patch = FactPatch { fact: Some(text), tags: Some(tags), score: Some(score) };
    match facts::update(&state, operator.caller.owner(&agent, &user), id, patch, Actor::Admin).await {
        Ok(_) => see_other(&format!("{}?done=fact-saved", facts_path(&user, &agent))),
        Err(ServiceError::Conflict(message)) => {
            refused_fact(&state, &operator, &user, &agent, form, message, refuse).await
        }
        Err(other) => Err(other.into()),
    }
}

pub async fn delete_fact(
    State(state): State<AppState>,
    AdminPath((user, agent, id)): AdminPath<(ExternalRef, AgentId, Uuid)>,
    Guarded { operator, .. }: Guarded<NoFields, MemoryWrite>,
) -> AdminResult {
    facts::forget(&state, operator.caller.owner(&agent, &user), id, Actor::Admin).await?;
    see_other(&format!("{}?done=fact-deleted", facts_path(&user, &agent)))
}

#[derive(Deserialize)]
pub struct DocumentForm {
    /// The version the page showed: a document rewritten since is not deleted unseen.
    etag: String,
}

/// Deletes an agent's working memory document about the person, as `DELETE
/// …/working-memory` with `If-Match` on the version the operator saw.
pub async fn delete_working_memory(
    State(state): State<AppState>,
    AdminPath((user, agent)): AdminPath<(ExternalRef, AgentId)>,
    Guarded { operator, form, .. }: Guarded<DocumentForm, MemoryWrite>,
) -> AdminResult {
    let scope = DocumentScope::User(operator.caller.owner(&agent, &user));
    working_memory::delete(&state, scope, &Condition::matching(form.etag), Actor::Admin).await?;
    see_other(&format!("{}?done=working-memory-deleted", person_path(&user)))
}

#[derive(Deserialize)]
pub struct ForgetForm {
    confirm: Option<String>,
}

/// Forgets every fact of this agent about the person; the form carries a required
/// checkbox so that one stray click cannot do it.
pub async fn forget_facts(
    State(state): State<AppState>,
    AdminPath((user, agent)): AdminPath<(ExternalRef, AgentId)>,
    Guarded { operator, form, .. }: Guarded<ForgetForm, MemoryWrite>,
) -> AdminResult {
    if form.confirm.as_deref() != Some("yes") {
        let refused = Refused { forget: Some("Tick the box to confirm.".into()), ..Refused::default() };
        let page = facts_page(&state, &operator, &user, &agent, no_query(), refused).await?;
        return render(&page);
    }
    facts::forget_all(&state, operator.caller.owner(&agent, &user), Actor::Admin).await?;
    see_other(&format!("{}?done=facts-forgotten", facts_path(&user, &agent)))
}

/// Everything held about the person, in the shape of `GET /api/rgpd/users/{ref}/ai-data`,
/// as a file to download.
pub async fn export(
    State(state): State<AppState>,
    operator: Operator,
    AdminPath(user): AdminPath<ExternalRef>,
) -> AdminResult {
    operator.require(Scope::Gdpr)?;
    let body = export_body(&state, operator.tenant(), &user).await?;
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
            (header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment; filename=\"engram-export.json\"")),
        ],
        body,
    )
        .into_response())
}

#[derive(Template)]
#[template(path = "admin/erase.html")]
struct ErasePage {
    layout: Layout,
    external_ref: String,
    path: String,
    facts: usize,
    agents: Vec<String>,
    conversations: usize,
    messages: usize,
    working_memories: usize,
    consent_kept: bool,
}

/// The confirmation page: says what will go before anything does.
pub async fn erase_confirm(
    State(state): State<AppState>,
    operator: Operator,
    AdminPath(user): AdminPath<ExternalRef>,
) -> AdminResult {
    operator.require(Scope::Gdpr)?;
    let footprint = erasure::footprint(&state, operator.tenant(), &user).await?;
    let count = |n: i64| usize::try_from(n).unwrap_or(0);
    render(&ErasePage {
        layout: operator.layout(format!("Erase {}", user.as_str()), "people", None),
        path: person_path(&user),
        external_ref: user.as_str().to_owned(),
        facts: count(footprint.facts),
        agents: footprint.agents.into_iter().map(String::from).collect(),
        conversations: count(footprint.conversations),
        messages: count(footprint.messages),
        working_memories: count(footprint.working_memories),
        consent_kept: footprint.consent_refused,
    })
}

/// Erases everything about the person, as `DELETE /api/rgpd/users/{ref}/ai-data` does
/// (same store transaction, same receipt subject hash), then shows the receipt.
pub async fn erase(
    State(state): State<AppState>,
    AdminPath(user): AdminPath<ExternalRef>,
    Guarded { operator, .. }: Guarded<NoFields, Gdpr>,
) -> AdminResult {
    let receipt = erasure::erase(&state, operator.tenant(), &user, Actor::Admin).await?;
    tracing::info!(receipt_id = %receipt.receipt_id, "end user erased from the admin panel");
    see_other(&format!("/admin/receipts/{}?done=erased", receipt.receipt_id))
}

#[derive(Template)]
#[template(path = "admin/receipt.html")]
struct ReceiptPage {
    layout: Layout,
    receipt_id: String,
    subject_hash: String,
    deleted: ErasedCounts,
    completed: String,
    purged: String,
}

pub async fn receipt(
    State(state): State<AppState>,
    operator: Operator,
    AdminPath(id): AdminPath<Uuid>,
    Query(q): Query<Done>,
) -> AdminResult {
    operator.require(Scope::Gdpr)?;
    let receipt = erasure::receipt(&state, operator.tenant(), id).await?;
    render(&ReceiptPage {
        layout: operator.layout("Erasure receipt", "people", q.done.as_deref()),
        receipt_id: receipt.receipt_id.to_string(),
        subject_hash: receipt.subject_hash,
        deleted: receipt.deleted,
        completed: when(&receipt.completed_at),
        purged: receipt.purged_at.as_ref().map_or_else(|| "not yet".to_owned(), when),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(fact: &str, tags: &str, score: &str) -> FactForm {
        FactForm { fact: fact.into(), tags: tags.into(), score: score.into() }
    }

    #[test]
    fn fact_forms_are_checked_field_by_field() {
        let errors = checked(&form("  ", "ok", "2")).unwrap_err();
        assert!(errors.get("fact").is_some());
        assert!(errors.get("tags").is_none());
        assert!(errors.get("score").is_some());
        let errors = checked(&form("Likes tea", "", "abc")).unwrap_err();
        assert_eq!(errors.get("score").map(String::as_str), Some("score must be a number between 0 and 1"));
        let (fact, tags, score) = checked(&form("Likes tea", "drinks, , food", "")).unwrap();
        assert_eq!((fact.as_str(), tags, score), ("Likes tea", vec!["drinks".to_owned(), "food".to_owned()], None));
    }
}
