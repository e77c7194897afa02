//! NDJSON import and export: a batch of checked records written in one transaction with
//! their client ids (`import_ids`, the idempotency check), the `imports` rows that report
//! an import's progress, and the snapshot reader an export pages through.

use std::collections::{HashMap, HashSet, hash_map::Entry};

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use super::{
    Result, Store, Tx,
    facts::{FactRow, Remembered, fact_columns},
    jobs::NewJob,
    messages::{MessageRow, message_columns},
    policy::{POLICY_SQL, PolicyRow},
    with_pool, with_tx, with_writer,
};
use crate::domain::{
    conversation::{ExtractionInputs, extraction_decision},
    event::{EventData, EventType},
    fact::{Fact, Origin},
    ids::{AgentId, ConversationKey, ExternalRef, TenantId},
    import::{
        ConsentRecord, ConversationRecord, FactRecord, ImportJob, ImportOptions, ImportRecord, LineError, LineReport,
        MessageRecord, Progress, RecordKind, ValidConversation, ValidFact, ValidRecord,
    },
    job::JobKind,
    message::{Message, is_user_turn},
    owner::Owner,
    policy::Policy,
};

/// What became of one record of a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Written; `queued` when it is a conversation queued for extraction.
    Added { queued: bool },
    /// Its client id was imported before: nothing written.
    Duplicate,
    /// Refused by what the database holds (an unknown conversation, a key in use).
    Failed(LineError),
}

/// Rows per `INSERT` (messages: 11 binds each), far under either database's limit.
const MESSAGE_ROWS: usize = 500;

/// Serialises the imports of one tenant on PostgreSQL, batch by batch, so that two
/// imports of one file cannot both find a client id new (SQLite serialises every writer).
const IMPORT_LOCK_PG: &str = "SELECT pg_advisory_xact_lock(hashtextextended('import/' || $1, 0))";

/// Every column of an `imports` row ([`ImportRow`]).
macro_rules! import_columns {
    () => {
        "id, status, lines_read, added, duplicates, failed, queued_for_extraction, errors, created_at, updated_at, finished_at"
    };
}

impl Store {
    /// Writes a batch in one transaction, each record with its client id, and returns
    /// what became of each. Client ids imported before (or earlier in the batch) are
    /// duplicates; a record the database refuses is skipped, the rest written. With
    /// `options.extract`, conversations go to extraction as described at
    /// [`Tx::import_conversation`].
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "import_batch", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn import_batch(
        &self,
        tenant: &TenantId,
        records: &[ValidRecord],
        options: ImportOptions,
    ) -> Result<Vec<Outcome>> {
        let now = super::now();
        let mut tx = self.begin_change(options.actor).await?;
        if let Some(lock) = tx.dialect(Some(IMPORT_LOCK_PG), None) {
            with_tx!(tx, tx => sqlx::query(lock).bind(tenant.as_str()).execute(&mut **tx).await.map(drop))?;
        }
        let mut seen = tx.known_client_ids(tenant, records).await?;
        // The owners whose writers this transaction has locked (see `Tx::insert_fact`).
        let mut locked: HashSet<(&AgentId, &ExternalRef)> = HashSet::new();
        let mut outcomes = Vec::with_capacity(records.len());
        // (kind, client id, record id, person) of each record written.
        let mut written: Vec<(RecordKind, &str, Option<Uuid>, &ExternalRef)> = Vec::with_capacity(records.len());
        for record in records {
            if !seen.insert((record.kind(), record.client_id().to_owned())) {
                outcomes.push(Outcome::Duplicate);
                continue;
            }
            let (id, queued) = match record {
                ValidRecord::Conversation(c) => match tx.import_conversation(tenant, c, options, now).await? {
                    Ok((id, queued)) => (Ok(Some(id)), queued),
                    Err(error) => (Err(error), false),
                },
                ValidRecord::Fact(f) => (tx.import_fact(tenant, f, &written, &mut locked).await?, false),
                ValidRecord::Consent(c) => {
                    tx.write_consent(tenant, &c.external_ref, c.ai_consent, c.updated_at).await?;
                    (Ok(None), false)
                }
            };
            match id {
                Ok(id) => {
                    written.push((record.kind(), record.client_id(), id, record.external_ref()));
                    outcomes.push(Outcome::Added { queued });
                }
                Err(error) => outcomes.push(Outcome::Failed(error)),
            }
        }
        for chunk in written.chunks(MESSAGE_ROWS) {
            with_tx!(tx, tx => {
                let mut insert = sqlx::QueryBuilder::new(
                    "INSERT INTO import_ids (tenant_id, kind, client_id, record_id, external_ref, created_at) ",
                );
                insert.push_values(chunk, |mut values, (kind, client_id, id, user)| {
                    values
                        .push_bind(tenant.as_str())
                        .push_bind(kind.as_str())
                        .push_bind(*client_id)
                        .push_bind(*id)
                        .push_bind(user.as_str())
                        .push_bind(now);
                });
                insert.build().execute(&mut **tx).await?;
            });
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    /// Starts the progress row of an import.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "create_import", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn create_import(&self, tenant: &TenantId) -> Result<ImportJob> {
        let now = super::now();
        let id = Uuid::now_v7();
        with_writer!(self, conn => {
            sqlx::query(
                "INSERT INTO imports (id, tenant_id, status, errors, created_at, updated_at) \
                 VALUES ($1, $2, 'running', $3, $4, $4)",
            )
            .bind(id)
            .bind(tenant.as_str())
            .bind(Json(Vec::<()>::new()))
            .bind(now)
            .execute(conn)
            .await?;
        });
        Ok(ImportJob {
            id,
            status: "running".into(),
            progress: Progress::default(),
            created_at: now,
            updated_at: now,
            finished_at: None,
        })
    }

    /// Saves an import's progress with its unsaved bad-line reports, in one transaction;
    /// `status` other than `running` finishes it.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "update_import", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn update_import(&self, tenant: &TenantId, id: Uuid, status: &str, progress: &Progress) -> Result<()> {
        let now = super::now();
        let finished = (status != "running").then_some(now);
        let mut tx = self.begin_write().await?;
        for chunk in progress.unsaved.chunks(MESSAGE_ROWS) {
            with_tx!(tx, tx => {
                let mut insert =
                    sqlx::QueryBuilder::new("INSERT INTO import_errors (import_id, tenant_id, line, code, message) ");
                insert.push_values(chunk, |mut values, report| {
                    values
                        .push_bind(id)
                        .push_bind(tenant.as_str())
                        .push_bind(i64::try_from(report.line).unwrap_or(i64::MAX))
                        .push_bind(report.error.code.as_str())
                        .push_bind(report.error.message.as_str());
                });
                insert.build().execute(&mut **tx).await?;
            });
        }
        with_tx!(tx, tx => {
            sqlx::query(
                "UPDATE imports SET status = $3, lines_read = $4, added = $5, duplicates = $6, failed = $7, \
                 errors = $8, updated_at = $9, finished_at = $10, queued_for_extraction = $11 \
                 WHERE id = $1 AND tenant_id = $2",
            )
            .bind(id)
            .bind(tenant.as_str())
            .bind(status)
            .bind(progress.lines_read)
            .bind(progress.added)
            .bind(progress.duplicates)
            .bind(progress.failed)
            .bind(Json(&progress.errors))
            .bind(now)
            .bind(finished)
            .bind(progress.queued_for_extraction)
            .execute(&mut **tx)
            .await?;
        });
        tx.commit().await?;
        Ok(())
    }

    /// Marks a running import alive (its `updated_at`), while its process lives.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "touch_import", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn touch_import(&self, tenant: &TenantId, id: Uuid) -> Result<()> {
        let now = super::now();
        with_writer!(self, conn => {
            sqlx::query("UPDATE imports SET updated_at = $3 WHERE id = $1 AND tenant_id = $2 AND status = 'running'")
                .bind(id)
                .bind(tenant.as_str())
                .bind(now)
                .execute(conn)
                .await?;
        });
        Ok(())
    }

    /// Every tenant's imports still `running` but silent since `before` (their process
    /// died): marked `interrupted`. Returns how many.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "interrupt_stale_imports", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn interrupt_stale_imports(&self, before: DateTime<Utc>) -> Result<u64> {
        let now = super::now();
        let done = with_writer!(self, conn => {
            sqlx::query(
                "UPDATE imports SET status = 'interrupted', updated_at = $2, finished_at = $2 \
                 WHERE status = 'running' AND updated_at < $1",
            )
            .bind(before)
            .bind(now)
            .execute(conn)
            .await?
            .rows_affected()
        });
        Ok(done)
    }

    /// An import's bad-line reports after line `after`, by line (the primary key).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "import_errors", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn import_errors(
        &self,
        tenant: &TenantId,
        id: Uuid,
        after: Option<u64>,
        limit: i64,
    ) -> Result<Vec<LineReport>> {
        let after = after.map_or(0, |line| i64::try_from(line).unwrap_or(i64::MAX));
        let rows: Vec<(i64, String, String)> = with_pool!(self, pool => {
            sqlx::query_as(
                "SELECT line, code, message FROM import_errors WHERE import_id = $1 AND tenant_id = $2 AND line > $3 \
                 ORDER BY line LIMIT $4",
            )
            .bind(id)
            .bind(tenant.as_str())
            .bind(after)
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        super::counted(&rows);
        Ok(rows
            .into_iter()
            .map(|(line, code, message)| LineReport {
                line: u64::try_from(line).unwrap_or_default(),
                error: LineError { code, message },
            })
            .collect())
    }

    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "get_import", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn get_import(&self, tenant: &TenantId, id: Uuid) -> Result<Option<ImportJob>> {
        let row: Option<ImportRow> = with_pool!(self, pool => {
            sqlx::query_as(concat!("SELECT ", import_columns!(), " FROM imports WHERE id = $1 AND tenant_id = $2"))
            .bind(id)
            .bind(tenant.as_str())
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(ImportJob::from))
    }

    /// The tenant's `limit` newest imports, newest first (`imports_tenant_id`).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "list_imports", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn list_imports(&self, tenant: &TenantId, limit: i64) -> Result<Vec<ImportJob>> {
        let rows: Vec<ImportRow> = with_pool!(self, pool => {
            sqlx::query_as(concat!("SELECT ", import_columns!(), " FROM imports WHERE tenant_id = $1 ORDER BY id DESC LIMIT $2"))
                .bind(tenant.as_str())
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        super::counted(&rows);
        Ok(rows.into_iter().map(ImportJob::from).collect())
    }

    /// Opens a reader of every record of the tenant in the import format, in one
    /// snapshot, page by page.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "record_reader", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn record_reader(&self, tenant: &TenantId) -> Result<RecordReader> {
        Ok(RecordReader { tx: self.begin_snapshot().await?, tenant: tenant.clone() })
    }
}

#[derive(sqlx::FromRow)]
struct ImportRow {
    id: Uuid,
    status: String,
    lines_read: i64,
    added: i64,
    duplicates: i64,
    failed: i64,
    queued_for_extraction: i64,
    errors: Json<Vec<crate::domain::import::LineReport>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
}

impl From<ImportRow> for ImportJob {
    fn from(row: ImportRow) -> ImportJob {
        ImportJob {
            id: row.id,
            status: row.status,
            progress: Progress {
                lines_read: row.lines_read,
                added: row.added,
                duplicates: row.duplicates,
                failed: row.failed,
                queued_for_extraction: row.queued_for_extraction,
                errors: row.errors.0,
                unsaved: Vec::new(),
            },
            created_at: row.created_at,
            updated_at: row.updated_at,
            finished_at: row.finished_at,
        }
    }
}

impl Tx {
    /// The client ids of `records` imported before (one statement per kind present).
    async fn known_client_ids(
        &mut self,
        tenant: &TenantId,
        records: &[ValidRecord],
    ) -> Result<HashSet<(RecordKind, String)>> {
        let mut known = HashSet::new();
        for kind in [RecordKind::Conversation, RecordKind::Fact, RecordKind::Consent] {
            let ids: Vec<&str> = records.iter().filter(|r| r.kind() == kind).map(ValidRecord::client_id).collect();
            if ids.is_empty() {
                continue;
            }
            let found: Vec<String> = with_tx!(self, tx => {
                let mut select = sqlx::QueryBuilder::new("SELECT client_id FROM import_ids WHERE tenant_id = ");
                select.push_bind(tenant.as_str()).push(" AND kind = ").push_bind(kind.as_str()).push(" AND client_id IN (");
                let mut list = select.separated(", ");
                for id in &ids {
                    list.push_bind(*id);
                }
                select.push(")");
                // Planned afresh with each batch's ids (PostgreSQL's unnamed statement), not
                // once: a plan cached while `import_ids` was empty scans the whole table
                // for every batch, which made a large import quadratic.
                select.build_query_scalar().persistent(false).fetch_all(&mut **tx).await?
            });
            known.extend(found.into_iter().map(|id| (kind, id)));
        }
        Ok(known)
    }

    /// Writes a conversation and its messages as they were, and returns its id and
    /// whether it was queued for extraction; `key_taken` when the agent already has a
    /// conversation with its key.
    ///
    /// Without `options.extract`, imported history counts as extracted: only messages
    /// appended after the import are new to the live extraction rules. With it, none of
    /// it does: an ended conversation is queued for extraction in this transaction when
    /// it meets the rules a live end checks (the agent's memory switch and minimum user
    /// turns, the conversation's `memory`, the person's consent as this batch leaves
    /// it), and an open one is extracted whole when it ends.
    async fn import_conversation(
        &mut self,
        tenant: &TenantId,
        c: &ValidConversation,
        options: ImportOptions,
        now: DateTime<Utc>,
    ) -> Result<std::result::Result<(Uuid, bool), LineError>> {
        let id = Uuid::now_v7();
        let count = i64::try_from(c.messages.len()).unwrap_or(i64::MAX);
        let user_turns: Vec<i64> =
            (1..).zip(&c.messages).filter(|(_, (m, _))| is_user_turn(m.role, &m.content)).map(|(seq, _)| seq).collect();
        let status = if c.ended_at.is_some() { "ended" } else { "open" };
        let extracted_through = if options.extract { 0 } else { count };
        let queue = options.extract && c.ended_at.is_some() && {
            let policy: PolicyRow = with_tx!(self, tx => {
                sqlx::query_as(POLICY_SQL)
                    .bind(tenant.as_str())
                    .bind(c.new.agent_id.as_str())
                    .bind(c.new.external_ref.as_str())
                    .fetch_one(&mut **tx)
                    .await?
            });
            let policy = Policy::from(policy);
            let settings = policy.settings();
            extraction_decision(&ExtractionInputs {
                memory_enabled: settings.memory_enabled,
                conversation_memory: c.new.memory.unwrap_or(true),
                min_user_turns: settings.min_user_turns.into(),
                consent: policy.consent(options.default_consent),
                user_turns: i64::try_from(user_turns.len()).unwrap_or(i64::MAX),
                last_user_seq: user_turns.last().copied().unwrap_or(0),
                extracted_through_seq: 0,
                queued_through_seq: 0,
            })
            .is_ok()
        };
        let queued_through = if queue { count } else { extracted_through };
        let inserted: Option<Uuid> = with_tx!(self, tx => {
            sqlx::query_scalar(
                "INSERT INTO conversations (id, tenant_id, agent_id, external_ref, key, title, metadata, memory, status, \
                 message_count, user_turns, last_seq, last_user_seq, extracted_through_seq, queued_through_seq, \
                 created_at, updated_at, ended_at, segment_user_turns) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $10, $12, $16, $17, $13, $14, $15, $11) \
                 ON CONFLICT (tenant_id, agent_id, key) WHERE key IS NOT NULL DO NOTHING RETURNING id",
            )
            .bind(id)
            .bind(tenant.as_str())
            .bind(c.new.agent_id.as_str())
            .bind(c.new.external_ref.as_str())
            .bind(c.new.key.as_ref().map(ConversationKey::as_str))
            .bind(c.new.title.as_deref())
            .bind(Json(c.new.metadata_or_empty()))
            .bind(c.new.memory.unwrap_or(true))
            .bind(status)
            .bind(count)
            .bind(i64::try_from(user_turns.len()).unwrap_or(i64::MAX))
            .bind(user_turns.last().copied().unwrap_or(0))
            .bind(c.created_at)
            .bind(c.updated_at)
            .bind(c.ended_at)
            .bind(extracted_through)
            .bind(queued_through)
            .fetch_optional(&mut **tx)
            .await?
        });
        if inserted.is_none() {
            return Ok(Err(LineError::new("key_taken", "the agent has another conversation with this key")));
        }
        let rows: Vec<(i64, &(crate::domain::message::NewMessage, DateTime<Utc>))> = (1..).zip(&c.messages).collect();
        for chunk in rows.chunks(MESSAGE_ROWS) {
            with_tx!(self, tx => {
                let mut insert = sqlx::QueryBuilder::new(concat!(
                    "INSERT INTO messages (",
                    message_columns!(),
                    ", tenant_id) "
                ));
                insert.push_values(chunk, |mut values, (seq, (m, at))| {
                    values
                        .push_bind(Uuid::now_v7())
                        .push_bind(id)
                        .push_bind(*seq)
                        .push_bind(m.role.as_str())
                        .push_bind(Json(&m.content))
                        .push_bind(m.name.as_deref())
                        .push_bind(m.tool_calls.as_ref().map(Json))
                        .push_bind(m.tool_call_id.as_deref())
                        .push_bind(m.metadata.as_ref().map(Json))
                        .push_bind(*at)
                        .push_bind(tenant.as_str());
                });
                insert.build().execute(&mut **tx).await?;
            });
        }
        self.record_person(
            tenant,
            Some(c.new.agent_id.as_str()),
            &c.new.external_ref,
            EventType::ConversationCreated,
            EventData { conversation_id: Some(id), ..EventData::default() },
        );
        if queue {
            let job = NewJob {
                kind: JobKind::ExtractFacts,
                tenant,
                agent_id: c.new.agent_id.as_str(),
                external_ref: c.new.external_ref.as_str(),
                conversation_id: id,
                from_seq: 0,
                through_seq: count,
            };
            // A new conversation has no job yet: this one is always queued.
            self.queue_job(&job, now).await?;
        }
        Ok(Ok((id, queue)))
    }

    /// Writes a fact with its original times by the live duplicate and slot rules; an
    /// extracted fact's conversation is found by its client id (`unknown_conversation`
    /// when it was never imported). `written`: the records this batch wrote so far.
    async fn import_fact<'a>(
        &mut self,
        tenant: &TenantId,
        f: &'a ValidFact,
        written: &[(RecordKind, &str, Option<Uuid>, &ExternalRef)],
        locked: &mut HashSet<(&'a AgentId, &'a ExternalRef)>,
    ) -> Result<std::result::Result<Option<Uuid>, LineError>> {
        let conversation = match &f.conversation {
            None => None,
            Some(client_id) => {
                let in_batch = written
                    .iter()
                    .find(|(kind, id, _, _)| *kind == RecordKind::Conversation && id == client_id)
                    .and_then(|(_, _, id, _)| *id);
                let found = match in_batch {
                    Some(id) => Some(id),
                    None => with_tx!(self, tx => {
                        sqlx::query_scalar(
                            "SELECT record_id FROM import_ids WHERE tenant_id = $1 AND kind = 'conversation' \
                             AND client_id = $2",
                        )
                        .bind(tenant.as_str())
                        .bind(client_id)
                        .fetch_optional(&mut **tx)
                        .await?
                    })
                    .flatten(),
                };
                match found {
                    Some(id) => Some(id),
                    None => {
                        return Ok(Err(LineError::new(
                            "unknown_conversation",
                            "conversation_id names no imported conversation",
                        )));
                    }
                }
            }
        };
        let origin = match (f.source, conversation) {
            (crate::domain::fact::Source::Manual, _) => Origin::Manual,
            (crate::domain::fact::Source::Agent, _) => Origin::Agent,
            (crate::domain::fact::Source::Extracted, Some(conversation_id)) => Origin::Extracted { conversation_id },
            (crate::domain::fact::Source::BuiltinFallback, Some(conversation_id)) => {
                Origin::Fallback { conversation_id }
            }
            // Validation requires the conversation of these sources.
            (_, None) => Origin::Manual,
        };
        let owner = Owner::new(tenant, &f.agent_id, &f.external_ref);
        if locked.insert((&f.agent_id, &f.external_ref)) {
            self.lock_owner(owner).await?;
        }
        let remembered = self.insert_fact_locked(owner, &f.fact, origin, None, Some(f.created_at)).await?;
        Ok(match remembered {
            Remembered::Created(fact) | Remembered::Existing(fact) => Ok(Some(fact.id)),
            // No cap was given.
            Remembered::Full => Err(LineError::new("full", "the owner holds too many facts")),
        })
    }
}

/// Every record of one tenant, read in one snapshot, a page at a time, in the import
/// format: consents, conversations (each with its messages), then facts, so that an
/// import of the file finds each fact's conversation before the fact.
///
/// Each page is read from the rows after the last one by an index range, and the client
/// ids its records were imported under are read for the page at once, by key
/// ([`client_ids_sql`]): the whole export reads each row once, linear in the records.
pub struct RecordReader {
    tx: Tx,
    tenant: TenantId,
}

/// A page of consents. Binds: tenant, after ('' for the first page), limit. Reads the
/// primary key's range.
const CONSENT_PAGE: &str = "SELECT external_ref, ai_consent, updated_at FROM user_consents \
     WHERE tenant_id = $1 AND external_ref > $2 ORDER BY external_ref LIMIT $3";

/// A page of conversations. Binds: tenant, after id (nil for the first page), limit.
/// Reads `conversations_tenant_id`'s range.
const CONVERSATION_PAGE: &str = "SELECT id, agent_id, external_ref, key, title, metadata, memory, created_at, \
     updated_at, ended_at FROM conversations WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3";

/// A page of a conversation's messages. Binds: conversation, tenant, after seq, limit.
/// Reads messages' `(conversation_id, seq)` range.
const MESSAGE_PAGE: &str = concat!(
    "SELECT ",
    message_columns!(),
    " FROM messages WHERE conversation_id = $1 AND tenant_id = $2 AND seq > $3 ORDER BY seq LIMIT $4"
);

/// A page of facts, expired ones left out. Binds: tenant, after id (nil for the first
/// page), limit, now. Reads `facts_tenant_id`'s range.
const FACT_PAGE: &str = concat!(
    "SELECT ",
    fact_columns!(),
    " FROM facts WHERE tenant_id = $1 AND id > $2 AND (expires_at IS NULL OR expires_at > $4) ORDER BY id LIMIT $3"
);

/// The client ids of a page's records, `keys` of them: binds tenant, kind, then the
/// keys (`key` is `record_id`, read through `import_ids_record`, or `external_ref`,
/// through `import_ids_person`). One query per page, planned with its keys (PostgreSQL's
/// unnamed statement), rather than a subquery per row, which SQLite planned on the
/// primary key: a scan of every client id of the kind for each row exported.
fn client_ids_sql(key: &str, keys: usize) -> String {
    let list: Vec<String> = (3..3 + keys).map(|n| format!("${n}")).collect();
    format!(
        "SELECT {key}, client_id FROM import_ids WHERE tenant_id = $1 AND kind = $2 AND {key} IN ({})",
        list.join(", ")
    )
}

#[derive(sqlx::FromRow)]
struct ConversationExportRow {
    id: Uuid,
    agent_id: String,
    external_ref: String,
    key: Option<String>,
    title: Option<String>,
    metadata: Json<serde_json::Value>,
    memory: bool,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    ended_at: Option<DateTime<Utc>>,
}

fn decode(e: String) -> sqlx::Error {
    sqlx::Error::Decode(e.into())
}

impl RecordReader {
    /// The client ids records of `kind` were imported under, by `key` (`record_id` or
    /// `external_ref`), for `keys`: the least of them where a record has several (a
    /// fact said twice).
    async fn client_ids<K>(&mut self, kind: RecordKind, key: &'static str, keys: &[K]) -> Result<HashMap<K, String>>
    where
        K: Clone + Eq + std::hash::Hash + Send + Sync + Unpin + 'static,
        K: for<'q> sqlx::Encode<'q, sqlx::Postgres>
            + for<'r> sqlx::Decode<'r, sqlx::Postgres>
            + sqlx::Type<sqlx::Postgres>,
        K: for<'q> sqlx::Encode<'q, sqlx::Sqlite> + for<'r> sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
    {
        let mut ids: HashMap<K, String> = HashMap::new();
        if keys.is_empty() {
            return Ok(ids);
        }
        let sql = client_ids_sql(key, keys.len());
        let found: Vec<(K, String)> = with_tx!(self.tx, tx => {
            let mut select = sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str())).bind(self.tenant.as_str()).bind(kind.as_str());
            for k in keys {
                select = select.bind(k.clone());
            }
            select.persistent(false).fetch_all(&mut **tx).await?
        });
        for (k, client_id) in found {
            match ids.entry(k) {
                Entry::Occupied(mut least) if client_id < *least.get() => *least.get_mut() = client_id,
                Entry::Occupied(_) => {}
                Entry::Vacant(slot) => {
                    slot.insert(client_id);
                }
            }
        }
        Ok(ids)
    }

    /// Consents after external ref `after`, by external ref.
    pub async fn consents(&mut self, after: Option<&str>, limit: i64) -> Result<Vec<ImportRecord>> {
        let sql = CONSENT_PAGE;
        let rows: Vec<(String, bool, DateTime<Utc>)> = with_tx!(self.tx, tx => {
            sqlx::query_as(sql).bind(self.tenant.as_str()).bind(after.unwrap_or("")).bind(limit).fetch_all(&mut **tx).await?
        });
        super::counted(&rows);
        let people: Vec<String> = rows.iter().map(|(external_ref, _, _)| external_ref.clone()).collect();
        let mut client_ids = self.client_ids(RecordKind::Consent, "external_ref", &people).await?;
        rows.into_iter()
            .map(|(external_ref, ai_consent, updated_at)| {
                Ok(ImportRecord::Consent(ConsentRecord {
                    id: client_ids.remove(&external_ref).unwrap_or_else(|| format!("consent:{external_ref}")),
                    tenant: None,
                    external_ref: ExternalRef::parse(external_ref).map_err(decode)?,
                    ai_consent,
                    updated_at: Some(updated_at),
                }))
            })
            .collect()
    }

    /// Conversations after id `after`, in the order they were stored (ids are
    /// time-ordered), without their messages (see [`RecordReader::messages`]); each with
    /// its id.
    pub async fn conversations(&mut self, after: Option<Uuid>, limit: i64) -> Result<Vec<(Uuid, ConversationRecord)>> {
        let sql = CONVERSATION_PAGE;
        let rows: Vec<ConversationExportRow> = with_tx!(self.tx, tx => {
            sqlx::query_as(sql).bind(self.tenant.as_str()).bind(after.unwrap_or(Uuid::nil())).bind(limit).fetch_all(&mut **tx).await?
        });
        super::counted(&rows);
        let ids: Vec<Uuid> = rows.iter().map(|row| row.id).collect();
        let mut client_ids = self.client_ids(RecordKind::Conversation, "record_id", &ids).await?;
        rows.into_iter()
            .map(|row| {
                let record = ConversationRecord {
                    id: client_ids.remove(&row.id).unwrap_or_else(|| row.id.to_string()),
                    tenant: None,
                    agent_id: AgentId::parse(row.agent_id).map_err(decode)?,
                    external_ref: ExternalRef::parse(row.external_ref).map_err(decode)?,
                    key: row.key.map(ConversationKey::parse).transpose().map_err(decode)?,
                    title: row.title,
                    metadata: Some(row.metadata.0),
                    memory: row.memory,
                    created_at: row.created_at,
                    updated_at: Some(row.updated_at),
                    ended_at: row.ended_at,
                    messages: Vec::new(),
                };
                Ok((row.id, record))
            })
            .collect()
    }

    /// A conversation's messages after `after_seq`, oldest first, with their seq.
    pub async fn messages(
        &mut self,
        conversation_id: Uuid,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<(i64, MessageRecord)>> {
        let sql = MESSAGE_PAGE;
        let rows: Vec<MessageRow> = with_tx!(self.tx, tx => {
            sqlx::query_as(sql).bind(conversation_id).bind(self.tenant.as_str()).bind(after_seq).bind(limit).fetch_all(&mut **tx).await?
        });
        super::counted(&rows);
        rows.into_iter()
            .map(|row| {
                let message = Message::try_from(row)?;
                Ok((
                    message.seq,
                    MessageRecord {
                        role: message.role,
                        content: message.content,
                        name: message.name,
                        tool_calls: message.tool_calls,
                        tool_call_id: message.tool_call_id,
                        metadata: message.metadata,
                        created_at: message.created_at,
                    },
                ))
            })
            .collect()
    }

    /// Facts after id `after`, oldest first (ids are time-ordered), expired ones left out.
    pub async fn facts(&mut self, after: Option<Uuid>, limit: i64) -> Result<Vec<(Uuid, FactRecord)>> {
        let sql = FACT_PAGE;
        let rows: Vec<FactRow> = with_tx!(self.tx, tx => {
            sqlx::query_as(sql).bind(self.tenant.as_str()).bind(after.unwrap_or(Uuid::nil())).bind(limit).bind(super::now()).fetch_all(&mut **tx).await?
        });
        super::counted(&rows);
        let rows = rows.into_iter().map(Fact::try_from).collect::<Result<Vec<Fact>>>()?;
        let ids: Vec<Uuid> = rows.iter().map(|row| row.id).collect();
        let mut client_ids = self.client_ids(RecordKind::Fact, "record_id", &ids).await?;
        let mut conversations: Vec<Uuid> = rows.iter().filter_map(|row| row.conversation_id).collect();
        conversations.sort_unstable();
        conversations.dedup();
        let conversation_ids = self.client_ids(RecordKind::Conversation, "record_id", &conversations).await?;
        rows.into_iter()
            .map(|row| {
                let record = FactRecord {
                    id: client_ids.remove(&row.id).unwrap_or_else(|| row.id.to_string()),
                    tenant: None,
                    agent_id: row.agent_id,
                    external_ref: row.external_ref,
                    fact: row.fact,
                    tags: row.tags,
                    score: row.score,
                    source: row.source,
                    conversation_id: row
                        .conversation_id
                        .map(|id| conversation_ids.get(&id).cloned().unwrap_or_else(|| id.to_string())),
                    created_at: Some(row.created_at),
                    observed_at: Some(row.observed_at),
                    expires_at: row.expires_at,
                    ttl_seconds: None,
                };
                Ok((row.id, record))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every statement of an export reads one range of an index in its order: no scan of
    /// a table, no sort of the tenant's rows (SQLite keeps no statistics, so this is the
    /// plan a server has, whatever the data).
    #[tokio::test]
    async fn each_page_of_an_export_reads_an_index_range() {
        let pages = [
            (CONSENT_PAGE, "sqlite_autoindex_user_consents_1 (tenant_id=? AND external_ref>?)"),
            (CONVERSATION_PAGE, "conversations_tenant_id (tenant_id=? AND id>?)"),
            (MESSAGE_PAGE, "(conversation_id=? AND seq>?)"),
            (FACT_PAGE, "facts_tenant_id (tenant_id=? AND id>?)"),
            (&client_ids_sql("record_id", 3), "import_ids_record (tenant_id=? AND kind=? AND record_id=?)"),
            (&client_ids_sql("external_ref", 3), "import_ids_person (tenant_id=? AND external_ref=? AND kind=?)"),
        ];
        for (sql, range) in pages {
            let plan = super::super::tests::sqlite_plan(sql).await;
            assert!(plan.iter().any(|step| step.starts_with("SEARCH") && step.ends_with(range)), "{sql}: {plan:?}");
            assert!(
                !plan.iter().any(|step| step.starts_with("SCAN") || step.contains("TEMP B-TREE")),
                "{sql}: {plan:?}"
            );
        }
    }
}
