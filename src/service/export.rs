//! NDJSON export of a tenant's records (`engram export`), in the order and the shape
//! [`super::import`] reads back: it pages through one snapshot, so its memory is one page
//! whatever the tenant holds. (A person's GDPR export is [`super::gdpr_export`].)

use crate::{
    domain::{ids::TenantId, import::ImportRecord},
    store::Store,
};

/// Rows read per query.
const PAGE: i64 = 500;

/// Writes every record of `tenant` as NDJSON to `out`, one line each, in the order an
/// import needs (consents, conversations with their messages, facts); calls `progress`
/// with the records written so far after each page. Memory: one page, and one
/// conversation's line at a time. It takes the store, not the `AppState`: `engram
/// export` runs it with no server.
pub async fn export<W: std::io::Write>(
    store: &Store,
    tenant: &TenantId,
    out: &mut W,
    mut progress: impl FnMut(u64),
) -> Result<u64, anyhow::Error> {
    let mut reader = store.record_reader(tenant).await?;
    let mut written = 0u64;
    let line = |out: &mut W, record: &ImportRecord| -> anyhow::Result<()> {
        serde_json::to_writer(&mut *out, record)?;
        out.write_all(b"\n")?;
        Ok(())
    };
    let mut after: Option<String> = None;
    loop {
        let page = reader.consents(after.as_deref(), PAGE).await?;
        for record in &page {
            line(out, record)?;
        }
        written += page.len() as u64;
        progress(written);
        match page.last() {
            Some(ImportRecord::Consent(last)) if full(&page) => after = Some(last.external_ref.as_str().to_owned()),
            _ => break,
        }
    }
    let mut after = None;
    loop {
        let page = reader.conversations(after, PAGE).await?;
        for (id, record) in &page {
            let mut record = record.clone();
            let mut after_seq = 0;
            loop {
                let messages = reader.messages(*id, after_seq, PAGE).await?;
                let last = messages.last().map(|(seq, _)| *seq);
                let more = full(&messages);
                record.messages.extend(messages.into_iter().map(|(_, m)| m));
                match last {
                    Some(seq) if more => after_seq = seq,
                    _ => break,
                }
            }
            line(out, &ImportRecord::Conversation(record))?;
        }
        written += page.len() as u64;
        progress(written);
        match page.last() {
            Some((id, _)) if full(&page) => after = Some(*id),
            _ => break,
        }
    }
    let mut after = None;
    loop {
        let page = reader.facts(after, PAGE).await?;
        for (_, record) in &page {
            line(out, &ImportRecord::Fact(record.clone()))?;
        }
        written += page.len() as u64;
        progress(written);
        match page.last() {
            Some((id, _)) if full(&page) => after = Some(*id),
            _ => break,
        }
    }
    out.flush()?;
    Ok(written)
}

fn full<T>(page: &[T]) -> bool {
    super::is_full_page(page, PAGE)
}
