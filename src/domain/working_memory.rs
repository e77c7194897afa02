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

/// The most a document may hold, in UTF-8 bytes: a page an agent keeps in its prompt
/// (about 8 000 tokens), not a store for files.
pub const MAX_BYTES: usize = 32 * 1024;

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
    /// The whole new document (it replaces the old one); at most 32 KiB of UTF-8, no NUL.
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
            ContentError::TooLarge(bytes) => {
                write!(f, "working memory is {bytes} bytes, over the limit of {MAX_BYTES} bytes")
            }
        }
    }
}

/// Checks a document before it is stored.
pub fn validate(content: &str) -> Result<(), ContentError> {
    if content.contains('\0') {
        return Err(ContentError::Nul);
    }
    if content.len() > MAX_BYTES {
        return Err(ContentError::TooLarge(content.len()));
    }
    Ok(())
}

/// What a write or delete requires of the stored version, from the request's
/// `If-Match` / `If-None-Match` headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// No header: write whatever is there (or create).
    Always,
    /// `If-Match: "a", "b"`: only while the stored version is one of these.
    Matches(Vec<String>),
    /// `If-Match: *`: only while a document exists.
    Exists,
    /// `If-None-Match: *`: only when there is no document yet (create, never replace).
    Absent,
}

impl Condition {
    /// The condition the headers state. Both at once, a weak tag (`W/"…"`: a strong
    /// comparison never matches one, so it is a client's mistake) or anything that is
    /// not an entity tag is a 400 message; `If-None-Match` with tags is for reads
    /// ([`not_modified`]), so on a write it is refused too.
    pub fn parse(if_match: Option<&str>, if_none_match: Option<&str>) -> Result<Condition, String> {
        match (if_match, if_none_match) {
            (Some(_), Some(_)) => Err("send If-Match or If-None-Match, not both".into()),
            (None, None) => Ok(Condition::Always),
            (Some(value), None) => match trim(value) {
                "*" => Ok(Condition::Exists),
                _ => Ok(Condition::Matches(list(value, "If-Match", false)?)),
            },
            (None, Some(value)) => match trim(value) {
                "*" => Ok(Condition::Absent),
                _ => Err("on a write, If-None-Match takes only `*` (create, never replace)".into()),
            },
        }
    }

    /// Whether a write may go ahead over `current` (the stored version, if any).
    pub fn allows(&self, current: Option<&str>) -> bool {
        match (self, current) {
            (Condition::Always, _) => true,
            (Condition::Matches(tags), Some(current)) => tags.iter().any(|tag| tag == current),
            (Condition::Exists, current) => current.is_some(),
            (Condition::Absent, current) => current.is_none(),
            (Condition::Matches(_), None) => false,
        }
    }
}

/// Whether a read's `If-None-Match` names the stored version (`*` names any): the
/// answer is then 304 with no body. A malformed header is a 400 message.
pub fn not_modified(if_none_match: Option<&str>, current: &str) -> Result<bool, String> {
    let Some(value) = if_none_match else { return Ok(false) };
    if trim(value) == "*" {
        return Ok(true);
    }
    // A read compares weakly (RFC 9110 §13.1.2): `W/"x"` names the version `x`.
    let tags = list(value, "If-None-Match", true)?;
    Ok(tags.iter().any(|tag| tag == current))
}

/// Optional whitespace (RFC 9110 §5.6.3) around a header value or a list's comma.
fn trim(value: &str) -> &str {
    value.trim_matches([' ', '\t'])
}

/// Parses `"a", W/"b"` into the tags' values, exactly as RFC 9110 §8.8.3 writes an
/// entity tag (quoted, of visible ASCII but the quote; it may hold a comma, so the list
/// is scanned, not split) and as the spec's pattern states, so what the spec calls
/// malformed is refused. `weak_ok`: a weak tag counts as its value (reads) instead of
/// being refused (writes).
fn list(value: &str, header: &str, weak_ok: bool) -> Result<Vec<String>, String> {
    let malformed = || format!("{header} must be `*` or a list of quoted entity tags, such as \"…\"");
    let mut tags = Vec::new();
    let mut rest = trim(value);
    loop {
        let (weak, quoted) = match rest.strip_prefix("W/") {
            Some(after) => (true, after),
            None => (false, rest),
        };
        let (tag, after) = quoted.strip_prefix('"').and_then(|open| open.split_once('"')).ok_or_else(malformed)?;
        if !tag.bytes().all(|b| b == b'!' || (b'#'..=b'~').contains(&b)) {
            return Err(malformed());
        }
        if weak && !weak_ok {
            return Err(format!("{header} takes strong entity tags: a weak one (W/\"…\") never matches a write"));
        }
        tags.push(tag.to_owned());
        let after = after.trim_start_matches([' ', '\t']);
        if after.is_empty() {
            return Ok(tags);
        }
        rest = after.strip_prefix(',').ok_or_else(malformed)?.trim_start_matches([' ', '\t']);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse_to_conditions() {
        assert_eq!(Condition::parse(None, None), Ok(Condition::Always));
        assert_eq!(Condition::parse(Some("*"), None), Ok(Condition::Exists));
        assert_eq!(Condition::parse(None, Some(" * ")), Ok(Condition::Absent));
        assert_eq!(Condition::parse(Some(r#""a", "b""#), None), Ok(Condition::Matches(vec!["a".into(), "b".into()])));
        // A tag may hold a comma; whitespace around the value and the commas is optional.
        assert_eq!(
            Condition::parse(Some(" \"a,b\"\t,\"\" "), None),
            Ok(Condition::Matches(vec!["a,b".into(), "".into()]))
        );
        for (if_match, if_none_match) in [
            (Some("a"), None),
            (Some(r#"W/"a""#), None),
            (Some(r#""a"b""#), None),
            (Some(r#""a"#), None),
            (Some(r#""a b""#), None),
            (Some(r#""a",,"b""#), None),
            (Some(r#""a","#), None),
            (Some(r#""a" "b""#), None),
            (Some(""), None),
            (Some(" , "), None),
            (None, Some(r#""a""#)),
            (Some("*"), Some("*")),
        ] {
            assert!(Condition::parse(if_match, if_none_match).is_err(), "{if_match:?} {if_none_match:?}");
        }
    }

    #[test]
    fn conditions_decide_on_the_stored_version() {
        let matches = Condition::Matches(vec!["v1".into()]);
        assert!(matches.allows(Some("v1")));
        assert!(!matches.allows(Some("v2")));
        assert!(!matches.allows(None));
        assert!(Condition::Exists.allows(Some("v2")) && !Condition::Exists.allows(None));
        assert!(Condition::Absent.allows(None) && !Condition::Absent.allows(Some("v1")));
        assert!(Condition::Always.allows(None) && Condition::Always.allows(Some("v1")));
    }

    #[test]
    fn reads_compare_weakly() {
        assert_eq!(not_modified(None, "v1"), Ok(false));
        assert_eq!(not_modified(Some(r#"W/"v1""#), "v1"), Ok(true));
        assert_eq!(not_modified(Some(r#""v0", "v1""#), "v1"), Ok(true));
        assert_eq!(not_modified(Some(r#""v0""#), "v1"), Ok(false));
        assert_eq!(not_modified(Some("*"), "v1"), Ok(true));
        assert!(not_modified(Some("v1"), "v1").is_err());
    }

    #[test]
    fn content_is_capped_in_bytes_and_refuses_nul() {
        assert_eq!(validate(&"a".repeat(MAX_BYTES)), Ok(()));
        assert_eq!(validate(&"a".repeat(MAX_BYTES + 1)), Err(ContentError::TooLarge(MAX_BYTES + 1)));
        // Two bytes a character: the cap counts bytes, not characters.
        assert!(matches!(validate(&"é".repeat(MAX_BYTES / 2 + 1)), Err(ContentError::TooLarge(_))));
        assert_eq!(validate("a\0b"), Err(ContentError::Nul));
    }
}
