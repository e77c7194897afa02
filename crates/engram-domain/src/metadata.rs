//! The free-form `metadata` that conversations and messages carry: a JSON object of
//! bounded size. Its own module, so that `conversation` and `message` both use it and
//! neither uses the other for it.

use serde::Serialize;

/// Largest serialized `metadata` of a conversation or a message: room for a client's
/// bookkeeping, not a second content field.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;

/// `metadata` must be a JSON object of at most [`MAX_METADATA_BYTES`].
pub fn validate_metadata(metadata: Option<&serde_json::Value>) -> Result<(), String> {
    match metadata {
        Some(m) if !m.is_object() => Err("metadata must be a JSON object".into()),
        Some(m) if json_size(m) > MAX_METADATA_BYTES => {
            Err(format!("metadata must be at most {MAX_METADATA_BYTES} bytes of JSON"))
        }
        _ => Ok(()),
    }
}

/// The size of `value` serialized, without building the text.
pub fn json_size(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).map_or(usize::MAX, |()| count.0)
}
