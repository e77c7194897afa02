//! The hot reads' answers (the last messages, the memory context, search, one fact)
//! written as JSON by hand: the same bytes as `serde_json::to_vec`, without serde's
//! call per key and per value.
//!
//! Serialised through serde, a fact costs ~4 300 instructions (`callgrind`, the server
//! under `engram-bench load`, docs/performance.md): seventeen keys each scanned for
//! characters to escape, each value a call through the serialiser, the agent id cloned
//! into a `String` by its `into = "String"`. Here the keys and the punctuation between
//! them are constants written whole, ids and times are formatted into a stack buffer, and
//! a string is copied as it is when no byte of it needs escaping. What is rare (a float,
//! a message's structured content, a time chrono writes its own way) still goes through
//! `serde_json`, so that the output cannot drift from the derived `Serialize` impls, which
//! stay the schema's and every other answer's; the tests hold the two byte for byte on
//! any value.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::{fact::Fact, memory_context::MemoryContext, message::Message, page::Page, timestamp};

/// A value that writes itself as JSON, exactly as `serde_json::to_vec` writes it.
pub trait WriteJson {
    /// Appends the value's JSON to `out`.
    fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;

    /// About how many bytes [`WriteJson::write_json`] writes, to size the buffer once
    /// rather than grow it (a memory context's ~10 KB were copied six times growing).
    fn size_hint(&self) -> usize;
}

/// The most bytes of a fact's answer beyond its strings: keys, three ids, seven times,
/// two numbers.
const FACT_BYTES: usize = 640;
/// The most bytes of one of a fact's source messages.
const SOURCE_BYTES: usize = 96;
/// The bytes of a message's answer beyond its content.
const MESSAGE_BYTES: usize = 192;

/// Writes the value and returns the bytes.
pub fn to_vec<T: WriteJson + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(value.size_hint());
    value.write_json(&mut out)?;
    Ok(out)
}

/// Whether serde_json writes `byte` as it is inside a string.
fn plain(byte: u8) -> bool {
    byte >= 0x20 && byte != b'"' && byte != b'\\'
}

/// Whether serde_json writes every byte of `bytes` as it is, eight bytes at a time: a
/// fact or a message is mostly text that needs no escape.
fn all_plain(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    /// Whether any byte of `word` is below `n` (≤ 0x80): exact for the word as a whole.
    fn below(word: u64, n: u8) -> bool {
        word.wrapping_sub(ONES * u64::from(n)) & !word & HIGH != 0
    }
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let word = u64::from_ne_bytes([word[0], word[1], word[2], word[3], word[4], word[5], word[6], word[7]]);
        if below(word, 0x20) || below(word ^ (ONES * u64::from(b'"')), 1) || below(word ^ (ONES * u64::from(b'\\')), 1)
        {
            return false;
        }
    }
    words.remainder().iter().all(|&byte| plain(byte))
}

/// A JSON string, escaped as serde_json escapes it.
fn string(out: &mut Vec<u8>, value: &str) -> serde_json::Result<()> {
    if all_plain(value.as_bytes()) {
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
        Ok(())
    } else {
        serde_json::to_writer(&mut *out, value)
    }
}

fn uuid(out: &mut Vec<u8>, id: &Uuid) {
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    out.push(b'"');
    out.extend_from_slice(id.hyphenated().encode_lower(&mut buf).as_bytes());
    out.push(b'"');
}

fn optional_uuid(out: &mut Vec<u8>, id: Option<&Uuid>) {
    match id {
        Some(id) => uuid(out, id),
        None => out.extend_from_slice(b"null"),
    }
}

/// `at`, or when it equals `written` the bytes `out[range]` that `written` gave.
fn same_time_or(
    out: &mut Vec<u8>,
    at: &DateTime<Utc>,
    written: &DateTime<Utc>,
    range: std::ops::Range<usize>,
) -> serde_json::Result<()> {
    if at == written {
        out.extend_from_within(range);
        Ok(())
    } else {
        timestamp::write_json(out, at)
    }
}

fn optional_time(out: &mut Vec<u8>, at: Option<&DateTime<Utc>>) -> serde_json::Result<()> {
    match at {
        Some(at) => timestamp::write_json(out, at),
        None => {
            out.extend_from_slice(b"null");
            Ok(())
        }
    }
}

fn integer(out: &mut Vec<u8>, value: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// Anything else, through serde_json.
fn serialized<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> serde_json::Result<()> {
    serde_json::to_writer(&mut *out, value)
}

/// A field serde leaves out when it is `None`: `key` (with its leading comma) and the
/// value `write` writes, or nothing.
fn present<T: ?Sized>(
    out: &mut Vec<u8>,
    key: &[u8],
    value: Option<&T>,
    write: impl FnOnce(&mut Vec<u8>, &T) -> serde_json::Result<()>,
) -> serde_json::Result<()> {
    match value {
        Some(value) => {
            out.extend_from_slice(key);
            write(out, value)
        }
        None => Ok(()),
    }
}

/// A JSON array of `items`.
fn array<T: WriteJson>(out: &mut Vec<u8>, items: &[T]) -> serde_json::Result<()> {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item.write_json(out)?;
    }
    out.push(b']');
    Ok(())
}

fn array_hint<T: WriteJson>(items: &[T]) -> usize {
    items.iter().map(WriteJson::size_hint).sum::<usize>() + items.len() + 2
}

impl Fact {
    /// The fact's members without the braces, so that a search hit can add its own.
    pub fn write_json_members(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(b"\"id\":");
        uuid(out, &self.id);
        out.extend_from_slice(b",\"agent_id\":");
        string(out, self.agent_id.as_str())?;
        out.extend_from_slice(b",\"external_ref\":");
        string(out, self.external_ref.as_str())?;
        out.extend_from_slice(b",\"fact\":");
        string(out, &self.fact)?;
        out.extend_from_slice(b",\"tags\":[");
        for (i, tag) in self.tags.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            string(out, tag)?;
        }
        out.extend_from_slice(b"],\"score\":");
        serialized(out, &self.score)?;
        out.extend_from_slice(b",\"source\":\"");
        out.extend_from_slice(self.source.as_str().as_bytes());
        out.extend_from_slice(b"\",\"conversation_id\":");
        optional_uuid(out, self.conversation_id.as_ref());
        out.extend_from_slice(b",\"source_messages\":[");
        for (i, source) in self.source_messages.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"conversation_id\":");
            uuid(out, &source.conversation_id);
            out.extend_from_slice(b",\"seq\":");
            integer(out, source.seq);
            out.push(b'}');
        }
        out.push(b']');
        out.extend_from_slice(b",\"created_at\":");
        let created = out.len();
        timestamp::write_json(out, &self.created_at)?;
        let created = created..out.len();
        out.extend_from_slice(b",\"updated_at\":");
        // A fact's three times are mostly one: written once, copied after.
        same_time_or(out, &self.updated_at, &self.created_at, created.clone())?;
        out.extend_from_slice(b",\"superseded_by\":");
        optional_uuid(out, self.superseded_by.as_ref());
        out.extend_from_slice(b",\"superseded_at\":");
        optional_time(out, self.superseded_at.as_ref())?;
        out.extend_from_slice(b",\"observed_at\":");
        same_time_or(out, &self.observed_at, &self.created_at, created)?;
        out.extend_from_slice(b",\"valid_until\":");
        optional_time(out, self.valid_until.as_ref())?;
        out.extend_from_slice(b",\"expires_at\":");
        optional_time(out, self.expires_at.as_ref())?;
        out.extend_from_slice(b",\"recall_count\":");
        integer(out, self.recall_count);
        out.extend_from_slice(b",\"last_recalled_at\":");
        optional_time(out, self.last_recalled_at.as_ref())
    }
}

impl WriteJson for Fact {
    fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.push(b'{');
        self.write_json_members(out)?;
        out.push(b'}');
        Ok(())
    }

    fn size_hint(&self) -> usize {
        let strings = [self.agent_id.as_str(), self.external_ref.as_str(), &self.fact];
        FACT_BYTES
            + strings.iter().map(|s| s.len()).sum::<usize>()
            + self.tags.iter().map(|t| t.len() + 3).sum::<usize>()
            + self.source_messages.len() * SOURCE_BYTES
    }
}

impl WriteJson for Message {
    fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(b"{\"id\":");
        uuid(out, &self.id);
        out.extend_from_slice(b",\"conversation_id\":");
        uuid(out, &self.conversation_id);
        out.extend_from_slice(b",\"seq\":");
        integer(out, self.seq);
        out.extend_from_slice(b",\"role\":\"");
        out.extend_from_slice(self.role.as_str().as_bytes());
        out.extend_from_slice(b"\",\"content\":");
        match &self.content {
            serde_json::Value::String(text) => string(out, text)?,
            content => serialized(out, content)?,
        }
        present(out, b",\"name\":", self.name.as_deref(), string)?;
        present(out, b",\"tool_calls\":", self.tool_calls.as_deref(), serialized)?;
        present(out, b",\"tool_call_id\":", self.tool_call_id.as_deref(), string)?;
        present(out, b",\"metadata\":", self.metadata.as_ref(), serialized)?;
        out.extend_from_slice(b",\"created_at\":");
        timestamp::write_json(out, &self.created_at)?;
        out.push(b'}');
        Ok(())
    }

    fn size_hint(&self) -> usize {
        // Structured content is sized by its text parts only: a guess, not a bound.
        let content = match &self.content {
            serde_json::Value::String(text) => text.len(),
            _ => 256,
        };
        MESSAGE_BYTES + content
    }
}

impl<T: WriteJson> WriteJson for Page<T> {
    fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(b"{\"items\":");
        array(out, &self.items)?;
        out.extend_from_slice(b",\"next_cursor\":");
        match &self.next_cursor {
            Some(cursor) => string(out, cursor)?,
            None => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
        Ok(())
    }

    fn size_hint(&self) -> usize {
        array_hint(&self.items) + 64
    }
}

impl WriteJson for MemoryContext {
    fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(if self.enabled {
            b"{\"enabled\":true,\"facts\":"
        } else {
            b"{\"enabled\":false,\"facts\":"
        });
        array(out, &self.facts)?;
        out.extend_from_slice(b",\"prompt\":");
        string(out, &self.prompt)?;
        present(out, b",\"working_memory\":", self.working_memory.as_ref(), serialized)?;
        out.push(b'}');
        Ok(())
    }

    fn size_hint(&self) -> usize {
        array_hint(&self.facts) + self.prompt.len() + 64
    }
}

#[cfg(test)]
mod tests {
    use proptest::{collection::vec, option, prelude::*};
    use serde_json::{Value, json};

    use super::*;
    use crate::{
        fact::{Source, SourceMessage},
        ids::{AgentId, ExternalRef},
        message::{Role, ToolCall},
        strategies::{fact, text, time},
        working_memory::WorkingMemory,
    };

    /// Message content as stored: text, OpenAI / AI SDK parts, or any JSON.
    fn content() -> impl Strategy<Value = Value> {
        prop_oneof![
            text().prop_map(Value::String),
            text().prop_map(|text| json!([{"type": "text", "text": text}])),
            (text(), any::<f64>(), any::<i64>())
                .prop_map(|(text, x, n)| json!({"k": text, "x": x, "n": n, "a": [null, true]})),
        ]
    }

    fn message() -> impl Strategy<Value = Message> {
        let role = prop_oneof![Just(Role::System), Just(Role::User), Just(Role::Assistant), Just(Role::Tool)];
        let tool_calls = option::of(vec(
            (text(), text(), text()).prop_map(|(id, name, arg)| ToolCall { id, name, arguments: json!({"q": arg}) }),
            0..3,
        ));
        (
            (any::<u128>(), any::<u128>(), any::<i64>(), role, content()),
            (option::of(text()), tool_calls, option::of(text()), option::of(content()), time()),
        )
            .prop_map(
                |((id, conversation, seq, role, content), (name, tool_calls, tool_call_id, metadata, created_at))| {
                    Message {
                        id: Uuid::from_u128(id),
                        conversation_id: Uuid::from_u128(conversation),
                        seq,
                        role,
                        content,
                        name,
                        tool_calls,
                        tool_call_id,
                        metadata,
                        created_at,
                    }
                },
            )
    }

    fn ours<T: WriteJson>(value: &T) -> String {
        String::from_utf8(to_vec(value).expect("writes")).expect("UTF-8")
    }

    fn serde<T: Serialize>(value: &T) -> String {
        serde_json::to_string(value).expect("serialises")
    }

    proptest! {
        #[test]
        fn a_fact_is_written_as_serde_json_writes_it(fact in fact()) {
            prop_assert_eq!(ours(&fact), serde(&fact));
        }

        #[test]
        fn a_page_of_messages_is_written_as_serde_json_writes_it(
            items in vec(message(), 0..4),
            next_cursor in option::of(text()),
        ) {
            let page = Page { items, next_cursor };
            prop_assert_eq!(ours(&page), serde(&page));
        }

        #[test]
        fn a_memory_context_is_written_as_serde_json_writes_it(
            enabled in any::<bool>(),
            facts in vec(fact(), 0..3),
            prompt in text(),
            document in option::of(option::of(text())),
        ) {
            let working_memory = document.map(|document| {
                document.map(|content| WorkingMemory { content, etag: "0194c1f2".to_owned(), updated_at: DateTime::UNIX_EPOCH })
            });
            let context = MemoryContext { enabled, facts, prompt, working_memory };
            prop_assert_eq!(ours(&context), serde(&context));
        }
    }

    #[test]
    fn strings_needing_escapes_and_odd_times_go_the_serde_way_and_agree() {
        let mut fact = Fact { fact: "say \"hi\"\n\ttab\u{1}\u{7f}é".to_owned(), ..sample() };
        fact.last_recalled_at = DateTime::from_timestamp(300_000_000_000, 0);
        fact.score = Some(f64::INFINITY);
        let written = ours(&fact);
        assert_eq!(written, serde(&fact));
        assert!(written.contains(r#""fact":"say \"hi\"\n\ttab\u0001"#), "{written}");
        assert!(written.contains(r#""score":null"#), "{written}");
    }

    #[test]
    fn each_byte_to_escape_is_found_at_every_place_of_a_word() {
        for special in [0x00, 0x01, 0x1f, b'"', b'\\'] {
            for at in 0..17 {
                let mut bytes = vec![b'a'; 17];
                bytes[at] = special;
                assert!(!all_plain(&bytes), "{special:#x} at {at}");
            }
        }
        assert!(all_plain("plain text with é, € and 😀 and DEL \u{7f} / ~".as_bytes()));
        assert!(all_plain(b" !#$%&'()*+,-./0123456789:;<=>?@[]^_`{|}~ "));
    }

    #[test]
    fn the_size_hint_holds_a_plain_fact() {
        let fact = sample();
        assert!(ours(&fact).len() <= fact.size_hint(), "{} > {}", ours(&fact).len(), fact.size_hint());
    }

    fn sample() -> Fact {
        let at = DateTime::from_timestamp(1_764_000_000, 123_000_000).expect("a time");
        Fact {
            id: Uuid::from_u128(1),
            agent_id: AgentId::parse("support-bot".to_owned()).expect("an agent id"),
            external_ref: ExternalRef::parse("whatsapp:+33612345678".to_owned()).expect("a ref"),
            fact: "Prefers tea over coffee".to_owned(),
            tags: vec!["preference".to_owned()],
            score: Some(0.8),
            source: Source::Manual,
            conversation_id: Some(Uuid::from_u128(u128::MAX)),
            source_messages: vec![SourceMessage { conversation_id: Uuid::from_u128(u128::MAX), seq: i64::MIN }; 10],
            created_at: at,
            updated_at: at,
            superseded_by: Some(Uuid::from_u128(2)),
            superseded_at: Some(at),
            observed_at: at,
            valid_until: Some(at),
            expires_at: Some(at),
            recall_count: i64::MAX,
            last_recalled_at: Some(at),
        }
    }
}
