//! The word index: each stem of a fact keyed by the fact's owner, so that the facts of
//! one owner holding one word are one term's postings, found by one lookup.
//!
//! Each term is the owner's tag followed by a stem, made here when a fact's text is
//! written (`facts.search_terms`), and indexed by each backend: SQLite's FTS5 table
//! `facts_fts` with its `ascii` tokenizer and no positions (migration 0019), PostgreSQL's
//! GIN index over the terms as a `tsvector` (0020). A search asks for every query word's
//! term at once: each matching fact comes back once, with its terms, and
//! [`WordSearch::matches`] tells which query words it holds. The stems are those of
//! [`crate::domain::search_query::stems`], the Snowball English stemmer's.
//!
//! Before, FTS5 indexed the fact's text with the owner as a token of its own and answered
//! a query word with `"<owner>" AND word`: the owner's whole posting list walked beside the
//! word's, for every word (a quarter of a 20-word search's instructions when every query
//! word was common among a user's facts); and PostgreSQL made owner-keyed lexemes itself
//! but counted each word's matches in SQL, one heap visit per (fact, word) pair.

use uuid::Uuid;

use super::Result;
use crate::domain::{
    crypto,
    owner::{Owner, OwnerSet},
    search_query::stems,
};

/// Hex digits of an owner's tag: every term starts with exactly this many, so a term
/// splits into its owner's tag and its stem in one way only.
const TAG_LEN: usize = 16;

/// The longest stem indexed or looked for, in bytes: PostgreSQL refuses a lexeme over
/// 2 047 bytes, tag included (its own parser drops such words too). A run of letters
/// this long is no word anyone searches for.
const MAX_STEM_BYTES: usize = 2047 - TAG_LEN;

/// Most query words a search tells apart: a bit each in a `u64`. A query's words are
/// capped below it ([`crate::domain::search_query::MAX_QUERY_TERMS`]).
const MAX_WORDS: usize = 64;

/// FNV-1a (64 bits) of `bytes`: where a query word sits in [`WordSearch`]'s table.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The server's key of owner tags, derived from `ENGRAM_RECEIPT_KEY`. A tag is stored
/// beside every stem, also in what the files keep of an erased fact (PostgreSQL's free
/// space, backups): keyed, it cannot be traced back to a person by hashing candidate
/// identifiers (a phone number has few enough to try them all).
#[derive(Clone)]
pub struct WordKey([u8; 32]);

impl WordKey {
    /// The key of tags under `secret`, apart from its other uses (receipts, CSRF).
    pub fn derive(secret: &[u8]) -> WordKey {
        let mut key = [0_u8; 32];
        key.copy_from_slice(&crypto::hmac_sha256(secret, b"engram word index owner tags v1"));
        WordKey(key)
    }

    /// What `word_index_key` stores: tells whether the terms were written under this key
    /// without revealing it.
    pub(super) fn fingerprint(&self) -> String {
        crypto::hmac_sha256_hex(&self.0, b"fingerprint")
    }
}

impl std::fmt::Debug for WordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WordKey(***)")
    }
}

/// The owner's tag: HMAC-SHA256 under `key` of the tenant, agent and external ref (each
/// followed by 0xFF, a byte no UTF-8 text holds), its first [`TAG_LEN`] hex digits. It is
/// stored in the index, so it changes only with the key, and then every fact is tagged
/// again at start (`Store::key_word_index`). Two owners may share a tag: every hit's row
/// is tested for its owner, so a shared tag costs a row read, never another owner's fact.
fn owner_tag(key: &WordKey, owner: Owner<'_>) -> String {
    let parts = [owner.tenant().as_str(), owner.agent().as_str(), owner.user().as_str()];
    let mut input = Vec::with_capacity(parts.iter().map(|part| part.len() + 1).sum());
    for part in parts {
        input.extend_from_slice(part.as_bytes());
        input.push(0xFF);
    }
    crypto::hex(&crypto::hmac_sha256(&key.0, &input)[..TAG_LEN / 2])
}

/// Whether the index holds `stem`, in a fact's terms and in a search alike.
fn indexed(stem: &str) -> bool {
    stem.len() <= MAX_STEM_BYTES
}

/// What `facts.search_terms` holds for a fact of this owner with this text: its distinct
/// stems, each after the owner's tag, separated by spaces (empty when every word is a stop
/// word). A stem holds only letters and digits, so FTS5's `ascii` tokenizer, which splits
/// at ASCII characters other than letters and digits only, reads each term as one token,
/// and PostgreSQL's `string_to_array(…, ' ')` splits the terms apart.
pub(super) fn fact_terms(key: &WordKey, owner: Owner<'_>, text: &str) -> String {
    let tag = owner_tag(key, owner);
    let mut stems = stems(text);
    stems.retain(|stem| indexed(stem));
    let mut terms = String::with_capacity(stems.iter().map(|stem| TAG_LEN + 1 + stem.len()).sum());
    for stem in &stems {
        if !terms.is_empty() {
            terms.push(' ');
        }
        terms.push_str(&tag);
        terms.push_str(stem);
    }
    terms
}

/// A search of one owner's facts, or of an owner set's (shared memory), for the stems of
/// a query's words (its first [`MAX_WORDS`]): what the index is asked (each stem under
/// each owner's tag), and which words each fact it finds holds.
pub(super) struct WordSearch {
    /// The owners' tags, the reading owner's first.
    tags: Vec<String>,
    stems: Vec<String>,
    /// An open-addressing table of the stems by [`fnv1a`]: each slot 0 (empty) or the
    /// word's index plus one. Twice as many slots as words, so a lookup probes a slot or two.
    slots: [u8; 2 * MAX_WORDS],
}

impl WordSearch {
    /// `None` when there is no stem: FTS5 refuses an empty query, and nothing matches.
    pub(super) fn new(key: &WordKey, owners: OwnerSet<'_>, mut stems: Vec<String>) -> Option<WordSearch> {
        stems.retain(|stem| indexed(stem));
        stems.truncate(MAX_WORDS);
        if stems.is_empty() {
            return None;
        }
        let mut slots = [0_u8; 2 * MAX_WORDS];
        for (word, stem) in stems.iter().enumerate() {
            let mut slot = Self::slot_of(stem.as_bytes());
            while slots[slot] != 0 {
                slot = (slot + 1) % slots.len();
            }
            // At most 64 words: the index plus one fits a byte.
            slots[slot] = word as u8 + 1;
        }
        let tags = owners.owners().map(|owner| owner_tag(key, owner)).collect();
        Some(WordSearch { tags, stems, slots })
    }

    fn slot_of(stem: &[u8]) -> usize {
        // The remainder is below the table's 128 slots: the conversion is exact.
        (fnv1a(stem) % (2 * MAX_WORDS as u64)) as usize
    }

    /// The word whose stem is `stem`, if any.
    fn word(&self, stem: &[u8]) -> Option<usize> {
        let mut slot = Self::slot_of(stem);
        loop {
            let word = usize::from(self.slots[slot]).checked_sub(1)?;
            if self.stems[word].as_bytes() == stem {
                return Some(word);
            }
            slot = (slot + 1) % self.slots.len();
        }
    }

    /// How many words the search tells apart.
    pub(super) fn words(&self) -> usize {
        self.stems.len()
    }

    /// The FTS5 query for the owners' facts holding any of the stems: each term quoted,
    /// joined by `OR`.
    pub(super) fn fts5_query(&self) -> String {
        self.joined("\"", " OR ")
    }

    /// The owners' terms of the stems, separated by spaces: what PostgreSQL's search of a
    /// short query looks up one by one.
    pub(super) fn terms(&self) -> String {
        self.joined("", " ")
    }

    /// The PostgreSQL `tsquery` for the same: each term quoted, joined by `|`. A term is
    /// letters and digits only, so quoting keeps it out of the `tsquery` syntax, and a
    /// quoted term is taken as it is, not stemmed again.
    pub(super) fn tsquery(&self) -> String {
        self.joined("'", " | ")
    }

    /// Each stem's term (tag and stem) of each owner between `quote`s, joined by
    /// `separator`.
    fn joined(&self, quote: &str, separator: &str) -> String {
        self.tags
            .iter()
            .flat_map(|tag| self.stems.iter().map(move |stem| format!("{quote}{tag}{stem}{quote}")))
            .collect::<Vec<_>>()
            .join(separator)
    }

    /// Whether `term` starts with a tag of the search's owners.
    fn owned(&self, term: &[u8]) -> bool {
        self.tags.iter().any(|tag| term.starts_with(tag.as_bytes()))
    }

    /// Which words each matching fact holds, as a bit per word in the query's order, from
    /// the search's one row: `ids`, the facts' 16-byte ids end to end, and `terms`, their
    /// `search_terms` in the same order, one line each. One pass over the stems' bytes:
    /// a term that starts with an owner's tag (every term of the owners' facts does)
    /// skips it whole, and a stem is one table lookup. A row whose two halves disagree is
    /// a decode error, never a wrong match.
    pub(super) fn matches(&self, ids: &[u8], terms: &str) -> Result<Vec<(Uuid, u64)>> {
        let decode = |message: String| sqlx::Error::Decode(message.into());
        if !ids.len().is_multiple_of(16) {
            return Err(decode(format!("{} bytes of ids are not whole 16-byte ids", ids.len())));
        }
        let facts = ids.len() / 16;
        let mut found = Vec::with_capacity(facts);
        let bytes = terms.as_bytes();
        let mut held = 0_u64;
        let mut start = 0;
        while found.len() < facts && start <= bytes.len() {
            let rest = &bytes[start..];
            let skip = if self.owned(rest) { TAG_LEN } else { 0 };
            let end = rest[skip..].iter().position(|&b| b == b' ' || b == b'\n').map_or(rest.len(), |at| skip + at);
            if skip > 0
                && let Some(word) = self.word(&rest[skip..end])
            {
                held |= 1 << word;
            }
            start += end + 1;
            if rest.get(end) != Some(&b' ') {
                // The end of a fact's line, or of the text.
                let at = found.len() * 16;
                let id = Uuid::from_slice(&ids[at..at + 16]).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
                found.push((id, std::mem::take(&mut held)));
            }
        }
        if found.len() < facts {
            return Err(decode("fewer facts' terms than ids".to_owned()));
        }
        if start <= bytes.len() && !found.is_empty() {
            return Err(decode("more facts' terms than ids".to_owned()));
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::{AgentId, ExternalRef, TenantId};

    fn key() -> WordKey {
        WordKey::derive(b"a test key of thirty-two bytes!!")
    }

    /// The owner (tenant `t`, agent `a`, user `user`) and its tag under [`key`].
    fn with_owner<T>(user: &str, f: impl FnOnce(Owner<'_>, String) -> T) -> T {
        let tenant = TenantId::parse("t".into()).unwrap();
        let agent = AgentId::parse("a".into()).unwrap();
        let user = ExternalRef::parse(user.into()).unwrap();
        let owner = Owner::new(&tenant, &agent, &user);
        f(owner, owner_tag(&key(), owner))
    }

    fn searching(user: &str, stems: &[&str]) -> Option<WordSearch> {
        with_owner(user, |owner, _| {
            WordSearch::new(&key(), owner.into(), stems.iter().map(|stem| stem.to_string()).collect())
        })
    }

    #[test]
    fn an_owners_tag_changes_only_with_the_key() {
        // Stored in every term: a different tag would hide every indexed fact.
        assert_eq!(with_owner("caroline", |_, tag| tag), "bc24be3d09fb509e");
        assert_ne!(with_owner("caroline", |_, tag| tag), with_owner("melanie", |_, tag| tag));
        // Without the server's key, nobody can tell whose a tag is by computing candidates'.
        let other = WordKey::derive(b"another key of thirty-two bytes!");
        let caroline = with_owner("caroline", |owner, _| owner_tag(&other, owner));
        assert_ne!(caroline, with_owner("caroline", |_, tag| tag));
        assert_eq!(caroline.len(), TAG_LEN);
        assert_ne!(key().fingerprint(), other.fingerprint());
    }

    #[test]
    fn a_facts_terms_are_its_owners_tag_and_its_stems() {
        with_owner("caroline", |owner, tag| {
            assert_eq!(
                fact_terms(&key(), owner, "Caroline drinks tea; she DRINKS café au lait"),
                format!("{tag}carolin {tag}drink {tag}tea {tag}café {tag}au {tag}lait")
            );
            assert_eq!(fact_terms(&key(), owner, "and what is it?"), "");
        });
    }

    #[test]
    fn stems_too_long_for_postgresql_are_neither_indexed_nor_asked_for() {
        let (longest, over) = ("k".repeat(MAX_STEM_BYTES), "k".repeat(MAX_STEM_BYTES + 1));
        with_owner("caroline", |owner, tag| {
            assert_eq!(fact_terms(&key(), owner, &format!("{over} tea {longest}")), format!("{tag}tea {tag}{longest}"));
            assert_eq!(tag.len() + longest.len(), 2047, "PostgreSQL's longest lexeme");
        });
        assert!(searching("u", &[over.as_str()]).is_none());
        assert_eq!(searching("u", &[over.as_str(), "tea"]).unwrap().words(), 1);
    }

    #[test]
    fn a_search_asks_for_each_stem_of_its_owner() {
        let tag = with_owner("u", |_, tag| tag);
        let search = searching("u", &["tea", "hike"]).unwrap();
        assert_eq!(search.fts5_query(), format!("\"{tag}tea\" OR \"{tag}hike\""));
        assert_eq!(search.tsquery(), format!("'{tag}tea' | '{tag}hike'"));
        assert_eq!(search.terms(), format!("{tag}tea {tag}hike"));
        assert_eq!(search.words(), 2);
        assert!(searching("u", &[]).is_none());
    }

    /// Shared memory: each stem is asked for under the tag of every agent read, and a
    /// fact of any of them holds its words; a third agent's terms hold none.
    #[test]
    fn a_shared_search_asks_for_each_stem_of_each_agent_read() {
        let (tenant, user) = (TenantId::parse("t".into()).unwrap(), ExternalRef::parse("u".into()).unwrap());
        let agents: Vec<AgentId> = ["a", "profile", "other"].map(|a| AgentId::parse(a.into()).unwrap()).into();
        let tags: Vec<String> = agents.iter().map(|a| owner_tag(&key(), Owner::new(&tenant, a, &user))).collect();
        let owners = OwnerSet::new(Owner::new(&tenant, &agents[0], &user), &agents[1..2]);
        let search = WordSearch::new(&key(), owners, vec!["tea".into(), "hike".into()]).unwrap();
        let (mine, shared, other) = (&tags[0], &tags[1], &tags[2]);
        assert_eq!(search.terms(), format!("{mine}tea {mine}hike {shared}tea {shared}hike"));
        assert_eq!(search.words(), 2);
        let ids: Vec<Uuid> = (1..=3).map(Uuid::from_u128).collect();
        let bytes: Vec<u8> = ids.iter().flat_map(|id| *id.as_bytes()).collect();
        let terms = format!("{mine}tea\n{shared}hike {shared}tea\n{other}tea");
        assert_eq!(search.matches(&bytes, &terms).unwrap(), [(ids[0], 0b01), (ids[1], 0b11), (ids[2], 0)]);
    }

    #[test]
    fn each_fact_gets_a_bit_for_each_query_word_it_holds() {
        let (tag, other) = (with_owner("u", |_, tag| tag), with_owner("v", |_, tag| tag));
        let search = searching("u", &["tea", "hike", "paris"]).unwrap();
        let ids: Vec<Uuid> = (1..=4).map(Uuid::from_u128).collect();
        let bytes: Vec<u8> = ids.iter().flat_map(|id| *id.as_bytes()).collect();
        // A stem that only begins like a query word's, a term of another owner's tag (a
        // fact's terms all have its own), an empty line.
        let terms = format!("{tag}hike {tag}tea {tag}walk\n{tag}parisian {tag}paris\n{other}tea\n");
        assert_eq!(
            search.matches(&bytes, &terms).unwrap(),
            [(ids[0], 0b011), (ids[1], 0b100), (ids[2], 0), (ids[3], 0)]
        );
        assert_eq!(search.matches(&[], "").unwrap(), []);
        // The two halves of the row must agree.
        assert!(search.matches(&bytes, &format!("{tag}tea")).is_err(), "fewer lines than ids");
        assert!(search.matches(&bytes[..16], &terms).is_err(), "more lines than ids");
        assert!(search.matches(&bytes[..15], "").is_err(), "a cut id");
    }

    #[test]
    fn every_one_of_64_words_is_told_apart() {
        let stems: Vec<String> = (0..70).map(|word| format!("w{word}")).collect();
        let (tag, search) =
            with_owner("u", |owner, tag| (tag, WordSearch::new(&key(), owner.into(), stems.clone()).unwrap()));
        assert_eq!(search.words(), 64, "the words past 64 are not looked for");
        let line = stems.iter().map(|stem| format!("{tag}{stem}")).collect::<Vec<_>>().join(" ");
        let id = Uuid::from_u128(7);
        assert_eq!(search.matches(id.as_bytes(), &line).unwrap(), [(id, u64::MAX)]);
    }
}
