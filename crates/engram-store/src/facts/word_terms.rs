//! The upkeep of the facts' terms in the word index (see [`crate::word_index`]): the
//! backfill of facts stored without them, tagging them again under a new key, and
//! SQLite's merge of its full-text index.

use uuid::Uuid;

use crate::{
    Result, Store,
    domain::{
        ids::{AgentId, ExternalRef, TenantId},
        owner::Owner,
    },
    with_pool, with_tx, with_writer, word_index,
};

/// Pages of SQLite's full-text index one [`Store::merge_search_index`] step may write: a
/// bound on how long it holds the write lock (about 1 MB).
const SEARCH_INDEX_MERGE_PAGES: i64 = 256;

/// Facts without the word index's terms (stored before migration 0019 on SQLite, 0020 on
/// PostgreSQL), a batch, found through `facts_without_terms`, which holds only them.
const WITHOUT_TERMS: &str =
    "SELECT id, tenant_id, agent_id, external_ref, fact FROM facts WHERE search_terms IS NULL LIMIT 1000";

/// Gives fact `$1` its terms `$2` (SQLite's update trigger indexes them), unless it has
/// some by now: a write of its text since it was read gave it the terms of that text.
const SET_TERMS: &str = "UPDATE facts SET search_terms = $2 WHERE id = $1 AND search_terms IS NULL";

impl Store {
    /// Writes the word index's terms of every fact stored before the index existed, a
    /// thousand facts a transaction, so that search finds them again. Once every fact has
    /// its terms (an empty text when every word is a stop word), it reads one empty batch.
    pub(crate) async fn index_facts_without_terms(&self) -> Result<()> {
        loop {
            let rows: Vec<(Uuid, String, String, String, String)> =
                with_pool!(self, pool => sqlx::query_as(WITHOUT_TERMS).fetch_all(pool).await?);
            if rows.is_empty() {
                return Ok(());
            }
            let mut tx = self.begin_write().await?;
            for (id, tenant, agent, user, fact) in rows {
                let stored = |e: String| sqlx::Error::Decode(e.into());
                let tenant = TenantId::parse(tenant).map_err(stored)?;
                let (agent, user) = (AgentId::parse(agent).map_err(stored)?, ExternalRef::parse(user).map_err(stored)?);
                let terms = word_index::fact_terms(&self.word_key, Owner::new(&tenant, &agent, &user), &fact);
                with_tx!(tx, tx => sqlx::query(SET_TERMS).bind(id).bind(terms).execute(&mut **tx).await.map(drop)?);
            }
            tx.commit().await?;
        }
    }

    /// The fingerprint of the key the word index was tagged under; `None` before the
    /// first start of a server that keys it.
    async fn word_index_fingerprint(&self) -> Result<Option<String>> {
        let sql = "SELECT fingerprint FROM word_index_key WHERE id = 1";
        Ok(with_pool!(self, pool => sqlx::query_scalar(sql).fetch_optional(pool).await?))
    }

    /// The server, at start: tags the word index again when its terms were written under
    /// another key than this store's, or under none (before 0021). In one transaction
    /// every fact's terms are cleared and the key's fingerprint stored, and
    /// [`Store::index_facts_without_terms`] then writes them again; a start cut short
    /// goes on where the last one stopped.
    pub async fn key_word_index(&self) -> Result<()> {
        let fingerprint = self.word_key.fingerprint();
        let stored = self.word_index_fingerprint().await?;
        if stored.as_deref() == Some(fingerprint.as_str()) {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        let cleared = with_tx!(tx, tx => {
            sqlx::query("UPDATE facts SET search_terms = NULL WHERE search_terms IS NOT NULL")
                .execute(&mut **tx)
                .await?
                .rows_affected()
        });
        with_tx!(tx, tx => {
            sqlx::query(
                "INSERT INTO word_index_key (id, fingerprint) VALUES (1, $1) \
                 ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint",
            )
            .bind(&fingerprint)
            .execute(&mut **tx)
            .await
            .map(drop)?
        });
        tx.commit().await?;
        if stored.is_some() {
            tracing::warn!(
                facts = cleared,
                "the word index was tagged under another ENGRAM_RECEIPT_KEY: tagging every fact again \
                 (every replica must share the key)"
            );
        } else if cleared > 0 {
            tracing::info!(facts = cleared, "tagging the word index under the server's key");
        }
        self.index_facts_without_terms().await
    }

    /// The command line (import, export, migrate): refuses a key other than the one the
    /// server tagged the index under, whose facts it would tag so that search misses them.
    pub async fn check_word_key(&self) -> anyhow::Result<()> {
        let stored = self.word_index_fingerprint().await?;
        anyhow::ensure!(
            stored.is_none_or(|stored| stored == self.word_key.fingerprint()),
            "ENGRAM_RECEIPT_KEY is not the key the server uses (the word index is tagged under another): \
             set the server's ENGRAM_RECEIPT_KEY, or its data directory"
        );
        Ok(())
    }

    /// SQLite: merges the full-text index a bounded step towards a single segment (FTS5's
    /// `merge` with a negative page count, which merges across levels). Every write
    /// transaction adds a segment, which FTS5 merges only four at a time on its own, so an
    /// index often holds a dozen or more, and a search looks each query word up in each
    /// one: the 20-word search's lookups took 1.9 ms on the 19 segments a bulk load left,
    /// 1.1 ms on one. Once merged, a step finds nothing to do and writes nothing.
    /// PostgreSQL's GIN index has no segments: nothing to do there.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "merge_search_index", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn merge_search_index(&self) -> Result<()> {
        let Some(sql) = self.dialect(None, Some("INSERT INTO facts_fts (facts_fts, rank) VALUES ('merge', $1)")) else {
            return Ok(());
        };
        with_writer!(self, conn => sqlx::query(sql).bind(-SEARCH_INDEX_MERGE_PAGES).execute(conn).await.map(drop))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        domain::{fact::Origin, search_query::SearchQuery},
        facts::FactFilter,
    };

    /// The start's backfill of word-index terms (`Store::migrate`; the API test
    /// `facts_stored_before_the_word_index_are_found_after_the_upgrade` runs it on a
    /// database of the build before, on both backends): it finds the facts without terms
    /// through their own index, never a scan of the table, and never replaces terms a
    /// write of the fact's text gave it since it was read.
    #[tokio::test]
    async fn the_terms_backfill_reads_an_index_and_replaces_no_written_terms() {
        let path = std::env::temp_dir().join(format!("engram-terms-{}.db", Uuid::now_v7().simple()));
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let store = Store::connect(&url, 2, std::time::Duration::from_secs(5)).await.expect("SQLite");
        store.migrate().await.expect("the start's migrations");
        let crate::Backend::Sqlite(pool) = &store.backend else { panic!("{url} opened SQLite") };
        let plan: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {WITHOUT_TERMS}")))
                .fetch_all(pool)
                .await
                .expect("the plan");
        assert!(plan.iter().any(|step| step.3.contains("USING INDEX facts_without_terms")), "{plan:?}");

        let (tenant, agent) = (TenantId::parse("t".into()).unwrap(), AgentId::parse("a".into()).unwrap());
        let user = ExternalRef::parse("caroline".into()).unwrap();
        let owner = Owner::new(&tenant, &agent, &user);
        let fact = crate::domain::fact::FactInput { fact: "Caroline drinks green tea".into(), ..Default::default() }
            .validate(crate::now())
            .unwrap();
        store.import_facts(owner, &[fact], Origin::Manual).await.unwrap();
        let id: Uuid = sqlx::query_scalar("SELECT id FROM facts").fetch_one(pool).await.unwrap();
        let set = sqlx::query(SET_TERMS).bind(id).bind("stale").execute(pool).await.unwrap();
        assert_eq!(set.rows_affected(), 0, "terms already written are not replaced");
        let query = SearchQuery::parse("tea").unwrap();
        assert_eq!(store.search_facts(owner, &query, FactFilter::CURRENT, 10).await.unwrap().len(), 1);
        store.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
