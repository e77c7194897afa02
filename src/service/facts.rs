//! Facts: remember, update, forget, forget all, list and search (recall by meaning). The
//! REST routes, the memory tools (MCP and `/api/tools`) and the admin panel all come
//! here, so a rule — validation, the per-user cap, duplicates, which facts a search
//! finds — answers alike at every door.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::AppState;
use crate::{
    domain::{
        event::Actor,
        fact::{Fact, FactInput, FactPatch, Origin, SourceMessage, storable, validate_tag},
        ids::TenantId,
        json_writer::WriteJson,
        owner::{Owner, OwnerSet},
        page::{Page, decode_cursor, limit},
        search_query::SearchQuery,
    },
    embed::Embedder,
    service::error::ServiceError,
    store::facts::{FactFilter, Remembered, UpdateError},
};

/// A search hit: the fact and its relevance.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScoredFact {
    #[serde(flatten)]
    pub fact: Fact,
    /// How well the fact answers the query, in [0, 1]; higher is more relevant. Without
    /// embeddings (or when no fact is close in meaning): the share of the query's words
    /// (after stemming, stop words ignored) the fact contains. With them: 0.6 × the rarity
    /// of the query words the fact contains (the sum over them of 1 / the number of the
    /// user's matching facts holding the word) relative to the best full-text hit's, plus
    /// 0.4 × the cosine similarity of the fact's and the query's vectors above 0.25,
    /// relative to the most similar fact's (similarities under 0.25 count as 0).
    pub relevance: f64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SearchResults {
    /// Most relevant first; equally relevant facts newest first.
    pub items: Vec<ScoredFact>,
}

impl WriteJson for SearchResults {
    fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(b"{\"items\":[");
        for (i, hit) in self.items.iter().enumerate() {
            out.extend_from_slice(if i > 0 { b",{" } else { b"{" });
            hit.fact.write_json_members(out)?;
            out.extend_from_slice(b",\"relevance\":");
            serde_json::to_writer(&mut *out, &hit.relevance)?;
            out.push(b'}');
        }
        out.extend_from_slice(b"]}");
        Ok(())
    }

    fn size_hint(&self) -> usize {
        self.items.iter().map(|hit| hit.fact.size_hint() + 32).sum::<usize>() + 16
    }
}

/// Checks the filter: the optional `tag` with the same rule as a fact's tags, `as_of` in
/// the years a time is stored in ([`storable`]), and that
/// `include_superseded` is not asked with `as_of` (which reads the facts current at a
/// time, superseded since or not: the two would contradict each other).
fn checked(filter: FactFilter<'_>) -> Result<FactFilter<'_>, ServiceError> {
    if filter.as_of.is_some() && filter.superseded {
        return Err(ServiceError::invalid(
            "as_of reads the facts current at that time, superseded since or not: it does not combine with include_superseded",
        ));
    }
    filter.tag.map(validate_tag).transpose().map_err(ServiceError::Invalid)?;
    filter.as_of.map(|t| storable("as_of", t)).transpose().map_err(ServiceError::Invalid)?;
    Ok(filter)
}

/// The text of each of `facts`' source messages still stored, by message: one read per
/// conversation they name. A message missing from it was cleared (by retention, or
/// deleted with its conversation); the fact keeps the reference.
pub async fn source_words<'a>(
    state: &AppState,
    tenant: &TenantId,
    facts: impl IntoIterator<Item = &'a Fact>,
) -> Result<HashMap<SourceMessage, String>, ServiceError> {
    let mut wanted: BTreeMap<Uuid, Vec<i64>> = BTreeMap::new();
    for source in facts.into_iter().flat_map(|fact| &fact.source_messages) {
        let seqs = wanted.entry(source.conversation_id).or_default();
        if !seqs.contains(&source.seq) {
            seqs.push(source.seq);
        }
    }
    let mut words = HashMap::new();
    for (conversation_id, seqs) in wanted {
        for message in state.store.messages_at(tenant, conversation_id, &seqs).await? {
            words.insert(SourceMessage { conversation_id, seq: message.seq }, message.text());
        }
    }
    Ok(words)
}

/// One page of the owner's facts, newest first (`limit` 1–200, default 50); with
/// `source_conversation`, those drawn (at least in part) from that conversation.
pub async fn list(
    state: &AppState,
    owner: Owner<'_>,
    filter: FactFilter<'_>,
    source_conversation: Option<Uuid>,
    limit: Option<i64>,
    cursor: Option<&str>,
) -> Result<Page<Fact>, ServiceError> {
    let limit = self::limit(limit, 50, 200)?;
    let before: Option<Uuid> = decode_cursor(cursor)?;
    let filter = checked(filter)?;
    let rows = state.store.list_facts(owner, filter, source_conversation, before, limit + 1).await?;
    Ok(Page::from_rows(rows, limit, |f| f.id))
}

/// Stores a fact unless the same one is there (then `false` and the stored one). A
/// `conflict` when the owner already holds `ENGRAM_MAX_FACTS_PER_USER` facts.
pub async fn remember(
    state: &AppState,
    owner: Owner<'_>,
    input: FactInput,
    origin: Origin,
    actor: Actor,
) -> Result<(bool, Fact), ServiceError> {
    let fact = input.validate(crate::store::now()).map_err(ServiceError::Invalid)?;
    let cap = state.config.max_facts_per_user;
    match state.store.remember_fact(owner, &fact, origin, cap, actor).await? {
        Remembered::Created(fact) => {
            embed_now(state, &fact).await;
            super::facts_changed(state);
            Ok((true, fact))
        }
        Remembered::Existing(fact) => Ok((false, fact)),
        Remembered::Full => {
            Err(ServiceError::Conflict(format!("this user already has the maximum of {cap} facts for this agent")))
        }
    }
}

/// Embeds a fact just written, before the write is answered, when the local model is
/// loaded and no other write is embedding: a search by meaning that follows the answer
/// finds it (read your writes). A remote embedder (a network call must not slow writes),
/// a busy moment and any failure here are left to the worker, moments later.
async fn embed_now(state: &AppState, fact: &Fact) {
    let (Embedder::Local(_), Some(model)) = (&*state.embedder, state.embedder.ready_model()) else { return };
    let Ok(_turn) = state.inline_embedding.try_acquire() else { return };
    let Ok(vectors) = state.embedder.embed(std::slice::from_ref(&fact.fact)).await else { return };
    let Some(values) = vectors.first() else { return };
    if let Err(error) = super::vectors::store(state, &model, &[(fact.id, fact.fact.as_str(), &values[..])]).await {
        tracing::warn!(error = error.for_log(), "a fact's vector was not stored on write; the embedding worker will");
    }
}

/// The search an agent makes (the REST search): its own facts, and while its memory is on
/// for the user, those of the agents it reads (`reads_facts_of`, see
/// [`crate::domain::policy::Policy::shared_agents`]). Its policy is read first (one round
/// trip), as the memory context and the tools read it.
pub async fn search_as_agent(
    state: &AppState,
    owner: Owner<'_>,
    q: &str,
    limit: Option<i64>,
    filter: FactFilter<'_>,
) -> Result<SearchResults, ServiceError> {
    let policy = state.store.policy(owner).await?;
    let shared = policy.shared_agents(state.config.default_ai_consent);
    search(state, OwnerSet::new(owner, shared), q, limit, filter).await
}

/// The facts of `owners` most relevant to `q` (`limit` 1–200, default 10): full text
/// fused with meaning when embeddings are on (see [`super::recall`]).
pub async fn search(
    state: &AppState,
    owners: OwnerSet<'_>,
    q: &str,
    limit: Option<i64>,
    filter: FactFilter<'_>,
) -> Result<SearchResults, ServiceError> {
    let query = SearchQuery::parse(q).map_err(ServiceError::Invalid)?;
    let limit = self::limit(limit, 10, 200)?;
    let filter = checked(filter)?;
    let hits = super::recall::search(state, owners, &query, filter, limit).await?;
    state.recall_counts.note(hits.iter().map(|hit| hit.fact.id));
    let items = hits.into_iter().map(|hit| ScoredFact { fact: hit.fact, relevance: hit.relevance }).collect();
    Ok(SearchResults { items })
}

/// Changes one fact's text, tags or score. A `conflict` when the new text is the same
/// fact as another stored one.
pub async fn update(
    state: &AppState,
    owner: Owner<'_>,
    id: Uuid,
    patch: FactPatch,
    actor: Actor,
) -> Result<Fact, ServiceError> {
    let changes = patch.validate().map_err(ServiceError::Invalid)?;
    match state.store.update_fact(owner, id, &changes, actor).await? {
        Ok(fact) => {
            embed_now(state, &fact).await;
            super::facts_changed(state);
            Ok(fact)
        }
        Err(UpdateError::NotFound) => Err(ServiceError::NotFound("fact")),
        Err(UpdateError::Duplicate) => {
            Err(ServiceError::Conflict("another stored fact of this user is the same fact".into()))
        }
    }
}

/// Deletes one fact.
pub async fn forget(state: &AppState, owner: Owner<'_>, id: Uuid, actor: Actor) -> Result<(), ServiceError> {
    if state.store.delete_fact(owner, id, actor).await? { Ok(()) } else { Err(ServiceError::NotFound("fact")) }
}

/// Deletes every fact the agent holds about the user; how many there were.
pub async fn forget_all(state: &AppState, owner: Owner<'_>, actor: Actor) -> Result<u64, ServiceError> {
    Ok(state.store.delete_facts(owner, actor).await?)
}

#[cfg(test)]
mod tests {
    use proptest::{collection::vec, prelude::*};

    use super::*;
    use crate::domain::{json_writer, strategies::fact};

    proptest! {
        #[test]
        fn search_results_are_written_as_serde_json_writes_them(
            hits in vec((fact(), prop_oneof![0.0..=1.0, Just(1.0), any::<f64>()]), 0..4),
        ) {
            let results = SearchResults {
                items: hits.into_iter().map(|(fact, relevance)| ScoredFact { fact, relevance }).collect(),
            };
            let written = json_writer::to_vec(&results).expect("writes");
            prop_assert_eq!(String::from_utf8(written).expect("UTF-8"), serde_json::to_string(&results).expect("serialises"));
        }
    }
}
