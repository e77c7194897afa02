//! The strict parser of the model's answer: `{"operations": [...]}`, each operation an
//! `add` (a new fact), an `update` (a known fact replaced, by its label) or a `delete` (a
//! known fact no longer true).
//!
//! Strict because anything the parser lets through gets stored as memory about a person: an
//! answer that is not exactly the expected shape is rejected (and the job retried) rather
//! than guessed at. Error messages never quote the model's output, which may hold personal
//! data, since they end up in the job's `last_error`.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::Value;

use super::{Change, ExtractError, ExtractedFact, KnownFact};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    /// Read one by one, so that one wrong entry does not cost the right ones.
    operations: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
/// An operation without its `id`, which [`parse_operations`] reads first.
struct RawOperation {
    op: Op,
    /// Absent or `null` for a `delete`.
    #[serde(default)]
    fact: Option<String>,
    #[serde(default)]
    score: Option<f64>,
    /// `null` is read as "no tags": models use it for an optional field often enough that
    /// failing the whole extraction over it would only cost retries.
    #[serde(default)]
    tags: Option<Vec<String>>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Op {
    Add,
    Update,
    Delete,
}

/// What a valid answer asks for.
#[derive(Debug, Default, PartialEq)]
pub struct Operations {
    /// The new facts.
    pub facts: Vec<ExtractedFact>,
    /// Updates and deletions of `known` facts.
    pub changes: Vec<Change>,
}

/// How an answer ended: at its own end, or cut at the completion limit (`finish_reason`
/// `length`, `stop_reason` `max_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Whole,
    Cut,
}

/// Parses the model's answer; `known` are the facts the prompt listed, which `update` and
/// `delete` name by their label.
///
/// Tolerates surrounding whitespace and one Markdown code fence (` ```json ` or a bare
/// ` ``` `) around the object, because models add those even when told not to; anything
/// else around or inside a whole answer is `Malformed`. What a weak model gets wrong costs
/// only what it got wrong (its answer is salvaged, since rejecting it whole loses the
/// person's memory to one slip):
/// - each operation is checked on its own: one of the wrong shape (a missing field, a
///   score outside [0, 1], an unknown field or `op`, an `add` with an id) is dropped and
///   the others are kept;
/// - an operation that names a fact by anything other than a listed label (another user's
///   fact id, a made up label), or names a fact named before, is dropped, and so are all
///   the answer's updates and deletes: a model that lost track of which facts are whose
///   cannot be trusted with changes to them. Its `add`s stay, since they change no stored
///   fact and are checked against the user's own lines afterwards ([`super::grounding`]);
/// - an answer cut at the completion limit ([`Ending::Cut`]) keeps the operations complete
///   before the cut; the one cut in half is dropped, never stored in part.
///
/// An answer that held operations of which none is usable is `Malformed` (cut before the
/// first one ended: `Truncated`), so that the worker can tell it from an answer that found
/// nothing to remember. (Blank facts pass here and are dropped when facts are kept, like
/// any fact that says nothing.)
pub fn parse_operations(text: &str, known: &[KnownFact], ending: Ending) -> Result<Operations, ExtractError> {
    let entries = match ending {
        Ending::Whole => {
            let json = strip_code_fence(text.trim())?;
            let answer: Answer = serde_json::from_str(json).map_err(|e| {
                ExtractError::Malformed(format!("model output is not the expected JSON ({})", describe_json_error(&e)))
            })?;
            answer.operations
        }
        Ending::Cut => complete_operations(text).ok_or(ExtractError::Truncated)?,
    };
    if entries.is_empty() && ending == Ending::Cut {
        return Err(ExtractError::Truncated);
    }
    let count = entries.len();
    let operations = salvage(entries, known);
    if count > 0 && operations.facts.is_empty() && operations.changes.is_empty() {
        return Err(ExtractError::Malformed(format!("none of the {count} operations is usable")));
    }
    Ok(operations)
}

/// The usable operations among `entries` (see [`parse_operations`]); each one dropped is
/// counted in `engram_llm_operations_dropped_total` by reason.
fn salvage(entries: Vec<Value>, known: &[KnownFact]) -> Operations {
    let mut named = HashSet::new();
    let mut lost_track = false;
    let mut operations = Operations::default();
    for mut entry in entries {
        let label = entry.as_object_mut().and_then(|fields| fields.remove("id")).filter(|id| !id.is_null());
        let index = match label {
            None => None,
            Some(label) => match label.as_str().and_then(|label| known_index(label, known)) {
                Some(index) if named.insert(index) => Some(index),
                _ => {
                    lost_track = true;
                    dropped("unknown_fact", 1);
                    continue;
                }
            },
        };
        let Ok(raw) = serde_json::from_value::<RawOperation>(entry) else {
            dropped("shape", 1);
            continue;
        };
        let score = raw.score.filter(|s| s.is_finite() && (0.0..=1.0).contains(s));
        let fact = raw.fact.zip(score).map(|(fact, score)| ExtractedFact {
            fact,
            score,
            tags: raw.tags.unwrap_or_default(),
            said_in: vec![],
        });
        match (raw.op, index, fact) {
            (Op::Add, None, Some(fact)) => operations.facts.push(fact),
            (Op::Update, Some(i), Some(fact)) => operations.changes.push(Change::Update { id: known[i].id, fact }),
            (Op::Delete, Some(i), _) => operations.changes.push(Change::Delete { id: known[i].id }),
            _ => dropped("shape", 1),
        }
    }
    if lost_track {
        dropped("unknown_fact", operations.changes.len() as u64);
        operations.changes.clear();
    }
    operations
}

fn dropped(reason: &'static str, count: u64) {
    if count > 0 {
        metrics::counter!("engram_llm_operations_dropped_total", "reason" => reason).increment(count);
    }
}

/// The entries of an answer cut at the completion limit that are whole JSON values, in
/// order: the answer must open as `{"operations": [` (inside a code fence or not), and
/// reading stops at the first entry the cut left incomplete. `None` when it does not open
/// so.
fn complete_operations(text: &str) -> Option<Vec<Value>> {
    let text = text.trim_start();
    let text = match text.strip_prefix("```") {
        Some(fenced) => fenced.split_once('\n')?.1,
        None => text,
    };
    let mut rest =
        ["{", "\"operations\"", ":", "["].iter().try_fold(text, |rest, token| rest.trim_start().strip_prefix(token))?;
    let mut entries = Vec::new();
    loop {
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        let Some(Ok(entry)) = values.next() else { break };
        entries.push(entry);
        match rest[values.byte_offset()..].trim_start().strip_prefix(',') {
            Some(next) => rest = next,
            None => break,
        }
    }
    Some(entries)
}

/// The position in `known` of the fact a label (`f1` is the first) names.
fn known_index(label: &str, known: &[KnownFact]) -> Option<usize> {
    let digits = label.strip_prefix('f').filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))?;
    let n: usize = digits.parse().ok()?;
    (1..=known.len()).contains(&n).then(|| n - 1)
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
    use uuid::Uuid;

    use super::*;

    fn fact(text: &str, score: f64, tags: &[&str]) -> ExtractedFact {
        ExtractedFact {
            fact: text.to_owned(),
            score,
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            said_in: vec![],
        }
    }

    fn known() -> Vec<KnownFact> {
        ["Lives in Lyon", "Likes jazz", "Has a dog"]
            .iter()
            .enumerate()
            .map(|(i, text)| KnownFact { id: Uuid::from_u128(100 + i as u128), text: (*text).to_owned() })
            .collect()
    }

    fn facts(text: &str) -> Result<Vec<ExtractedFact>, ExtractError> {
        parse_operations(text, &[], Ending::Whole).map(|ops| {
            assert!(ops.changes.is_empty());
            ops.facts
        })
    }

    #[test]
    fn accepts_the_expected_object() {
        let facts = facts(
            r#"{"operations": [{"op": "add", "id": null, "fact": "Name is Alice", "score": 0.95, "tags": ["identity"]},
                               {"op": "add", "fact": "Prefers tea over coffee", "score": 1}]}"#,
        )
        .expect("valid answer");
        assert_eq!(facts, vec![fact("Name is Alice", 0.95, &["identity"]), fact("Prefers tea over coffee", 1.0, &[]),]);
    }

    #[test]
    fn updates_and_deletes_name_known_facts_by_label() {
        let known = known();
        let ops = parse_operations(
            r#"{"operations": [{"op": "update", "id": "f1", "fact": "Lives in Paris", "score": 0.9, "tags": []},
                               {"op": "delete", "id": "f3", "fact": null, "score": null, "tags": []},
                               {"op": "add", "id": null, "fact": "Has a cat", "score": 0.8, "tags": []}]}"#,
            &known,
            Ending::Whole,
        )
        .expect("valid answer");
        assert_eq!(ops.facts, vec![fact("Has a cat", 0.8, &[])]);
        assert_eq!(
            ops.changes,
            vec![
                Change::Update { id: known[0].id, fact: fact("Lives in Paris", 0.9, &[]) },
                Change::Delete { id: known[2].id }
            ]
        );
    }

    #[test]
    fn an_id_that_is_not_a_listed_label_drops_the_changes_and_keeps_the_adds() {
        let known = known();
        let foreign = Uuid::from_u128(7).to_string();
        for id in [foreign.as_str(), "f4", "f0", "f", "f+1", "1", "F1", "f1 "] {
            let answer = format!(
                r#"{{"operations": [{{"op": "add", "fact": "Has a cat", "score": 0.8}},
                                   {{"op": "update", "id": "f1", "fact": "Lives in Rome", "score": 0.9}},
                                   {{"op": "delete", "id": "{id}"}}]}}"#
            );
            let ops = parse_operations(&answer, &known, Ending::Whole).unwrap_or_else(|e| panic!("{id}: {e}"));
            assert_eq!(ops.facts, vec![fact("Has a cat", 0.8, &[])], "{id}");
            assert!(ops.changes.is_empty(), "{id}: a model that named {id:?} changes nothing: {:?}", ops.changes);
        }
        // Alone, even on an entry otherwise of the wrong shape, and as a number: nothing usable.
        for entry in [r#"{"op": "add", "id": 5, "fact": "x", "score": 0.9}"#, r#"{"op": "nap", "id": "f9"}"#] {
            let answer = format!(r#"{{"operations": [{entry}]}}"#);
            let error = parse_operations(&answer, &known, Ending::Whole).expect_err(entry);
            assert!(matches!(&error, ExtractError::Malformed(m) if m.contains("none of the 1")), "{entry}: {error}");
        }
    }

    #[test]
    fn one_fact_named_twice_drops_the_changes_and_keeps_the_adds() {
        let ops = parse_operations(
            r#"{"operations": [{"op": "update", "id": "f2", "fact": "Loves jazz", "score": 0.9},
                               {"op": "add", "fact": "Has a cat", "score": 0.8},
                               {"op": "delete", "id": "f2"}]}"#,
            &known(),
            Ending::Whole,
        )
        .expect("the add is kept");
        assert_eq!(ops, Operations { facts: vec![fact("Has a cat", 0.8, &[])], changes: vec![] });
    }

    #[test]
    fn an_unknown_operation_drops_itself_not_the_answer() {
        let known = known();
        let ops = parse_operations(
            r#"{"operations": [{"op": "remember", "fact": "Has a cat", "score": 0.8},
                               {"op": "delete", "id": "f3", "fact": null, "score": null, "tags": []},
                               {"op": "add", "fact": "Speaks Welsh", "score": 0.9, "tags": []}]}"#,
            &known,
            Ending::Whole,
        )
        .expect("the right operations are kept");
        assert_eq!(ops.facts, vec![fact("Speaks Welsh", 0.9, &[])]);
        assert_eq!(ops.changes, vec![Change::Delete { id: known[2].id }]);
    }

    #[test]
    fn a_cut_answer_keeps_the_operations_complete_before_the_cut() {
        let known = known();
        let whole = r#"{"operations": [{"op": "add", "id": null, "fact": "Carves spoons", "score": 0.9, "tags": ["hobby"]}, {"op": "delete", "id": "f2", "fact": null, "score": null, "tags": []}, {"op": "add", "id": null, "fact": "Sells spoons at the market", "score": 0.8, "tags": []}]}"#;
        let second_ends = whole.find(r#"[]}, {"op": "add""#).expect("second entry") + 3;
        let third = vec![fact("Carves spoons", 0.9, &["hobby"])];
        for (cut_at, facts, changes) in [
            // Inside the third entry's fact: its first half is never stored.
            (whole.find("at the market").expect("third fact"), third.clone(), 1),
            // Right after the second entry, before and after its comma.
            (second_ends, third.clone(), 1),
            (second_ends + 1, third.clone(), 1),
            // Inside the second entry.
            (whole.find("null, \"score\": null").expect("delete") - 3, third.clone(), 0),
            // Whole but for the closing brackets.
            (
                whole.len() - 2,
                vec![fact("Carves spoons", 0.9, &["hobby"]), fact("Sells spoons at the market", 0.8, &[])],
                1,
            ),
        ] {
            let cut = &whole[..cut_at];
            let ops = parse_operations(cut, &known, Ending::Cut).unwrap_or_else(|e| panic!("{cut}: {e}"));
            assert_eq!(ops.facts, facts, "{cut}");
            assert_eq!(ops.changes.len(), changes, "{cut}");
        }
        let fenced = format!("```json\n{}", &whole[..second_ends]);
        assert_eq!(parse_operations(&fenced, &known, Ending::Cut).expect("fenced").facts, third);
    }

    #[test]
    fn a_cut_answer_without_a_complete_operation_is_truncated() {
        for cut in [
            "",
            r#"{"operations": ["#,
            r#"{"operations": [{"op": "add", "fact": "Name is Alice", "sco"#,
            r#"{"facts": [{"op": "add", "fact": "Name is Alice", "score": 0.9}, {"#,
            "Sure! Here is",
        ] {
            let error = parse_operations(cut, &known(), Ending::Cut).expect_err(cut);
            assert!(matches!(error, ExtractError::Truncated), "{cut}: {error:?}");
        }
        // Complete entries, none usable: as malformed as the whole answer would be.
        let error =
            parse_operations(r#"{"operations": [{"op": "add", "fact": "x", "score": 9}, {"op"#, &known(), Ending::Cut)
                .expect_err("nothing usable");
        assert!(matches!(error, ExtractError::Malformed(_)), "{error:?}");
    }

    #[test]
    fn keeps_the_right_entries_of_a_partly_wrong_answer() {
        let known = known();
        let ops = parse_operations(
            r#"{"operations": [{"op": "add", "fact": "Lives in Oslo", "score": 0.9},
                               {"op": "add", "fact": "Likes jazz", "score": 7},
                               {"op": "add", "fact": "Has a cat"},
                               {"op": "add", "text": "Is a nurse", "score": 0.8},
                               {"op": "add", "id": "f1", "fact": "Lives in Oslo", "score": 0.9},
                               {"op": "update", "fact": "Lives in Rome", "score": 0.9},
                               {"op": "update", "id": "f2", "score": 0.9},
                               {"op": "remove", "fact": "x", "score": 0.9},
                               "Plays chess",
                               {"op": "add", "fact": "Speaks Norwegian", "score": 0.85, "tags": ["language"]}]}"#,
            &known,
            Ending::Whole,
        )
        .expect("the right entries are kept");
        assert_eq!(ops.facts, vec![fact("Lives in Oslo", 0.9, &[]), fact("Speaks Norwegian", 0.85, &["language"])]);
        assert!(ops.changes.is_empty(), "{:?}", ops.changes);
    }

    #[test]
    fn an_answer_with_no_right_entry_is_malformed() {
        let error = facts(r#"{"operations": [{"op": "add", "fact": "Likes jazz", "score": 2}, {"name": "x"}]}"#)
            .expect_err("wrong");
        assert!(matches!(&error, ExtractError::Malformed(m) if m.contains("none of the 2")), "{error}");
    }

    #[test]
    fn accepts_an_empty_list() {
        assert_eq!(
            parse_operations(r#"{"operations": []}"#, &known(), Ending::Whole).expect("valid answer"),
            Operations::default()
        );
    }

    #[test]
    fn accepts_surrounding_whitespace_and_one_code_fence() {
        let body = r#"{"operations": [{"op": "add", "fact": "Likes jazz", "score": 0.8}]}"#;
        for text in [
            format!("\n  {body}  \n"),
            format!("```json\n{body}\n```"),
            format!("  ```JSON\n{body}```\n"),
            format!("```\n{body}\n```"),
        ] {
            let facts = facts(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(facts, vec![fact("Likes jazz", 0.8, &[])], "{text:?}");
        }
    }

    #[test]
    fn null_tags_mean_no_tags() {
        let facts = facts(r#"{"operations": [{"op": "add", "fact": "Likes jazz", "score": 0.8, "tags": null}]}"#)
            .expect("valid answer");
        assert_eq!(facts, vec![fact("Likes jazz", 0.8, &[])]);
    }

    #[test]
    fn a_blank_fact_is_no_malformed_answer() {
        // Kept as given: `extracted::select` and `extracted::revisions` drop what says nothing.
        let ops =
            parse_operations(r#"{"operations": [{"op": "add", "fact": "  ", "score": 0.9}]}"#, &known(), Ending::Whole)
                .expect("valid answer");
        assert_eq!(ops.facts, vec![fact("  ", 0.9, &[])]);
    }

    #[test]
    fn rejects_everything_else_without_quoting_the_output() {
        let cases = [
            "",
            "Alice",
            "Sure! {\"operations\": [{\"op\": \"add\", \"fact\": \"Name is Alice\", \"score\": 0.9}]}",
            "{\"operations\": [{\"op\": \"add\", \"fact\": \"Name is Alice\", \"score\": 0.9}]} Alice",
            "[{\"op\": \"add\", \"fact\": \"Name is Alice\", \"score\": 0.9}]",
            "{\"facts\": [{\"fact\": \"Name is Alice\", \"score\": 0.9}]}",
            "{\"operations\": \"Alice\"}",
            "{\"operations\": [\"Name is Alice\"]}",
            "{\"operations\": [{\"op\": \"add\", \"fact\": \"Name is Alice\"}]}",
            "{\"operations\": [{\"op\": \"add\", \"fact\": \"Name is Alice\", \"score\": \"Alice\"}]}",
            "{\"operations\": [{\"op\": \"add\", \"fact\": \"Name is Alice\", \"score\": 1.5}]}",
            "{\"operations\": [{\"op\": \"add\", \"fact\": \"Name is Alice\", \"score\": -0.1}]}",
            "{\"operations\": [{\"op\": \"add\", \"fact\": \"Name is Alice\", \"score\": 0.9, \"Alice\": 1}]}",
            "{\"operations\": [{\"op\": \"Alice\", \"fact\": \"Name is Alice\", \"score\": 0.9}]}",
            "{\"operations\": [{\"op\": \"add\", \"fact\": \"Name is Alice\", \"score\": 0.9, \"tags\": [\"Alice\", 1]}]}",
            "{\"operations\": [{\"op\": \"delete\", \"id\": \"Alice\"}]}",
            "{\"operations\": [], \"Alice\": true}",
            "{\"operations\": [], \"operations\": [{\"op\": \"add\", \"fact\": \"Name is Alice\", \"score\": 0.9}]}",
            "{\"operations\": [{\"op\": \"add\", \"fact\": \"Name is Alice\", \"score\": 0.9}]",
            "```json {\"operations\": [{\"op\": \"add\", \"fact\": \"Name is Alice\", \"score\": 0.9}]}```",
            "```python\n{\"operations\": []}\n```",
            "```json\n{\"operations\": []}\n",
            "```json\n{\"operations\": []}\n```\n```json\n{\"operations\": []}\n```",
        ];
        for text in cases {
            match parse_operations(text, &known(), Ending::Whole) {
                Err(error @ ExtractError::Malformed(_)) => {
                    assert!(!error.to_string().contains("Alice"), "{text:?} leaked: {error}");
                }
                other => panic!("{text:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn json_errors_are_described_by_kind_and_position() {
        let error = facts("{\"operations\": \"Alice\"}").expect_err("wrong shape");
        assert_eq!(
            error.to_string(),
            "malformed model output: model output is not the expected JSON (data error at line 1 column 22)"
        );
    }
}
