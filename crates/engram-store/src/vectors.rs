//! Vectors of facts (`fact_vectors`, migration 0005): the embedding worker's reads and
//! writes, and the one read of a user's current vectors, with their facts' ids and texts,
//! that recall (to compare with a query) and extraction (to find near-duplicates) share.
//!
//! A vector is *current* while its model is the configured one and its `fact_updated_at`
//! equals the fact's `updated_at` (copied from the fact row by the same statement that
//! stores the vector, so both backends compare like with like). Deleting a fact deletes
//! its vector (`ON DELETE CASCADE`), so erasure, forget-all, eviction and delete need no
//! statement here.

use std::sync::LazyLock;

use uuid::Uuid;

use super::{
    Result, Store, Tx,
    facts::{self, BindFilter, BindOwners, FactFilter},
    with_pool, with_tx,
};
use crate::domain::{owner::OwnerSet, vector};

/// A fact whose vector is missing or stale.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Pending {
    pub id: Uuid,
    /// The text to embed; personal data, never logged.
    pub fact: String,
}

/// $1 model, $2 after (fact id), $3 limit
const PENDING: &str = "SELECT f.id, f.fact FROM facts f LEFT JOIN fact_vectors v ON v.fact_id = f.id \
     WHERE (v.fact_id IS NULL OR v.model <> $1 OR v.fact_updated_at <> f.updated_at) AND f.id > $2 \
     ORDER BY f.id LIMIT $3";

/// $1 fact id, $2 model, $3 dims, $4 vector, $5 the text the vector was made from. Stores
/// nothing when the fact is gone or its text changed meanwhile (the vector would be of
/// another text): that fences a slow embedding against a concurrent edit, and two
/// replicas embedding the same fact write the same row.
const STORE: &str = "INSERT INTO fact_vectors (fact_id, model, dims, vector, fact_updated_at) \
     SELECT id, $2, $3, $4, updated_at FROM facts WHERE id = $1 AND fact = $5 \
     ON CONFLICT (fact_id) DO UPDATE SET model = excluded.model, dims = excluded.dims, \
     vector = excluded.vector, fact_updated_at = excluded.fact_updated_at";

/// A fact's current vector, with the fact's id and text (and nothing else of the fact: a
/// reader keeps few of them, and reads those it keeps by id).
#[derive(Debug)]
pub struct FactVector {
    pub id: Uuid,
    /// Personal data, never logged.
    pub fact: String,
    pub values: Vec<f32>,
}

#[derive(sqlx::FromRow)]
struct VectorRow {
    id: Uuid,
    fact: String,
    dims: i32,
    vector: Vec<u8>,
}

/// The owner's current vectors whose facts the filter takes. $1 tenant, $2 agent, $3 user,
/// $4 model, $5–$8 the filter (`{filter}`, see [`facts::with_filter_test`]).
const OWNER_VECTORS: &str = "SELECT facts.id, facts.fact, v.dims, v.vector FROM facts JOIN fact_vectors v ON v.fact_id = facts.id \
     WHERE facts.tenant_id = $1 AND facts.agent_id = $2 AND facts.external_ref = $3 \
     AND v.model = $4 AND v.fact_updated_at = facts.updated_at AND {filter}";

/// [`OWNER_VECTORS`] for PostgreSQL and SQLite, built once.
static OWNER_VECTORS_SQL: LazyLock<(String, String)> = LazyLock::new(|| facts::with_filter_test(OWNER_VECTORS, false));

/// [`OWNER_VECTORS`] of an owner set (shared memory).
static SHARED_VECTORS_SQL: LazyLock<(String, String)> = LazyLock::new(|| facts::with_filter_test(OWNER_VECTORS, true));

impl Store {
    /// Up to `limit` facts, of any owner, in id order after `after`, whose vector of
    /// `model` is missing or stale. Walking by id lets the worker go past facts that fail
    /// to embed instead of retrying them first forever.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "facts_without_vectors", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn facts_without_vectors(&self, model: &str, after: Uuid, limit: i64) -> Result<Vec<Pending>> {
        Ok(with_pool!(self, pool => {
            sqlx::query_as(PENDING).bind(model).bind(after).bind(limit).fetch_all(pool).await?
        }))
    }

    /// Stores the vectors `model` made of facts' texts, each `(fact id, text, values)`, in
    /// one transaction (one commit for a whole batch of the backfill). Returns how many
    /// were stored (see [`STORE`]).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "store_vectors", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn store_vectors(&self, model: &str, vectors: &[(Uuid, &str, &[f32])]) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        let mut stored = 0;
        for (id, text, values) in vectors {
            if tx.store_vector(*id, text, model, values).await? {
                stored += 1;
            }
        }
        tx.commit().await?;
        Ok(stored)
    }

    /// The owners' current vectors of `model` whose facts `filter` takes: what recall
    /// compares with a query, and extraction with new facts. At most
    /// `ENGRAM_MAX_FACTS_PER_USER` rows (1 000 vectors are 1.5 MB), and of each fact only
    /// its id and text.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "fact_vectors", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn fact_vectors<'o>(
        &self,
        owners: impl Into<OwnerSet<'o>>,
        model: &str,
        filter: FactFilter<'_>,
    ) -> Result<Vec<FactVector>> {
        let owners = owners.into();
        let both = if owners.shared().is_empty() { &*OWNER_VECTORS_SQL } else { &*SHARED_VECTORS_SQL };
        let sql = self.dialect(&both.0, &both.1).as_str();
        let rows: Vec<VectorRow> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind_owners(owners)
                .bind(model)
                .bind_filter(filter)
                .fetch_all(pool)
                .await?
        });
        super::counted(&rows);
        rows.into_iter()
            .map(|row| Ok(FactVector { values: values(&row.vector, row.dims)?, id: row.id, fact: row.fact }))
            .collect()
    }
}

/// A stored vector's values; an error when they do not match its dimensions.
fn values(bytes: &[u8], dims: i32) -> Result<Vec<f32>> {
    vector::from_bytes(bytes, usize::try_from(dims).unwrap_or(0))
        .ok_or_else(|| sqlx::Error::Decode("a stored vector does not match its dimensions".into()))
}

impl Tx {
    /// Stores the vector `model` made of `text`, the text of fact `id` (see [`STORE`]).
    /// Returns whether it was stored.
    pub async fn store_vector(&mut self, id: Uuid, text: &str, model: &str, values: &[f32]) -> Result<bool> {
        let dims = i32::try_from(values.len()).map_err(|_| sqlx::Error::Protocol("vector too long".into()))?;
        let stored = with_tx!(self, tx => {
            sqlx::query(STORE)
                .bind(id)
                .bind(model)
                .bind(dims)
                .bind(vector::to_bytes(values))
                .bind(text)
                .execute(&mut **tx)
                .await?
                .rows_affected()
        });
        Ok(stored > 0)
    }
}
