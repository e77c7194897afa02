//! Identifiers that come from clients, parsed once at the edge so that an invalid one
//! cannot exist past it (inner code never re-validates).

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An agent's id: 1–128 characters of `[A-Za-z0-9._:-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(try_from = "String", into = "String")]
#[schema(value_type = String, pattern = "^[A-Za-z0-9._:-]{1,128}$", min_length = 1, max_length = 128, example = "support-bot")]
pub struct AgentId(String);

/// Whether `value` is 1–128 characters of `[A-Za-z0-9._:-]`: an agent id, and a
/// conversation key (which a framework often builds from ids like it).
fn is_id_text(value: &str) -> bool {
    let valid_chars = value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    !value.is_empty() && value.len() <= 128 && valid_chars
}

impl AgentId {
    pub fn parse(value: String) -> Result<Self, String> {
        if !is_id_text(&value) {
            return Err("agent_id must be 1-128 characters of [A-Za-z0-9._:-]".into());
        }
        Ok(AgentId(value))
    }
}

/// A client's own name for a conversation (`conversationId`, `session_id`…), unique per
/// tenant and agent: the same charset and length as an agent id. It may be built from
/// the end user's id, so its `Debug` is redacted like [`ExternalRef`]'s.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(try_from = "String", into = "String")]
#[schema(value_type = String, pattern = "^[A-Za-z0-9._:-]{1,128}$", min_length = 1, max_length = 128, example = "thread-42")]
pub struct ConversationKey(String);

impl ConversationKey {
    pub fn parse(value: String) -> Result<Self, String> {
        if !is_id_text(&value) {
            return Err("key must be 1-128 characters of [A-Za-z0-9._:-]".into());
        }
        Ok(ConversationKey(value))
    }
}

/// The end user's id on the caller's channel: 1–256 bytes of printable UTF-8 (no control
/// character: U+0000–U+001F, U+007F–U+009F). Personal data: never logged.
///
/// JSON Schema counts characters, not bytes: `maxLength` bounds the characters, and
/// a value of multi-byte characters must also stay within 256 bytes of UTF-8.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(try_from = "String", into = "String")]
#[schema(
    value_type = String,
    pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
    min_length = 1,
    max_length = 256,
    example = "whatsapp:+33612345678"
)]
pub struct ExternalRef(String);

impl ExternalRef {
    pub fn parse(value: String) -> Result<Self, String> {
        if value.is_empty() || value.len() > 256 || value.chars().any(char::is_control) {
            return Err("external_ref must be 1-256 bytes of printable UTF-8".into());
        }
        Ok(ExternalRef(value))
    }
}

/// The tenant, as named by the verified token's `tenant` claim (1–256 bytes) and
/// nowhere else: only the authenticator makes one from a request, so a handler cannot
/// hand the store a tenant a client chose.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(String);

impl TenantId {
    pub fn parse(value: String) -> Result<Self, String> {
        if value.is_empty() || value.len() > 256 {
            return Err("tenant must be 1-256 bytes".into());
        }
        Ok(TenantId(value))
    }
}

macro_rules! string_newtype_conversions {
    ($($name:ident),*) => {$(
        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(value: String) -> Result<Self, String> {
                Self::parse(value)
            }
        }
        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    )*};
}
string_newtype_conversions!(AgentId, ConversationKey, ExternalRef, TenantId);

/// A redacted `Debug`, so that a stray `{:?}` in a log line cannot leak who the user is.
macro_rules! redacted_debug {
    ($($name:ident),*) => {$(
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($name), "(***)"))
            }
        }
    )*};
}
redacted_debug!(ConversationKey, ExternalRef);

/// Typed ids read straight from a row: a column holding an agent id, an external ref or
/// a tenant decodes into the id type through the same `parse` that guards the API, so a
/// corrupt value is a decode error rather than an id that could not exist. (The impls
/// live with the types, which the store's crate cannot extend.)
mod rows {
    use sqlx_core::{database::Database, decode::Decode, error::BoxDynError, types::Type};

    use super::{AgentId, ExternalRef, TenantId};

    /// Text columns whose values parse into `$id`.
    macro_rules! text_id {
        ($($id:ty),*) => {$(
            impl<DB: Database> Type<DB> for $id
            where
                String: Type<DB>,
            {
                fn type_info() -> DB::TypeInfo {
                    <String as Type<DB>>::type_info()
                }

                fn compatible(ty: &DB::TypeInfo) -> bool {
                    <String as Type<DB>>::compatible(ty)
                }
            }

            impl<'r, DB: Database> Decode<'r, DB> for $id
            where
                String: Decode<'r, DB>,
            {
                fn decode(value: <DB as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
                    Ok(<$id>::parse(String::decode(value)?)?)
                }
            }
        )*};
    }

    text_id!(AgentId, ExternalRef, TenantId);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_ids_follow_the_contract() {
        for ok in ["a", "support-bot", "team.bot:v2_1", &"x".repeat(128)] {
            assert!(AgentId::parse(ok.to_string()).is_ok(), "{ok}");
        }
        for bad in ["", "a/b", "a b", "é", &"x".repeat(129), "a?b"] {
            assert!(AgentId::parse(bad.to_string()).is_err(), "{bad}");
        }
    }

    #[test]
    fn conversation_keys_follow_the_agent_id_rules() {
        for ok in ["k", "user-1:support-bot", &"x".repeat(128)] {
            assert!(ConversationKey::parse(ok.to_string()).is_ok(), "{ok}");
        }
        for bad in ["", "a/b", "a b", "é", &"x".repeat(129)] {
            assert!(ConversationKey::parse(bad.to_string()).is_err(), "{bad}");
        }
        assert!(!format!("{:?}", ConversationKey::parse("alice".into()).unwrap()).contains("alice"));
    }

    #[test]
    fn external_refs_are_printable_and_bounded() {
        for ok in ["u1", "whatsapp:+33 6 12", "élodie@example.com", &"x".repeat(256)] {
            assert!(ExternalRef::parse(ok.to_string()).is_ok(), "{ok}");
        }
        for bad in ["", "a\nb", "tab\there", "\u{7f}", &"x".repeat(257)] {
            assert!(ExternalRef::parse(bad.to_string()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn external_ref_debug_is_redacted() {
        let r = ExternalRef::parse("alice@example.com".into()).unwrap();
        assert!(!format!("{r:?}").contains("alice"));
    }
}
