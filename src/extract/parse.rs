//! The strict parser of the model's answer, `{"facts": [{"fact", "score", "tags"?}]}`.
//!
//! Strict because anything the parser lets through gets stored as memory about a person: an
//! answer that is not exactly the expected shape is rejected (and the job retried) rather
//! than guessed at. Error messages never quote the model's output, which may hold personal
//! data, since they end up in the job's `last_error`.

use serde::Deserialize;

use super::{ExtractError, ExtractedFact};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    /// Read one by one, so that one wrong entry does not cost the right ones.
    facts: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFact {
    fact: String,
    score: f64,
    /// `null` is read as "no tags": models use it for an optional field often enough that
    /// failing the whole extraction over it would only cost retries.
    #[serde(default)]
    tags: Option<Vec<String>>,
}

/// Parses the model's answer into facts.
///
/// Tolerates surrounding whitespace and one Markdown code fence (` ```json ` or a bare
/// ` ``` `) around the object, because models add those even when told not to; anything
/// else around or inside the object is `Malformed`. Each entry of `facts` is checked on its
/// own: one of the wrong shape (a missing field, a score outside [0, 1], an unknown field)
/// is dropped and the others are kept, since small models often get one entry wrong. An
/// answer none of whose entries is right is `Malformed`. Facts whose text is blank are
/// dropped: they carry nothing to store.
pub fn parse_facts(text: &str) -> Result<Vec<ExtractedFact>, ExtractError> {
    let json = strip_code_fence(text.trim())?;
    let answer: Answer = serde_json::from_str(json).map_err(|e| {
        ExtractError::Malformed(format!("model output is not the expected JSON ({})", describe_json_error(&e)))
    })?;
    let entries = answer.facts.len();
    let valid: Vec<RawFact> = answer
        .facts
        .into_iter()
        .filter_map(|entry| serde_json::from_value::<RawFact>(entry).ok())
        .filter(|raw| raw.score.is_finite() && (0.0..=1.0).contains(&raw.score))
        .collect();
    if entries > 0 && valid.is_empty() {
        return Err(ExtractError::Malformed(format!("none of the {entries} facts has the expected shape")));
    }
    Ok(valid
        .into_iter()
        .filter(|raw| !raw.fact.trim().is_empty())
        .map(|raw| ExtractedFact { fact: raw.fact, score: raw.score, tags: raw.tags.unwrap_or_default() })
        .collect())
}

/// Where and what kind of JSON error occurred, without serde_json's own message: that one can
/// quote values from the input (`invalid type: string "Alice"`), which may be personal data.
pub(super) fn describe_json_error(error: &serde_json::Error) -> String {
    let kind = match error.classify() {
        serde_json::error::Category::Io => "read error",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "data error",
        serde_json::error::Category::Eof => "unexpected end of input",
    };
    format!("{kind} at line {} column {}", error.line(), error.column())
}

/// Returns the inside of a single fenced block, or the text itself when it is not fenced.
fn strip_code_fence(text: &str) -> Result<&str, ExtractError> {
    let Some(after_open) = text.strip_prefix("```") else {
        return Ok(text);
    };
    let malformed = || ExtractError::Malformed("model output has an unexpected code fence".into());
    let (info, body) = after_open.split_once('\n').ok_or_else(malformed)?;
    let info = info.trim();
    if !(info.is_empty() || info.eq_ignore_ascii_case("json")) {
        return Err(malformed());
    }
    // A second block or text after the fence leaves backticks inside `body`, which the JSON
    // parser then rejects.
    body.strip_suffix("```").ok_or_else(malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(text: &str, score: f64, tags: &[&str]) -> ExtractedFact {
        ExtractedFact { fact: text.to_owned(), score, tags: tags.iter().map(|t| (*t).to_owned()).collect() }
    }

    #[test]
    fn accepts_the_expected_object() {
        let facts = parse_facts(
            r#"{"facts": [{"fact": "Name is Alice", "score": 0.95, "tags": ["identity"]},
                          {"fact": "Prefers tea over coffee", "score": 1}]}"#,
        )
        .expect("valid answer");
        assert_eq!(facts, vec![fact("Name is Alice", 0.95, &["identity"]), fact("Prefers tea over coffee", 1.0, &[]),]);
    }

    #[test]
    fn keeps_the_right_entries_of_a_partly_wrong_answer() {
        let facts = parse_facts(
            r#"{"facts": [{"fact": "Lives in Oslo", "score": 0.9},
                          {"fact": "Likes jazz", "score": 7},
                          {"fact": "Has a cat"},
                          {"text": "Is a nurse", "score": 0.8},
                          "Plays chess",
                          {"fact": "Speaks Norwegian", "score": 0.85, "tags": ["language"]}]}"#,
        )
        .expect("the right entries are kept");
        assert_eq!(facts, vec![fact("Lives in Oslo", 0.9, &[]), fact("Speaks Norwegian", 0.85, &["language"])]);
    }

    #[test]
    fn an_answer_with_no_right_entry_is_malformed() {
        let error =
            parse_facts(r#"{"facts": [{"fact": "Likes jazz", "score": 2}, {"name": "x"}]}"#).expect_err("wrong");
        assert!(matches!(&error, ExtractError::Malformed(m) if m.contains("none of the 2")), "{error}");
    }

    #[test]
    fn accepts_an_empty_list() {
        assert_eq!(parse_facts(r#"{"facts": []}"#).expect("valid answer"), vec![]);
    }

    #[test]
    fn accepts_surrounding_whitespace_and_one_code_fence() {
        for text in [
            "\n  {\"facts\": [{\"fact\": \"Likes jazz\", \"score\": 0.8}]}  \n",
            "```json\n{\"facts\": [{\"fact\": \"Likes jazz\", \"score\": 0.8}]}\n```",
            "  ```JSON\n{\"facts\": [{\"fact\": \"Likes jazz\", \"score\": 0.8}]}```\n",
            "```\n{\"facts\": [{\"fact\": \"Likes jazz\", \"score\": 0.8}]}\n```",
        ] {
            let facts = parse_facts(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(facts, vec![fact("Likes jazz", 0.8, &[])], "{text:?}");
        }
    }

    #[test]
    fn null_tags_mean_no_tags() {
        let facts =
            parse_facts(r#"{"facts": [{"fact": "Likes jazz", "score": 0.8, "tags": null}]}"#).expect("valid answer");
        assert_eq!(facts, vec![fact("Likes jazz", 0.8, &[])]);
    }

    #[test]
    fn blank_facts_are_dropped() {
        let facts = parse_facts(
            r#"{"facts": [{"fact": "  ", "score": 0.9}, {"fact": "", "score": 0.9},
                          {"fact": "Lives in Oslo", "score": 0.9}]}"#,
        )
        .expect("valid answer");
        assert_eq!(facts, vec![fact("Lives in Oslo", 0.9, &[])]);
    }

    #[test]
    fn rejects_everything_else_without_quoting_the_output() {
        let cases = [
            "",
            "Alice",
            "Sure! {\"facts\": [{\"fact\": \"Name is Alice\", \"score\": 0.9}]}",
            "{\"facts\": [{\"fact\": \"Name is Alice\", \"score\": 0.9}]} Alice",
            "[{\"fact\": \"Name is Alice\", \"score\": 0.9}]",
            "{\"facts\": \"Alice\"}",
            "{\"facts\": [\"Name is Alice\"]}",
            "{\"facts\": [{\"fact\": \"Name is Alice\"}]}",
            "{\"facts\": [{\"fact\": \"Name is Alice\", \"score\": \"Alice\"}]}",
            "{\"facts\": [{\"fact\": \"Name is Alice\", \"score\": 1.5}]}",
            "{\"facts\": [{\"fact\": \"Name is Alice\", \"score\": -0.1}]}",
            "{\"facts\": [{\"fact\": \"Name is Alice\", \"score\": 0.9, \"Alice\": 1}]}",
            "{\"facts\": [{\"fact\": \"Name is Alice\", \"score\": 0.9, \"tags\": [\"Alice\", 1]}]}",
            "{\"facts\": [], \"Alice\": true}",
            "{\"facts\": [], \"facts\": [{\"fact\": \"Name is Alice\", \"score\": 0.9}]}",
            "{\"fact\": \"Name is Alice\", \"score\": 0.9}",
            "{\"facts\": [{\"fact\": \"Name is Alice\", \"score\": 0.9}]",
            "```json {\"facts\": [{\"fact\": \"Name is Alice\", \"score\": 0.9}]}```",
            "```python\n{\"facts\": [{\"fact\": \"Name is Alice\", \"score\": 0.9}]}\n```",
            "```json\n{\"facts\": [{\"fact\": \"Name is Alice\", \"score\": 0.9}]}\n",
            "```json\n{\"facts\": []}\n```\n```json\n{\"facts\": [{\"fact\": \"Name is Alice\", \"score\": 0.9}]}\n```",
        ];
        for text in cases {
            match parse_facts(text) {
                Err(error @ ExtractError::Malformed(_)) => {
                    assert!(!error.to_string().contains("Alice"), "{text:?} leaked: {error}");
                }
                other => panic!("{text:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn json_errors_are_described_by_kind_and_position() {
        let error = parse_facts("{\"facts\": \"Alice\"}").expect_err("wrong shape");
        assert_eq!(
            error.to_string(),
            "malformed model output: model output is not the expected JSON (data error at line 1 column 17)"
        );
    }
}
