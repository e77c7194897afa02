//! The GDPR export (Art. 15 and 20) as a stream: one snapshot of everything held about
//! a person, written to the response a page at a time, so an export of any size costs
//! the server bounded memory. The body is the `Export` document of the API (consent,
//! conversations each with its summary, working memory and messages, facts, the person's
//! working memory documents, every version of their facts, their events and those events'
//! webhook deliveries, and the client ids their records were imported under), built from
//! the same types.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use axum::body::{Body, Bytes};
use serde::Serialize;
use tokio::sync::mpsc;

use super::AppState;
use crate::{
    domain::{
        ids::{ExternalRef, TenantId},
        policy::Consent,
    },
    service::error::ServiceError,
    store::gdpr::ExportReader,
};

/// Rows read per query; the chunks sent are flushed at about [`CHUNK_BYTES`].
const PAGE: i64 = 200;
const CHUNK_BYTES: usize = 64 * 1024;

/// Opens the snapshot (so that an unreachable database is still an error response) and
/// returns the body that streams the export.
pub async fn export_body(state: &AppState, tenant: &TenantId, user: &ExternalRef) -> Result<Body, ServiceError> {
    let mut reader = state.store.export_reader(tenant, user).await?;
    let consent = Consent::view(user, reader.consent().await?, state.config.default_ai_consent);
    let (sender, receiver) = mpsc::channel(4);
    let mut out = Out { sender, buffer: Vec::with_capacity(CHUNK_BYTES) };
    tokio::spawn(async move {
        if let Err(error) = write_export(&mut reader, &consent, &mut out).await {
            // The status is sent already: cutting the body short tells the client.
            tracing::warn!(error = %error, "export interrupted");
            let _ = out.sender.send(Err(std::io::Error::other("export interrupted"))).await;
        }
    });
    Ok(Body::from_stream(Chunks(receiver)))
}

/// Why writing stopped: the database failed, or the client went away.
#[derive(Debug, thiserror::Error)]
enum Stop {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("encoding: {0}")]
    Encoding(#[from] serde_json::Error),
    #[error("the client went away")]
    Gone,
}

async fn write_export(reader: &mut ExportReader, consent: &Consent, out: &mut Out) -> Result<(), Stop> {
    out.raw(b"{\"external_ref\":");
    out.json(&consent.external_ref)?;
    out.raw(b",\"consent\":");
    out.json(consent)?;
    out.raw(b",\"conversations\":[");
    let (mut after, mut first) = (None, true);
    loop {
        let page = reader.conversations(after, PAGE).await?;
        for conversation in &page {
            out.separator(&mut first);
            // The conversation's own fields, then its summary and messages (the document
            // flattens the conversation into the object that also holds them).
            let mut fields = serde_json::to_vec(conversation)?;
            fields.pop(); // the closing brace
            out.raw(&fields);
            let extras = reader.extras(conversation.id).await?;
            out.raw(b",\"summary\":");
            out.json(&extras.summary)?;
            out.raw(b",\"summary_through_seq\":");
            out.json(&extras.summary_through_seq)?;
            out.raw(b",\"working_memory\":");
            out.json(&extras.working_memory)?;
            out.raw(b",\"messages\":[");
            let (mut after_seq, mut first_message) = (Some(0), true);
            while let Some(seq) = after_seq {
                let messages = reader.messages(conversation.id, seq, PAGE).await?;
                after_seq = out.rows(&mut first_message, &messages, |last| last.seq).await?;
            }
            out.raw(b"]}");
        }
        out.flush_if_full().await?;
        match page.last() {
            Some(last) if is_full(&page) => after = Some((last.created_at, last.id)),
            _ => break,
        }
    }
    out.raw(b"],\"facts\":[");
    let (mut after, mut first) = (Some(None), true);
    while let Some(key) = after {
        let page = reader.facts(key, PAGE).await?;
        after = out.rows(&mut first, &page, |last| Some(last.id)).await?;
    }
    out.raw(b"],\"working_memories\":[");
    let (mut after, mut first) = (Some(None), true);
    while let Some(key) = after {
        let page = reader.working_memories(key.as_deref(), PAGE).await?;
        after = out.rows(&mut first, &page, |last| Some(last.agent_id.as_str().to_owned())).await?;
    }
    out.raw(b"],\"fact_versions\":[");
    let (mut after, mut first) = (Some(None), true);
    while let Some(key) = after {
        let page = reader.fact_versions(key, PAGE).await?;
        after = out.rows(&mut first, &page, |last| Some((last.fact_id, last.version.version))).await?;
    }
    out.raw(b"],\"events\":[");
    let (mut after, mut first) = (Some(0), true);
    while let Some(key) = after {
        let page = reader.events(key, PAGE).await?;
        after = out.rows(&mut first, &page, |last| last.id).await?;
    }
    out.raw(b"],\"webhook_deliveries\":[");
    let (mut after, mut first) = (Some(None), true);
    while let Some(key) = after {
        let page = reader.deliveries(key, PAGE).await?;
        after = out.rows(&mut first, &page, |last| Some((last.event_id, last.subscription_id))).await?;
    }
    out.raw(b"],\"imported_ids\":[");
    let (mut after, mut first) = (Some(None), true);
    while let Some(key) = after {
        let page = reader
            .imported_ids(key.as_ref().map(|(kind, id): &(String, String)| (kind.as_str(), id.as_str())), PAGE)
            .await?;
        after = out.rows(&mut first, &page, |last| Some((last.kind.clone(), last.client_id.clone()))).await?;
    }
    out.raw(b"]}");
    out.flush().await
}

fn is_full<T>(page: &[T]) -> bool {
    super::is_full_page(page, PAGE)
}

/// The writing end: a buffer flushed into a bounded channel, so a slow client slows
/// the reads down instead of letting them pile up in memory.
struct Out {
    sender: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buffer: Vec<u8>,
}

impl Out {
    fn raw(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The comma between array elements: none before the first (`first` is then cleared).
    fn separator(&mut self, first: &mut bool) {
        if !std::mem::take(first) {
            self.raw(b",");
        }
    }

    /// Writes a page's rows as elements of the array being written; the key to read the
    /// next page after, or `None` after the last page (one that is not full).
    async fn rows<T: Serialize, K>(
        &mut self,
        first: &mut bool,
        page: &[T],
        key: impl Fn(&T) -> K,
    ) -> Result<Option<K>, Stop> {
        for row in page {
            self.separator(first);
            self.json(row)?;
        }
        self.flush_if_full().await?;
        Ok(page.last().filter(|_| is_full(page)).map(key))
    }

    fn json(&mut self, value: &impl Serialize) -> Result<(), Stop> {
        serde_json::to_writer(&mut self.buffer, value)?;
        Ok(())
    }

    async fn flush_if_full(&mut self) -> Result<(), Stop> {
        if self.buffer.len() >= CHUNK_BYTES { self.flush().await } else { Ok(()) }
    }

    async fn flush(&mut self) -> Result<(), Stop> {
        let chunk = Bytes::from(std::mem::replace(&mut self.buffer, Vec::with_capacity(CHUNK_BYTES)));
        self.sender.send(Ok(chunk)).await.map_err(|_| Stop::Gone)
    }
}

/// The reading end, as the body's stream of chunks.
struct Chunks(mpsc::Receiver<Result<Bytes, std::io::Error>>);

impl futures_core::Stream for Chunks {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}
