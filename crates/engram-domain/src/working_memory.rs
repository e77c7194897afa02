//! Working memory: a free-form document (notes, a profile, a task list — often Markdown
//! or JSON text) that an agent reads and rewrites whole as it learns, one per agent and
//! end user and one per conversation. Facts are many small statements extracted for the
//! agent; working memory is the agent's own page. Writes are conditional on an `ETag`
//! (RFC 9110 §13.1), so two writers that read the same version cannot silently
//! overwrite each other: the second one is refused with 412 and rereads.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    ids::{AgentId, TenantId},
    owner::Owner,
};

/// The most a document may hold, in characters (Unicode scalar values, as JSON Schema's
/// `maxLength` counts, so the spec states the cap exactly): a page an agent keeps in its
/// prompt (about 8 000 tokens), not a store for files.
pub const MAX_CHARS: usize = 32 * 1024;

/// Whose document a call is about.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// The agent's document about one end user, across their conversations.
    User(Owner<'a>),
    /// One conversation's document, owned by the conversation's agent and user.
    Conversation { tenant: &'a TenantId, id: Uuid },
}

/// A stored document, as every route and tool answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct WorkingMemory {
    /// The document, exactly as last written.
    #[schema(example = "## Trip planning\n- prefers trains\n- budget not settled")]
    pub content: String,
    /// The version, also the response's `ETag` header (quoted there): send it back in
    /// `If-Match` to replace or delete only that version.
    #[schema(example = "0194c1f2-6d4e-7a8b-9c0d-1e2f3a4b5c6d")]
    pub etag: String,
    pub updated_at: DateTime<Utc>,
}

/// A person's document kept by one agent, as the export and the admin panel list them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct AgentWorkingMemory {
    pub agent_id: AgentId,
    #[serde(flatten)]
    pub memory: WorkingMemory,
}

/// The body of `PUT …/working-memory`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkingMemoryBody {
    /// The whole new document (it replaces the old one); at most 32 768 characters, no NUL.
    #[schema(max_length = 32768)]
    pub content: String,
}

/// Why a document is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentError {
    /// A 400: PostgreSQL cannot store NUL, so both backends refuse it alike.
    Nul,
    /// A 413.
    TooLarge(usize),
}

impl std::fmt::Display for ContentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContentError::Nul => f.write_str("content must not contain the NUL character (U+0000)"),
            ContentError::TooLarge(chars) => {
                write!(f, "working memory is {chars} characters, over the limit of {MAX_CHARS}")
            }
        }
    }
}

/// Checks a document before it is stored.
pub fn validate(content: &str) -> Result<(), ContentError> {
    if content.contains('\0') {
        return Err(ContentError::Nul);
    }
    // Bytes bound characters from above: only a long text is counted.
    if content.len() > MAX_CHARS {
        let chars = content.chars().count();
        if chars > MAX_CHARS {
            return Err(ContentError::TooLarge(chars));
        }
    }
    Ok(())
}

/// What a write or delete requires of the stored version, from the request's
/// `If-Match` and `If-None-Match` headers, judged as RFC 9110 §13.1 says: both must hold
/// when both are sent; `If-Match` compares strongly (a weak tag never matches a write),
/// `If-None-Match` weakly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Condition {
    if_match: Option<Tags>,
    if_none_match: Option<Tags>,
}

/// A header's `*` or list of entity tags.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tags {
    Any,
    List(Vec<Tag>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Tag {
    value: String,
    weak: bool,
}

impl Condition {
    /// No header: write whatever is there (or create).
    pub const ALWAYS: Condition = Condition { if_match: None, if_none_match: None };

    /// Only while the stored version is `etag` (what a tool or the admin panel read).
    pub fn matching(etag: String) -> Condition {
        Condition { if_match: Some(Tags::List(vec![Tag { value: etag, weak: false }])), if_none_match: None }
    }

    /// The condition the headers state; a header that is no list of entity tags (an
    /// unterminated quote, an empty value) is a 400 message.
    pub fn parse(if_match: Option<&str>, if_none_match: Option<&str>) -> Result<Condition, String> {
        Ok(Condition {
            if_match: if_match.map(|value| Tags::parse(value, "If-Match")).transpose()?,
            if_none_match: if_none_match.map(|value| Tags::parse(value, "If-None-Match")).transpose()?,
        })
    }

    /// Whether a write may go ahead over `current` (the stored version, if any).
    pub fn allows(&self, current: Option<&str>) -> bool {
        let matched = match &self.if_match {
            None => true,
            Some(Tags::Any) => current.is_some(),
            Some(Tags::List(tags)) => current.is_some_and(|c| tags.iter().any(|t| !t.weak && t.value == c)),
        };
        let unmatched = match &self.if_none_match {
            None => true,
            Some(tags) => !tags.names(current),
        };
        matched && unmatched
    }

    /// Why a refused write was refused, in words for its 412.
    pub fn refusal(&self) -> &'static str {
        match (&self.if_match, &self.if_none_match) {
            (_, Some(Tags::Any)) => "a working memory document already exists (If-None-Match: *): nothing was written",
            (Some(Tags::Any), _) => "there is no working memory document (If-Match: *): nothing was changed",
            (_, Some(Tags::List(_))) => {
                "the stored working memory is a version If-None-Match names, or not one If-Match names: nothing was changed"
            }
            _ => "the working memory changed since the version in If-Match: nothing was changed; read it again",
        }
    }
}

impl Tags {
    /// `*`, or a comma-separated list of entity tags: `"v"` (RFC 9110 §8.8.3: quoted,
    /// visible ASCII but the quote, commas allowed inside), `W/"v"`, or — as many
    /// clients send them — a bare `v` (visible ASCII, no quote or comma). Optional
    /// whitespace around the value and the commas. The spec's patterns state this.
    fn parse(value: &str, header: &str) -> Result<Tags, String> {
        let malformed = || format!("{header} must be `*` or a list of entity tags, such as \"…\"");
        let mut rest = value.trim_matches(OWS);
        if rest == "*" {
            return Ok(Tags::Any);
        }
        let mut tags = Vec::new();
        loop {
            let (weak, tag_text) = match rest.strip_prefix("W/") {
                Some(after) if after.starts_with('"') => (true, after),
                _ => (false, rest),
            };
            let (tag, after, bare) = match tag_text.strip_prefix('"') {
                Some(open) => {
                    let (tag, after) = open.split_once('"').ok_or_else(malformed)?;
                    (tag, after, false)
                }
                None => {
                    let end = tag_text.find([',', ' ', '\t']).unwrap_or(tag_text.len());
                    (&tag_text[..end], &tag_text[end..], true)
                }
            };
            // etagc: `!` and `#`…`~` (no quote, no space; a bare tag stops at a comma).
            if (bare && tag.is_empty()) || !tag.bytes().all(|b| b == b'!' || (b'#'..=b'~').contains(&b)) {
                return Err(malformed());
            }
            tags.push(Tag { value: tag.to_owned(), weak });
            let after = after.trim_start_matches(OWS);
            if after.is_empty() {
                return Ok(Tags::List(tags));
            }
            rest = after.strip_prefix(',').ok_or_else(malformed)?.trim_start_matches(OWS);
        }
    }

    /// Whether these tags name `current` by weak comparison (`*` names any version).
    fn names(&self, current: Option<&str>) -> bool {
        match self {
            Tags::Any => current.is_some(),
            Tags::List(tags) => current.is_some_and(|c| tags.iter().any(|t| t.value == c)),
        }
    }
}

/// Optional whitespace (RFC 9110 §5.6.3).
const OWS: [char; 2] = [' ', '\t'];

/// Whether a read's `If-None-Match` names the stored version (`*` names any; weak
/// comparison): the answer is then 304 with no body. A malformed header is a 400 message.
pub fn not_modified(if_none_match: Option<&str>, current: &str) -> Result<bool, String> {
    match if_none_match {
        None => Ok(false),
        Some(value) => Ok(Tags::parse(value, "If-None-Match")?.names(Some(current))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(if_match: Option<&str>, if_none_match: Option<&str>, current: Option<&str>) -> bool {
        Condition::parse(if_match, if_none_match).expect("well-formed").allows(current)
    }

    #[test]
    fn if_match_compares_strongly() {
        assert!(allows(Some(r#""v1""#), None, Some("v1")));
        assert!(allows(Some(r#" "v0" ,"v1" "#), None, Some("v1")));
        assert!(!allows(Some(r#""v0""#), None, Some("v1")));
        assert!(!allows(Some(r#""v1""#), None, None));
        // A weak tag never matches a write; a bare one is taken as written.
        assert!(!allows(Some(r#"W/"v1""#), None, Some("v1")));
        assert!(allows(Some("v1"), None, Some("v1")));
        assert!(allows(Some("*"), None, Some("v2")) && !allows(Some("*"), None, None));
        // A tag may hold a comma when quoted.
        assert!(allows(Some(r#""a,b""#), None, Some("a,b")));
    }

    #[test]
    fn if_none_match_compares_weakly_and_both_must_hold() {
        assert!(allows(None, Some("*"), None) && !allows(None, Some("*"), Some("v1")));
        assert!(!allows(None, Some(r#"W/"v1""#), Some("v1")));
        assert!(allows(None, Some(r#""v0""#), Some("v1")) && allows(None, Some("0"), None));
        assert!(allows(Some(r#""v1""#), Some(r#""v0""#), Some("v1")));
        assert!(!allows(Some(r#""v1""#), Some(r#""v1""#), Some("v1")));
        assert!(Condition::ALWAYS.allows(None) && Condition::ALWAYS.allows(Some("v1")));
        assert!(Condition::matching("v1".into()).allows(Some("v1")));
        assert!(!Condition::matching("v1".into()).allows(Some("v2")));
    }

    #[test]
    fn malformed_lists_are_refused() {
        for bad in ["", " ", r#""a"#, r#""a b""#, r#""a",,"b""#, r#""a","#, r#""a" "b""#, ",a", "a\u{7f}", r#""a"b"#] {
            assert!(Condition::parse(Some(bad), None).is_err(), "If-Match: {bad:?}");
            assert!(not_modified(Some(bad), "v1").is_err(), "If-None-Match: {bad:?}");
        }
    }

    #[test]
    fn reads_compare_weakly() {
        assert_eq!(not_modified(None, "v1"), Ok(false));
        assert_eq!(not_modified(Some(r#"W/"v1""#), "v1"), Ok(true));
        assert_eq!(not_modified(Some(r#""v0", "v1""#), "v1"), Ok(true));
        assert_eq!(not_modified(Some(r#""v0""#), "v1"), Ok(false));
        assert_eq!(not_modified(Some("*"), "v1"), Ok(true));
        assert_eq!(not_modified(Some("v1"), "v1"), Ok(true));
    }

    #[test]
    fn content_is_capped_in_characters_and_refuses_nul() {
        assert_eq!(validate(&"a".repeat(MAX_CHARS)), Ok(()));
        assert_eq!(validate(&"a".repeat(MAX_CHARS + 1)), Err(ContentError::TooLarge(MAX_CHARS + 1)));
        // Two bytes a character: the cap counts characters, as the spec's maxLength does.
        assert_eq!(validate(&"é".repeat(MAX_CHARS)), Ok(()));
        assert_eq!(validate(&"é".repeat(MAX_CHARS + 1)), Err(ContentError::TooLarge(MAX_CHARS + 1)));
        assert_eq!(validate("a\0b"), Err(ContentError::Nul));
    }
}
