//! The NUL character (U+0000) in what a client sends, refused wherever it enters: as a
//! raw byte or as the JSON escape `\u0000`, in any string or key at any depth.
//! PostgreSQL cannot store it in `text` or `jsonb` (a write fails there, while SQLite
//! stores it), so both backends refuse it alike, before anything is written.

/// What a refusal says.
pub const REFUSED: &str = "text must not contain the NUL character (U+0000)";

/// True when `json` holds a NUL byte or the escape `\u0000`. Escapes are read in order,
/// so `\\u0000` — a backslash, then the text `u0000` — does not count.
pub fn in_json(json: &[u8]) -> bool {
    let mut i = 0;
    while i < json.len() {
        match json[i] {
            0 => return true,
            b'\\' => {
                if json.get(i + 1) == Some(&b'u') && json.get(i + 2..i + 6) == Some(b"0000".as_slice()) {
                    return true;
                }
                i += 2;
            }
            _ => i += 1,
        }
    }
    false
}

/// True when an `application/x-www-form-urlencoded` body holds a NUL byte or `%00`.
pub fn in_form(form: &[u8]) -> bool {
    form.contains(&0) || form.windows(3).any(|w| w == b"%00")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_is_found_raw_or_as_an_escape_only() {
        assert!(in_json(br#"{"a":"x\u0000y"}"#));
        assert!(in_json(br#"{"\u0000":1}"#));
        assert!(in_json(br#"{"a":{"b":["\u0000"]}}"#));
        assert!(in_json(b"{\"a\":\"x\0y\"}"));
        assert!(!in_json(br#"{"a":"x\\u0000y"}"#));
        assert!(in_json(br#"{"a":"x\\\u0000"}"#));
        assert!(in_json(br#"{"a":"\u00001"}"#));
        assert!(!in_json(br#"{"a":"\u0001"}"#));
        assert!(!in_json(b"\\"));
    }

    #[test]
    fn nul_is_found_in_a_form() {
        assert!(in_form(b"csrf=x&fact=a%00b"));
        assert!(in_form(b"fact=a\0b"));
        assert!(!in_form(b"fact=a%2500b&n=100"));
    }
}
