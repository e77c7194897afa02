//! NDJSON import of a tenant's records (`POST /api/import`, `engram import`; the other
//! way is [`super::export`]): it reads its input a chunk at a time and writes it a batch
//! per transaction, so that its memory is bounded by the line cap and the batch whatever
//! the size of the input.
//!
//! Each record writes its own event, as the live route would (`fact.added`,
//! `conversation.created`, `consent.changed`), in its batch's transaction: a webhook
//! subscriber sees imported memory like any other.

use std::{future::poll_fn, pin::Pin, time::Duration};

use axum::body::Bytes;
use futures_core::Stream;

use super::AppState;
use crate::{
    config::ImportConfig,
    domain::{
        ids::TenantId,
        import::{ImportJob, ImportOptions, LineError, LineReport, ValidRecord, parse_line},
        nul,
    },
    service::error::ServiceError,
    store::{Store, import::Outcome},
};

/// Bytes of lines held in one batch at most, whatever the number of records: with the
/// line cap, what bounds an import's memory.
const BATCH_BYTES: usize = 8 * 1024 * 1024;

/// Why an import stopped before the end of its input.
#[derive(Debug, thiserror::Error)]
pub enum ImportStop {
    /// The input failed (a broken upload, an unreadable file) or went silent too long.
    #[error("reading the input: {0}")]
    Input(String),
    #[error(transparent)]
    Service(#[from] ServiceError),
}

/// Imports `input`, NDJSON, into `tenant`: every good line written once, every bad line
/// reported (line number, code) and skipped. Starts the import's progress row first and
/// saves its counts after each batch (what `GET /api/import/{id}` shows), calling
/// `progress` too. A read waits at most `idle` for the next chunk. On a stop, the
/// batches committed before it stay and the row says `failed`: a re-run completes it.
/// `options.extract` queues the imported conversations that meet the extraction rules
/// (see `Store::import_batch`). It takes the store, not the `AppState`, as `engram
/// import` runs it with no server.
pub async fn import<S, E>(
    store: &Store,
    tenant: &TenantId,
    input: S,
    limits: ImportConfig,
    idle: Duration,
    options: ImportOptions,
    mut progress: impl FnMut(&ImportJob),
) -> Result<ImportJob, ImportStop>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    // An input without a byte is a client's mistake (a request sent without its body),
    // refused before an import is recorded.
    let mut lines = Lines::new(input, limits.import_max_line_bytes, idle);
    if lines.is_empty().await? {
        return Err(ImportStop::Input("the input is empty: send one record a line (NDJSON)".into()));
    }
    let mut job = store.create_import(tenant).await.map_err(ServiceError::from)?;
    let id = job.id;
    // Both polled together: a beat waiting for SQLite's writer while the batch holds it
    // does not stop the batch.
    let outcome = tokio::select! {
        outcome = run(store, tenant, lines, limits, options, &mut job, &mut progress) => outcome,
        never = heartbeat(store, tenant, id, limits.stale() / 4) => match never {},
    };
    job.status = if outcome.is_ok() { "succeeded" } else { "failed" }.into();
    // The final counts are saved even after a stop: they say how far it got.
    let saved = store.update_import(tenant, job.id, &job.status, &job.progress).await;
    job.progress.unsaved.clear();
    outcome?;
    saved.map_err(ServiceError::from)?;
    // As saved, with its finishing time.
    let job = store.get_import(tenant, job.id).await.map_err(ServiceError::from)?.unwrap_or(job);
    progress(&job);
    Ok(job)
}

async fn run<S, E>(
    store: &Store,
    tenant: &TenantId,
    mut lines: Lines<S>,
    limits: ImportConfig,
    options: ImportOptions,
    job: &mut ImportJob,
    progress: &mut impl FnMut(&ImportJob),
) -> Result<(), ImportStop>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut batch: Vec<(u64, ValidRecord)> = Vec::new();
    let mut batch_bytes = 0;
    let mut number = 0u64;
    while let Some(line) = lines.next().await? {
        number += 1;
        job.progress.lines_read += 1;
        let record = match line {
            Line::Text(text) if text.trim_ascii().is_empty() => continue,
            Line::Text(text) => match std::str::from_utf8(text) {
                Err(_) => Err(LineError::new("invalid_utf8", "the line is not UTF-8")),
                Ok(_) if nul::in_json(text) => {
                    Err(LineError::new("nul_byte", "the line holds a NUL character (U+0000), raw or escaped"))
                }
                Ok(text) => {
                    batch_bytes += text.len();
                    parse_line(text, tenant, crate::store::now())
                }
            },
            Line::TooLong => Err(LineError::new(
                "line_too_long",
                format!("the line is over {} bytes (ENGRAM_IMPORT_MAX_LINE_BYTES)", limits.import_max_line_bytes),
            )),
        };
        match record {
            Ok(record) => batch.push((number, record)),
            Err(error) => job.progress.fail(number, error),
        }
        let full = batch.len() >= limits.import_batch || batch_bytes >= BATCH_BYTES;
        if full || job.progress.unsaved.len() >= limits.import_batch {
            write_batch(store, tenant, &mut batch, options, job).await?;
            batch_bytes = 0;
            progress(job);
        }
    }
    write_batch(store, tenant, &mut batch, options, job).await?;
    Ok(())
}

/// Says the import is alive every `every`, until dropped (see [`interrupt_stale`]).
async fn heartbeat(store: &Store, tenant: &TenantId, id: uuid::Uuid, every: Duration) -> std::convert::Infallible {
    let mut beat = tokio::time::interval(every);
    loop {
        beat.tick().await;
        // A missed beat is made up by the next: it would take several to look stale.
        let _ = store.touch_import(tenant, id).await;
    }
}

/// Writes and empties `batch`, counts its outcomes, and saves the progress with the bad
/// lines' reports (so that the memory they take stays within a batch's).
async fn write_batch(
    store: &Store,
    tenant: &TenantId,
    batch: &mut Vec<(u64, ValidRecord)>,
    options: ImportOptions,
    job: &mut ImportJob,
) -> Result<(), ServiceError> {
    if batch.is_empty() && job.progress.unsaved.is_empty() {
        return Ok(());
    }
    let (numbers, records): (Vec<u64>, Vec<ValidRecord>) = std::mem::take(batch).into_iter().unzip();
    if !records.is_empty() {
        let outcomes = store.import_batch(tenant, &records, options).await?;
        for (number, outcome) in numbers.into_iter().zip(outcomes) {
            match outcome {
                Outcome::Added { queued } => {
                    job.progress.added += 1;
                    job.progress.queued_for_extraction += i64::from(queued);
                }
                Outcome::Duplicate => job.progress.duplicates += 1,
                Outcome::Failed(error) => job.progress.fail(number, error),
            }
        }
    }
    store.update_import(tenant, job.id, "running", &job.progress).await?;
    job.progress.unsaved.clear();
    Ok(())
}

/// [`import`] as `POST /api/import` runs it: into the state's store, with the configured
/// limits, and the request timeout as the longest silence of the upload.
pub async fn upload<S, E>(
    state: &AppState,
    tenant: &TenantId,
    input: S,
    options: ImportOptions,
) -> Result<ImportJob, ImportStop>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    import(&state.store, tenant, input, state.config.import, state.config.request_timeout(), options, |_| {}).await
}

/// Marks `interrupted` every import whose process died while it ran: still `running`,
/// and silent for longer than `limits.stale()` (a live one says it is alive four times
/// as often). Called at each start of the server and of `engram import` (no `AppState`
/// there: it takes the store).
pub async fn interrupt_stale(store: &Store, limits: ImportConfig) -> Result<u64, ServiceError> {
    let stale = chrono::TimeDelta::from_std(limits.stale()).unwrap_or(chrono::TimeDelta::MAX);
    Ok(store.interrupt_stale_imports(crate::store::now() - stale).await?)
}

/// One line of the input, without its `\n` (and `\r`).
enum Line<'a> {
    Text(&'a [u8]),
    /// Over the cap: its bytes were skipped, not kept.
    TooLong,
}

/// Splits a stream of chunks into lines, holding at most the line cap (plus one chunk).
struct Lines<S> {
    input: S,
    chunk: Bytes,
    line: Vec<u8>,
    too_long: bool,
    cap: usize,
    idle: Duration,
    done: bool,
}

impl<S, E> Lines<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    fn new(input: S, cap: usize, idle: Duration) -> Self {
        Lines { input, chunk: Bytes::new(), line: Vec::new(), too_long: false, cap, idle, done: false }
    }

    /// The next line, `None` at the end of the input.
    async fn next(&mut self) -> Result<Option<Line<'_>>, ImportStop> {
        self.line.clear();
        self.too_long = false;
        loop {
            if self.chunk.is_empty() {
                if self.done {
                    return Ok(None);
                }
                if !self.fill().await? {
                    // The last line may have no newline.
                    if self.line.is_empty() && !self.too_long {
                        return Ok(None);
                    }
                    return Ok(Some(self.current()));
                }
                continue;
            }
            let end = self.chunk.iter().position(|&b| b == b'\n');
            let take = end.unwrap_or(self.chunk.len());
            let part = self.chunk.split_to(take);
            if !self.too_long {
                if self.line.len() + part.len() > self.cap {
                    self.too_long = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(&part);
                }
            }
            if end.is_some() {
                let _newline = self.chunk.split_to(1);
                return Ok(Some(self.current()));
            }
        }
    }

    /// Reads the next chunk of the input; `false` at its end.
    async fn fill(&mut self) -> Result<bool, ImportStop> {
        let next = tokio::time::timeout(self.idle, poll_fn(|cx| Pin::new(&mut self.input).poll_next(cx)))
            .await
            .map_err(|_| ImportStop::Input(format!("no data for {} s", self.idle.as_secs())))?;
        match next {
            Some(Ok(chunk)) => {
                self.chunk = chunk;
                Ok(true)
            }
            Some(Err(e)) => Err(ImportStop::Input(e.to_string())),
            None => {
                self.done = true;
                Ok(false)
            }
        }
    }

    /// Whether the input holds nothing at all: waits for its first bytes, which stay
    /// for [`Lines::next`].
    async fn is_empty(&mut self) -> Result<bool, ImportStop> {
        while self.chunk.is_empty() && !self.done {
            self.fill().await?;
        }
        Ok(self.chunk.is_empty())
    }

    fn current(&self) -> Line<'_> {
        if self.too_long { Line::TooLong } else { Line::Text(self.line.strip_suffix(b"\r").unwrap_or(&self.line)) }
    }
}

/// The tenant's most recent imports, newest first, at most `limit`.
pub async fn list(state: &AppState, tenant: &TenantId, limit: i64) -> Result<Vec<ImportJob>, ServiceError> {
    Ok(state.store.list_imports(tenant, limit).await?)
}

/// One of the tenant's imports; `not_found` for another tenant's.
pub async fn get(state: &AppState, tenant: &TenantId, id: uuid::Uuid) -> Result<ImportJob, ServiceError> {
    state.store.get_import(tenant, id).await?.ok_or(ServiceError::NotFound("import"))
}

/// One page of an import's bad-line reports after line `after`; `not_found` for an
/// import the tenant does not have.
pub async fn errors(
    state: &AppState,
    tenant: &TenantId,
    id: uuid::Uuid,
    after: Option<u64>,
    limit: i64,
) -> Result<Vec<LineReport>, ServiceError> {
    get(state, tenant, id).await?;
    Ok(state.store.import_errors(tenant, id, after, limit).await?)
}
