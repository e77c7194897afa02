//! Recall with a query: full-text search fused with vector similarity (the hybrid ranking
//! of [`crate::domain::vector`]) when the query can be embedded, full text alone otherwise.
//!
//! This is the one seam between the routes and the ranking: facts search and the memory
//! context with a query call [`search`] and [`for_context`], which take the full-text candidates
//! from the store as they are and add the vector candidates. Without vectors (embeddings
//! off, the model not ready, the embedder failing, no fact embedded yet) the answer is
//! exactly the store's full-text answer.

use std::{collections::HashMap, time::Duration};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::AppState;
use crate::{
    domain::{fact::Fact, owner::OwnerSet, search_query::SearchQuery, vector},
    service::error::ServiceError,
    store::facts::{FactFilter, Hit},
};

/// Longest a query waits for its own embedding; past it the query is answered by full
/// text alone, so a slow or failing embedding server never makes recall fail or hang.
const QUERY_EMBEDDING_LIMIT: Duration = Duration::from_secs(2);

/// The query's vector, when the embedder can make one in time.
async fn query_vector(state: &AppState, query: &SearchQuery) -> Option<Vec<f32>> {
    let (_, mut vectors) = embed_within(state, &[query.text().to_owned()], QUERY_EMBEDDING_LIMIT).await?;
    vectors.pop()
}

/// The vectors of `texts` (one each) and their model's tag, when the embedder is ready
/// and makes them within `limit`; `None` otherwise, and the caller goes on without.
pub async fn embed_within(state: &AppState, texts: &[String], limit: Duration) -> Option<(String, Vec<Vec<f32>>)> {
    let model = state.embedder.ready_model()?;
    match tokio::time::timeout(limit, state.embedder.embed(texts)).await {
        Ok(Ok(vectors)) if vectors.len() == texts.len() => Some((model, vectors)),
        Ok(Ok(_)) => {
            tracing::debug!("the embedder answered with another number of vectors: going on without");
            None
        }
        Ok(Err(error)) => {
            tracing::debug!(%error, "not embedded: going on without vectors");
            None
        }
        Err(_) => {
            tracing::debug!("the embedding took too long: going on without vectors");
            None
        }
    }
}

/// Facts search: the full-text hits fused with the facts nearest in meaning, among the
/// facts of `owners` (one owner's, or with shared memory those of the agents it reads).
///
/// The full-text search, the query's embedding and the read of the candidate vectors
/// need nothing from each other, so they run at once: the answer takes as long as the
/// slowest of them (the embedding, milliseconds of CPU), not their sum. Only the
/// nearest facts that full text did not find are read afterwards, by id.
pub async fn search(
    state: &AppState,
    owners: OwnerSet<'_>,
    query: &SearchQuery,
    filter: FactFilter<'_>,
    limit: i64,
) -> Result<Vec<Hit>, ServiceError> {
    let Some(model) = state.embedder.ready_model() else {
        return Ok(state.store.search_facts(owners, query, filter, limit).await?);
    };
    let (hits, query_vector, vectors) = tokio::join!(
        state.store.search_facts(owners, query, filter, limit),
        query_vector(state, query),
        super::vectors::of_facts(state, owners, &model, filter),
    );
    let hits = hits?;
    let Some(query_vector) = query_vector else {
        return Ok(hits);
    };
    let size = usize::try_from(limit).unwrap_or(usize::MAX);
    let vectors: Vec<(Uuid, Vec<f32>)> = vectors?.into_iter().map(|v| (v.id, v.values)).collect();
    let nearest = vector::nearest(&query_vector, &vectors, size);
    if nearest.is_empty() {
        return Ok(hits);
    }
    let text: Vec<_> = hits.iter().map(|hit| (hit.fact.id, hit.rarity)).collect();
    // Each fact with its full-text rarity (0 for a fact found by meaning alone).
    let mut found: HashMap<Uuid, (Fact, f64)> =
        hits.into_iter().map(|hit| (hit.fact.id, (hit.fact, hit.rarity))).collect();
    let missing: Vec<Uuid> = nearest.iter().map(|(id, _)| *id).filter(|id| !found.contains_key(id)).collect();
    found.extend(state.store.facts_by_id(owners, &missing).await?.into_iter().map(|fact| (fact.id, (fact, 0.0))));
    Ok(vector::fuse(&text, &nearest)
        .into_iter()
        .take(size)
        .filter_map(|(id, relevance)| {
            let (fact, rarity) = found.remove(&id)?;
            Some(Hit { fact, relevance, rarity })
        })
        .collect())
}

/// The memory context's candidates: with a query that can be embedded, the `limit`
/// best fused matches, then the `limit` newest; otherwise the store's own candidates.
/// Current at `as_of`, or now.
pub async fn for_context(
    state: &AppState,
    owners: OwnerSet<'_>,
    query: Option<&SearchQuery>,
    as_of: Option<DateTime<Utc>>,
    limit: i64,
) -> Result<Vec<Fact>, ServiceError> {
    let Some(query) = query else {
        return by_full_text(state, owners, None, as_of, limit).await;
    };
    if state.embedder.ready_model().is_none() {
        return by_full_text(state, owners, Some(query), as_of, limit).await;
    }
    let filter = FactFilter { as_of, ..FactFilter::CURRENT };
    // The newest facts do not depend on the matches: both are read at once.
    let (hits, newest) = tokio::try_join!(search(state, owners, query, filter, limit), async {
        Ok(state.store.list_facts(owners, filter, None, None, limit).await?)
    },)?;
    Ok(hits.into_iter().map(|hit| hit.fact).chain(newest).collect())
}

/// The store's own context candidates, ranked by full text alone: without `query` the
/// `limit` newest; with it the `limit` best matches, then the `limit` newest. The memory
/// context without vectors, and what an extractor is shown of the user's facts.
pub async fn by_full_text<'o>(
    state: &AppState,
    owners: impl Into<OwnerSet<'o>>,
    query: Option<&SearchQuery>,
    as_of: Option<DateTime<Utc>>,
    limit: i64,
) -> Result<Vec<Fact>, ServiceError> {
    Ok(state.store.context_facts(owners, query, as_of, limit).await?)
}
