//! SQLite's word index: each stem of a fact keyed by the fact's owner, so that the facts
//! of one owner holding one word are one term's postings, found by one lookup.
//!
//! FTS5 over the fact's text, with the owner as a token of its own, answered a query word
//! with `"<owner>" AND word`: the owner's whole posting list walked beside the word's, for
//! every word, and a 1 000-entry list has no doclist index to skip through. When every
//! query word is common among a user's facts, that walk was a quarter of a 20-word search's
//! instructions. Here each term is the owner's tag followed by a stem, made in Rust when a
//! fact's text is written (`facts.search_terms`, indexed by `facts_fts` with FTS5's `ascii`
//! tokenizer and no positions: migration 0019), and a search asks for every query word's
//! term at once (`OR`): each matching fact comes back once, with its terms, and
//! [`matches`] tells which query words it holds. The stems are those of
//! [`crate::domain::search_query::stems`], the Snowball English stemmer's, which is
//! also what PostgreSQL's `english` configuration stems with.

use uuid::Uuid;

use super::Result;
use crate::domain::{owner::Owner, search_query::stems};

/// Hex digits of an owner's tag: every term starts with exactly this many, so a term
/// splits into its owner's tag and its stem in one way only.
const TAG_LEN: usize = 16;

/// The owner's tag: FNV-1a (64 bits) over the tenant, agent and external ref, each
/// followed by 0xFF (a byte no UTF-8 text holds), in hex. It is stored in the index, so it
/// may never change. Two owners may share a tag (it is a hash, and anyone can make one
/// collide): every hit's row is tested for its owner, so a shared tag costs a row read,
/// never another owner's fact.
fn owner_tag(owner: Owner<'_>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [owner.tenant().as_str(), owner.agent().as_str(), owner.user().as_str()] {
        for byte in part.bytes().chain([0xFF]) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:0width$x}", width = TAG_LEN)
}

/// What `facts.search_terms` holds for a fact of this owner with this text: its distinct
/// stems, each after the owner's tag, separated by spaces (empty when every word is a stop
/// word). A stem holds only letters and digits, so FTS5's `ascii` tokenizer, which splits
/// at ASCII characters other than letters and digits only, reads each term as one token.
pub(super) fn fact_terms(owner: Owner<'_>, text: &str) -> String {
    let tag = owner_tag(owner);
    let stems = stems(text);
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

/// The FTS5 query for the owner's facts holding any of `stems`: each term quoted, joined
/// by `OR`. `None` when there is no stem (FTS5 refuses an empty query).
pub(super) fn any_of(owner: Owner<'_>, stems: &[String]) -> Option<String> {
    if stems.is_empty() {
        return None;
    }
    let tag = owner_tag(owner);
    Some(stems.iter().map(|stem| format!("\"{tag}{stem}\"")).collect::<Vec<_>>().join(" OR "))
}

/// Which of `stems` (at most 64: a query's words are capped below that) each matching
/// fact holds, as a bit per stem in `stems`' order, from the search's one row: `ids`, the
/// facts' 16-byte ids end to end, and `terms`, their `search_terms` in the same order,
/// one line each. Linear in the row: each term is compared with each stem's, at most 64.
/// A row whose two halves disagree is a decode error, never a wrong match.
pub(super) fn matches(ids: &[u8], terms: &str, stems: &[String]) -> Result<Vec<(Uuid, u64)>> {
    let decode = |message: String| sqlx::Error::Decode(message.into());
    if !ids.len().is_multiple_of(16) {
        return Err(decode(format!("{} bytes of ids are not whole 16-byte ids", ids.len())));
    }
    let mut lines = terms.split('\n');
    let found = ids
        .chunks_exact(16)
        .map(|id| {
            let id = Uuid::from_slice(id).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
            let line = lines.next().ok_or_else(|| decode("fewer facts' terms than ids".to_owned()))?;
            let mut held = 0_u64;
            for term in line.split(' ') {
                let stem = term.get(TAG_LEN..).unwrap_or_default();
                if let Some(word) = stems.iter().take(64).position(|wanted| wanted == stem) {
                    held |= 1 << word;
                }
            }
            Ok((id, held))
        })
        .collect::<Result<Vec<_>>>()?;
    if lines.next().is_some() && !ids.is_empty() {
        return Err(decode("more facts' terms than ids".to_owned()));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::{AgentId, ExternalRef, TenantId};

    /// The owner (tenant `t`, agent `a`, user `user`) and its tag.
    fn with_owner<T>(user: &str, f: impl FnOnce(Owner<'_>, String) -> T) -> T {
        let tenant = TenantId::parse("t".into()).unwrap();
        let agent = AgentId::parse("a".into()).unwrap();
        let user = ExternalRef::parse(user.into()).unwrap();
        let owner = Owner::new(&tenant, &agent, &user);
        f(owner, owner_tag(owner))
    }

    #[test]
    fn an_owners_tag_never_changes() {
        // Stored in every term: a different tag would hide every indexed fact.
        assert_eq!(with_owner("caroline", |_, tag| tag), "bf2a693d491fd842");
        assert_ne!(with_owner("caroline", |_, tag| tag), with_owner("melanie", |_, tag| tag));
    }

    #[test]
    fn a_facts_terms_are_its_owners_tag_and_its_stems() {
        with_owner("caroline", |owner, tag| {
            assert_eq!(
                fact_terms(owner, "Caroline drinks tea; she DRINKS café au lait"),
                format!("{tag}carolin {tag}drink {tag}tea {tag}café {tag}au {tag}lait")
            );
            assert_eq!(fact_terms(owner, "and what is it?"), "");
        });
    }

    #[test]
    fn a_search_asks_for_each_stem_of_its_owner() {
        with_owner("u", |owner, tag| {
            assert_eq!(any_of(owner, &["tea".into(), "hike".into()]), Some(format!("\"{tag}tea\" OR \"{tag}hike\"")));
            assert_eq!(any_of(owner, &[]), None);
        });
    }

    #[test]
    fn each_fact_gets_a_bit_for_each_query_word_it_holds() {
        let tag = with_owner("u", |_, tag| tag);
        let stems: Vec<String> = ["tea", "hike", "paris"].map(String::from).into();
        let (one, two) = (Uuid::from_u128(1), Uuid::from_u128(u128::MAX));
        let ids = [one.as_bytes().as_slice(), two.as_bytes()].concat();
        let terms = format!("{tag}hike {tag}tea {tag}walk\n{tag}paris");
        assert_eq!(matches(&ids, &terms, &stems).unwrap(), [(one, 0b011), (two, 0b100)]);
        assert_eq!(matches(&[], "", &stems).unwrap(), []);
        // The two halves of the row must agree.
        assert!(matches(&ids, &format!("{tag}tea"), &stems).is_err());
        assert!(matches(&ids[..16], &terms, &stems).is_err());
        assert!(matches(&ids[..15], "", &stems).is_err());
    }
}
