//! Replay: [`sanitize`] removes incomplete or malformed tool-call turns, so that a
//! stored conversation (or a window of it) can be sent back to a model provider without
//! being rejected. (A fact's *history* is its versions: `domain::event`.)
//!
//! # Three shapes of tool call
//!
//! Clients store tool calls in the shape their SDK speaks, and a history may
//! mix them; `sanitize` reads all three:
//!
//! | shape | the call (role `assistant`) | its result |
//! |---|---|---|
//! | OpenAI | `tool_calls: [{"id", ...}]` | role `tool` with `tool_call_id` |
//! | AI SDK | content part `{"type": "tool-call", "toolCallId", ...}` | role `tool`, content parts `{"type": "tool-result", "toolCallId", ...}` |
//! | Anthropic | content block `{"type": "tool_use", "id", ...}` | role **`user`**, content blocks `{"type": "tool_result", "tool_use_id", ...}` |
//!
//! A `tool` message with a `tool_call_id` is read as OpenAI's: that id is its
//! one answer and its content is opaque. An AI SDK `tool-call` part marked
//! `providerExecuted: true` is answered by the provider inside the same
//! assistant message, so it asks nothing of the next turn and is not a call
//! here (nor are Anthropic's `server_tool_use` blocks, for the same reason).
//!
//! # The rule
//!
//! OpenAI answers 400 when an assistant message with calls is not
//! *immediately* followed by results answering each call id, or when a result
//! does not answer a preceding call; Anthropic requires the `tool_result`
//! blocks in the very next turn after the `tool_use`, before any text of that
//! turn. The strictest reading of them all is the one used here:
//!
//! * A *tool turn* is an assistant message making at least one call plus its
//!   *answer run*: the messages directly after it that carry results, i.e.
//!   `tool` messages and `user` messages holding `tool_result` blocks. Any
//!   other message (user, assistant, **or system**) ends the run, and so does a
//!   `user` message with anything besides results, after itself (it carries
//!   the person's words; a later result would land after them once Anthropic
//!   merges consecutive user messages). A result after the run, or stored
//!   before its call, answers nothing.
//! * A result *answers* a call if it names one of the turn's calls that has
//!   not been answered yet: the first answer wins. A `tool_result` block
//!   answers only if it comes before every other block of its message, as
//!   Anthropic requires.
//! * The turn is kept only if every call is answered and the call ids are
//!   present and distinct (a repeated id cannot be matched unambiguously).
//!   Otherwise its assistant message is dropped whole, text included (as for
//!   OpenAI), and every result in its run answers nothing.
//! * Results that answer nothing (orphans, duplicates, unknown ids, results of
//!   a dropped turn or outside any turn) are removed:
//!   - a `tool` message is kept only if it still answers a call; an AI SDK one
//!     loses its `tool-result` parts that answer nothing and keeps the rest;
//!   - a `user` message loses its `tool_result` blocks that answer nothing and
//!     keeps everything else, so the person's words survive; one left with no
//!     content at all (it carried only orphan results) is dropped.
//! * Every other message, including an assistant message with an empty
//!   `tool_calls` array, is kept unchanged. Order is never changed.
//!
//! So the output is a subsequence of the input in which some `tool` and
//! `user` messages may have lost result parts (and nothing else), and
//! sanitizing it again changes nothing.

use std::collections::HashSet;

use serde_json::Value;

use super::message::{Message, Role, TOOL_RESULT_BLOCK, part_type};

/// AI SDK's call part, on assistant messages.
const AI_SDK_CALL: &str = "tool-call";
/// AI SDK's result part, on `tool` messages.
const AI_SDK_RESULT: &str = "tool-result";
/// Anthropic's call block, on assistant messages.
const TOOL_USE_BLOCK: &str = "tool_use";

/// Returns `messages` (oldest first) without the tool calls and results that a
/// provider would reject on replay; see the module docs for the exact rule.
///
/// Callers can apply it to any window, at any layer, as often as they like:
/// it keeps order, only removes, and is idempotent.
pub fn sanitize(messages: Vec<Message>) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut rest = messages.into_iter().peekable();

    while let Some(message) = rest.next() {
        let ids = call_ids(&message);
        if ids.is_empty() {
            // Not in the run of a call: any result it carries is an orphan.
            out.extend(keep_answers(message, &mut HashSet::new()));
            continue;
        }
        let calls = distinct(ids);

        let mut run = Vec::new();
        while let Some(next) = rest.next_if(carries_results) {
            let last = ends_run(&next);
            run.push(next);
            if last {
                break;
            }
        }
        let mut pending = match calls {
            Some(calls) if answers_all(&calls, &run) => {
                out.push(message);
                calls
            }
            _ => HashSet::new(),
        };
        out.extend(run.into_iter().filter_map(|m| keep_answers(m, &mut pending)));
    }
    out
}

/// The ids of the calls an assistant message makes, in any of the three
/// shapes; `None` for a call part without a string id, which nothing can
/// answer. Empty for a message that makes no call.
pub(super) fn call_ids(message: &Message) -> Vec<Option<&str>> {
    if message.role != Role::Assistant {
        return Vec::new();
    }
    let openai = message.tool_calls.iter().flatten().map(|call| Some(call.id.as_str()));
    let parts = parts(&message.content).filter_map(|part| match part_type(part) {
        Some(AI_SDK_CALL) if part.get("providerExecuted") != Some(&Value::Bool(true)) => {
            Some(string_field(part, "toolCallId"))
        }
        Some(TOOL_USE_BLOCK) => Some(string_field(part, "id")),
        _ => None,
    });
    openai.chain(parts).collect()
}

/// The calls as a set, or `None` when one has no id or an id repeats.
fn distinct(ids: Vec<Option<&str>>) -> Option<HashSet<String>> {
    let mut calls = HashSet::with_capacity(ids.len());
    for id in ids {
        if !calls.insert(id?.to_owned()) {
            return None;
        }
    }
    Some(calls)
}

/// Whether a message belongs in an answer run (see the module docs).
fn carries_results(message: &Message) -> bool {
    match message.role {
        Role::Tool => true,
        Role::User => parts(&message.content).any(|part| part_type(part) == Some(TOOL_RESULT_BLOCK)),
        _ => false,
    }
}

/// Whether an answer run stops after `message`: a user message that also
/// carries the person's words.
fn ends_run(message: &Message) -> bool {
    message.role == Role::User && parts(&message.content).any(|part| part_type(part) != Some(TOOL_RESULT_BLOCK))
}

/// Where a result sits in its message.
enum Slot {
    /// OpenAI's `tool_call_id`: the message is the result.
    Field,
    /// A content part, by index.
    Part(usize),
}

/// Every result a message carries, in order, with the call id it can answer:
/// `None` when it can answer none (no string id, or a `tool_result` block
/// after other blocks).
fn results(message: &Message) -> Vec<(Slot, Option<&str>)> {
    match message.role {
        Role::Tool => match &message.tool_call_id {
            Some(id) => vec![(Slot::Field, Some(id.as_str()))],
            None => parts(&message.content)
                .enumerate()
                .filter(|(_, part)| part_type(part) == Some(AI_SDK_RESULT))
                .map(|(index, part)| (Slot::Part(index), string_field(part, "toolCallId")))
                .collect(),
        },
        Role::User => {
            let mut leading = true;
            parts(&message.content)
                .enumerate()
                .filter_map(|(index, part)| {
                    let is_result = part_type(part) == Some(TOOL_RESULT_BLOCK);
                    leading &= is_result;
                    let id = if leading { string_field(part, "tool_use_id") } else { None };
                    is_result.then_some((Slot::Part(index), id))
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The call ids a message's results name, in any of the three shapes (what
/// `validate` compares with the stored thread's).
pub(super) fn result_ids(message: &Message) -> Vec<&str> {
    results(message).into_iter().filter_map(|(_, id)| id).collect()
}

/// Whether the run answers every call, counting each result as
/// [`keep_answers`] will.
fn answers_all(calls: &HashSet<String>, run: &[Message]) -> bool {
    let mut pending: HashSet<&str> = calls.iter().map(String::as_str).collect();
    for (_, id) in run.iter().flat_map(results) {
        if let Some(id) = id {
            pending.remove(id);
        }
    }
    pending.is_empty()
}

/// `message` without the results that answer none of the `pending` calls,
/// marking the ones it answers; `None` when nothing of it should be replayed.
fn keep_answers(mut message: Message, pending: &mut HashSet<String>) -> Option<Message> {
    let mut answered = false;
    let mut orphans = Vec::new();
    for (slot, id) in results(&message) {
        if id.is_some_and(|id| pending.remove(id)) {
            answered = true;
        } else if let Slot::Part(index) = slot {
            orphans.push(index);
        }
    }
    if let Value::Array(parts) = &mut message.content
        && !orphans.is_empty()
    {
        // `orphans` is ascending; one pass keeps this linear in the parts.
        let mut orphans = orphans.iter().peekable();
        let mut index = 0;
        parts.retain(|_| {
            let orphan = orphans.next_if_eq(&&index).is_some();
            index += 1;
            !orphan
        });
        if parts.is_empty() {
            return None;
        }
    }
    match message.role {
        Role::Tool => answered.then_some(message),
        _ => Some(message),
    }
}

/// A content's parts; none for string content.
fn parts(content: &Value) -> impl Iterator<Item = &Value> {
    content.as_array().into_iter().flatten()
}

fn string_field<'a>(part: &'a Value, key: &str) -> Option<&'a str> {
    part.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::super::message::ToolCall;
    use super::*;
    use chrono::DateTime;
    use proptest::prelude::*;
    use uuid::Uuid;

    fn msg(seq: i64, role: Role) -> Message {
        Message {
            id: Uuid::from_u128(seq as u128 + 1),
            conversation_id: Uuid::from_u128(0),
            seq,
            role,
            content: serde_json::Value::String(format!("message {seq}")),
            name: None,
            tool_calls: None,
            tool_call_id: None,
            metadata: None,
            created_at: DateTime::UNIX_EPOCH,
        }
    }

    fn user(seq: i64) -> Message {
        msg(seq, Role::User)
    }

    fn assistant(seq: i64) -> Message {
        msg(seq, Role::Assistant)
    }

    fn calling(seq: i64, ids: &[&str]) -> Message {
        let mut m = assistant(seq);
        m.tool_calls = Some(
            ids.iter()
                .map(|id| ToolCall {
                    id: (*id).to_owned(),
                    name: "lookup".to_owned(),
                    arguments: serde_json::json!({}),
                })
                .collect(),
        );
        m
    }

    fn answer(seq: i64, id: &str) -> Message {
        let mut m = msg(seq, Role::Tool);
        m.tool_call_id = Some(id.to_owned());
        m
    }

    fn seqs(messages: &[Message]) -> Vec<i64> {
        messages.iter().map(|m| m.seq).collect()
    }

    #[test]
    fn complete_tool_turn_is_kept() {
        let input = vec![user(1), calling(2, &["a", "b"]), answer(3, "b"), answer(4, "a"), assistant(5)];
        assert_eq!(sanitize(input.clone()), input);
    }

    #[test]
    fn half_answered_call_drops_assistant_and_its_answer() {
        let input = vec![user(1), calling(2, &["a", "b"]), answer(3, "a"), user(4)];
        assert_eq!(seqs(&sanitize(input)), [1, 4]);
    }

    #[test]
    fn orphan_tool_result_is_dropped() {
        let input = vec![user(1), answer(2, "a"), assistant(3)];
        assert_eq!(seqs(&sanitize(input)), [1, 3]);
    }

    #[test]
    fn tool_result_before_its_call_is_dropped() {
        let input = vec![user(1), answer(2, "a"), calling(3, &["a"]), user(4)];
        assert_eq!(seqs(&sanitize(input)), [1, 4]);
    }

    #[test]
    fn window_starting_with_cut_off_results_drops_them() {
        let input = vec![answer(7, "a"), answer(8, "b"), assistant(9), user(10)];
        assert_eq!(seqs(&sanitize(input)), [9, 10]);
    }

    #[test]
    fn empty_tool_calls_is_a_plain_assistant_message() {
        let mut plain = assistant(2);
        plain.tool_calls = Some(Vec::new());
        let input = vec![user(1), plain, user(3)];
        assert_eq!(sanitize(input.clone()), input);
    }

    #[test]
    fn result_after_a_later_user_message_does_not_count() {
        let input = vec![calling(1, &["a"]), user(2), answer(3, "a")];
        assert_eq!(seqs(&sanitize(input)), [2]);
    }

    #[test]
    fn result_after_a_system_message_does_not_count() {
        let input = vec![calling(1, &["a"]), msg(2, Role::System), answer(3, "a")];
        assert_eq!(seqs(&sanitize(input)), [2]);
    }

    #[test]
    fn duplicate_answer_and_unknown_ids_are_dropped_from_a_kept_turn() {
        let mut no_id = msg(5, Role::Tool);
        no_id.tool_call_id = None;
        let input = vec![calling(1, &["a"]), answer(2, "a"), answer(3, "a"), answer(4, "zzz"), no_id, assistant(6)];
        assert_eq!(seqs(&sanitize(input)), [1, 2, 6]);
    }

    #[test]
    fn repeated_call_id_drops_the_turn() {
        let input = vec![calling(1, &["a", "a"]), answer(2, "a"), answer(3, "a")];
        assert!(sanitize(input).is_empty());
    }

    #[test]
    fn call_ids_may_be_reused_by_later_turns() {
        let input = vec![calling(1, &["call_0"]), answer(2, "call_0"), calling(3, &["call_0"]), answer(4, "call_0")];
        assert_eq!(sanitize(input.clone()), input);
    }

    fn parts_msg(seq: i64, role: Role, parts: Value) -> Message {
        let mut m = msg(seq, role);
        m.content = parts;
        m
    }

    fn text(words: &str) -> Value {
        serde_json::json!({"type": "text", "text": words})
    }

    /// An AI SDK assistant message: some text, then a `tool-call` part per id.
    fn sdk_calling(seq: i64, ids: &[&str]) -> Message {
        let mut parts = vec![text("let me check")];
        parts.extend(
            ids.iter().map(
                |id| serde_json::json!({"type": "tool-call", "toolCallId": id, "toolName": "lookup", "input": {}}),
            ),
        );
        parts_msg(seq, Role::Assistant, Value::Array(parts))
    }

    /// An AI SDK tool message (no `tool_call_id`): a `tool-result` part per id.
    fn sdk_results(seq: i64, ids: &[&str]) -> Message {
        let parts = ids.iter().map(|id| {
            serde_json::json!({"type": "tool-result", "toolCallId": id, "toolName": "lookup", "output": {"type": "text", "value": "r"}})
        });
        parts_msg(seq, Role::Tool, Value::Array(parts.collect()))
    }

    /// An Anthropic assistant message: some text, then a `tool_use` block per id.
    fn anthropic_calling(seq: i64, ids: &[&str]) -> Message {
        let mut parts = vec![text("let me check")];
        parts.extend(
            ids.iter().map(|id| serde_json::json!({"type": "tool_use", "id": id, "name": "lookup", "input": {}})),
        );
        parts_msg(seq, Role::Assistant, Value::Array(parts))
    }

    fn tool_result(id: &str) -> Value {
        serde_json::json!({"type": "tool_result", "tool_use_id": id, "content": "r"})
    }

    /// An Anthropic result turn: role `user`, a `tool_result` block per id,
    /// then the person's words if any.
    fn anthropic_results(seq: i64, ids: &[&str], words: Option<&str>) -> Message {
        let mut parts: Vec<Value> = ids.iter().map(|id| tool_result(id)).collect();
        parts.extend(words.map(text));
        parts_msg(seq, Role::User, Value::Array(parts))
    }

    #[test]
    fn ai_sdk_complete_turn_is_kept_even_without_tool_call_id() {
        let input = vec![user(1), sdk_calling(2, &["a", "b"]), sdk_results(3, &["b", "a"]), assistant(4)];
        assert_eq!(sanitize(input.clone()), input);
        let split = vec![sdk_calling(1, &["a", "b"]), sdk_results(2, &["a"]), sdk_results(3, &["b"])];
        assert_eq!(sanitize(split.clone()), split);
    }

    #[test]
    fn ai_sdk_dangling_call_is_dropped_with_its_partial_results() {
        let input = vec![user(1), sdk_calling(2, &["a", "b"]), sdk_results(3, &["a"]), user(4)];
        assert_eq!(seqs(&sanitize(input)), [1, 4]);
    }

    #[test]
    fn ai_sdk_orphan_result_parts_are_removed_from_a_kept_tool_message() {
        let input = vec![sdk_calling(1, &["a"]), sdk_results(2, &["zzz", "a", "a"]), sdk_results(3, &["q"])];
        let out = sanitize(input.clone());
        assert_eq!(seqs(&out), [1, 2]);
        assert_eq!(out[1], sdk_results(2, &["a"]));
    }

    #[test]
    fn ai_sdk_provider_executed_call_needs_no_tool_message() {
        let mut parts = sdk_calling(1, &["a"]).content;
        parts[1]["providerExecuted"] = Value::Bool(true);
        let input = vec![parts_msg(1, Role::Assistant, parts), user(2)];
        assert_eq!(sanitize(input.clone()), input);
    }

    #[test]
    fn call_part_without_an_id_drops_the_turn() {
        let call = parts_msg(1, Role::Assistant, serde_json::json!([{"type": "tool_use", "name": "lookup"}]));
        assert!(sanitize(vec![call, anthropic_results(2, &["a"], None)]).is_empty());
    }

    #[test]
    fn anthropic_complete_turn_is_kept_and_is_not_a_plain_user_message() {
        let input =
            vec![user(1), anthropic_calling(2, &["a", "b"]), anthropic_results(3, &["b", "a"], None), assistant(4)];
        assert_eq!(sanitize(input.clone()), input);
    }

    #[test]
    fn anthropic_dangling_tool_use_is_dropped() {
        let input = vec![user(1), anthropic_calling(2, &["a"]), assistant(3), anthropic_results(4, &["a"], None)];
        assert_eq!(seqs(&sanitize(input)), [1, 3]);
    }

    #[test]
    fn anthropic_message_of_orphan_results_only_is_dropped_whole() {
        let input = vec![user(1), anthropic_results(2, &["a", "b"], None), assistant(3)];
        assert_eq!(seqs(&sanitize(input)), [1, 3]);
    }

    #[test]
    fn anthropic_orphan_results_are_removed_and_the_words_kept() {
        let input = vec![user(1), anthropic_results(2, &["a"], Some("thanks")), assistant(3)];
        let out = sanitize(input);
        assert_eq!(seqs(&out), [1, 2, 3]);
        assert_eq!(out[1].content, serde_json::json!([text("thanks")]));
    }

    #[test]
    fn anthropic_kept_turn_loses_only_its_unknown_and_repeated_results() {
        let input = vec![anthropic_calling(1, &["a"]), anthropic_results(2, &["a", "zzz", "a"], Some("go on"))];
        let out = sanitize(input);
        assert_eq!(seqs(&out), [1, 2]);
        assert_eq!(out[1], anthropic_results(2, &["a"], Some("go on")));
    }

    #[test]
    fn anthropic_result_after_text_answers_nothing() {
        let late = parts_msg(2, Role::User, serde_json::json!([text("here:"), tool_result("a")]));
        let out = sanitize(vec![anthropic_calling(1, &["a"]), late]);
        assert_eq!(seqs(&out), [2]);
        assert_eq!(out[0].content, serde_json::json!([text("here:")]));
    }

    #[test]
    fn anthropic_words_end_the_answer_run() {
        // Merged by Anthropic, `b` would follow the words: it does not count.
        let input = vec![
            anthropic_calling(1, &["a", "b"]),
            anthropic_results(2, &["a"], Some("and")),
            anthropic_results(3, &["b"], None),
        ];
        let out = sanitize(input);
        assert_eq!(seqs(&out), [2]);
        assert_eq!(out[0].content, serde_json::json!([text("and")]));
    }

    #[test]
    fn shapes_mix_in_one_history() {
        let input = vec![
            user(1),
            calling(2, &["a"]),
            answer(3, "a"),
            sdk_calling(4, &["b"]),
            sdk_results(5, &["b"]),
            anthropic_calling(6, &["c"]),
            anthropic_results(7, &["c"], None),
            anthropic_calling(8, &["d"]),
            answer(9, "zzz"),
        ];
        assert_eq!(seqs(&sanitize(input)), [1, 2, 3, 4, 5, 6, 7]);
    }

    /// The calls a provider sees in a message, written independently of
    /// `sanitize`'s helpers.
    fn calls_in(m: &Message) -> Vec<String> {
        if m.role != Role::Assistant {
            return Vec::new();
        }
        let mut ids: Vec<String> = m.tool_calls.iter().flatten().map(|c| c.id.clone()).collect();
        for part in m.content.as_array().into_iter().flatten() {
            match part["type"].as_str() {
                Some("tool-call") if part["providerExecuted"] != true => {
                    ids.push(part["toolCallId"].as_str().expect("generated ids").to_owned())
                }
                Some("tool_use") => ids.push(part["id"].as_str().expect("generated ids").to_owned()),
                _ => {}
            }
        }
        ids
    }

    /// A result's call id; one without an id answers no call.
    fn id_of(id: &Value) -> String {
        id.as_str().unwrap_or("<no id>").to_owned()
    }

    /// The results a provider sees in a message, or why it would refuse them.
    /// `None` for a message that is no tool answer at all.
    fn results_in(m: &Message) -> Option<Result<Vec<String>, String>> {
        let parts = m.content.as_array().into_iter().flatten();
        match m.role {
            Role::Tool if m.tool_call_id.is_some() => Some(Ok(m.tool_call_id.clone().into_iter().collect())),
            Role::Tool => {
                let ids: Vec<String> =
                    parts.filter(|p| p["type"] == "tool-result").map(|p| id_of(&p["toolCallId"])).collect();
                Some(if ids.is_empty() { Err(format!("tool message {} answers nothing", m.seq)) } else { Ok(ids) })
            }
            Role::User => {
                let types: Vec<&str> = parts.clone().map(|p| p["type"].as_str().unwrap_or_default()).collect();
                let first_other = types.iter().position(|t| *t != "tool_result").unwrap_or(types.len());
                if !types.contains(&"tool_result") {
                    return None;
                }
                if types[first_other..].contains(&"tool_result") {
                    return Some(Err(format!("user message {} has a tool_result after text", m.seq)));
                }
                Some(Ok(parts.take(first_other).map(|p| id_of(&p["tool_use_id"])).collect()))
            }
            _ => None,
        }
    }

    /// Checks the replay invariant directly, from a provider's point of view:
    /// every call is answered exactly once in the turn right after it, and
    /// every result answers a call of that turn.
    fn replay_safe(messages: &[Message]) -> Result<(), String> {
        let mut pending: Vec<String> = Vec::new();
        let mut open_since: Option<i64> = None; // the call whose answers may still come
        for m in messages {
            match results_in(m) {
                Some(results) => {
                    let Some(call) = open_since else {
                        return Err(format!("message {} carries results outside a tool turn", m.seq));
                    };
                    for id in results? {
                        let Some(pos) = pending.iter().position(|p| *p == id) else {
                            return Err(format!("message {} answers no pending call of {call}", m.seq));
                        };
                        pending.swap_remove(pos);
                    }
                    if m.role == Role::User
                        && m.content.as_array().is_some_and(|p| p.iter().any(|p| p["type"] != "tool_result"))
                    {
                        open_since = None;
                    }
                }
                None => {
                    if !pending.is_empty() {
                        return Err(format!("calls {pending:?} unanswered before message {}", m.seq));
                    }
                    pending = calls_in(m);
                    let distinct: HashSet<&String> = pending.iter().collect();
                    if distinct.len() != pending.len() {
                        return Err(format!("message {} repeats a call id", m.seq));
                    }
                    open_since = (!pending.is_empty()).then_some(m.seq);
                }
            }
        }
        match pending.is_empty() {
            true => Ok(()),
            false => Err(format!("calls {pending:?} unanswered at the end")),
        }
    }

    #[test]
    fn replay_check_rejects_broken_histories() {
        assert!(replay_safe(&[calling(1, &["a", "b"]), answer(2, "a")]).is_err());
        assert!(replay_safe(&[answer(1, "a")]).is_err());
        assert!(replay_safe(&[calling(1, &["a"]), answer(2, "a"), answer(3, "a")]).is_err());
        assert!(replay_safe(&[calling(1, &["a"]), user(2), answer(3, "a")]).is_err());
        assert!(replay_safe(&[calling(1, &["a"]), answer(2, "a")]).is_ok());
        assert!(replay_safe(&[sdk_calling(1, &["a"]), sdk_results(2, &["b"])]).is_err());
        assert!(replay_safe(&[sdk_calling(1, &["a"]), sdk_results(2, &["a"])]).is_ok());
        assert!(replay_safe(&[anthropic_results(1, &["a"], Some("hi"))]).is_err());
        assert!(replay_safe(&[anthropic_calling(1, &["a"]), anthropic_results(2, &[], Some("hi"))]).is_err());
        let late = parts_msg(2, Role::User, serde_json::json!([text("x"), tool_result("a")]));
        assert!(replay_safe(&[anthropic_calling(1, &["a"]), late]).is_err());
        assert!(replay_safe(&[anthropic_calling(1, &["a"]), anthropic_results(2, &["a"], Some("hi"))]).is_ok());
    }

    /// Whether `kept` is `original`, or `original` with only some result parts
    /// removed from its content: the one change `sanitize` may make.
    fn trimmed_from(kept: &Message, original: &Message) -> bool {
        if kept == original {
            return true;
        }
        let (Some(kept_parts), Some(parts)) = (kept.content.as_array(), original.content.as_array()) else {
            return false;
        };
        let same_but_content = Message { content: original.content.clone(), ..kept.clone() } == *original;
        let mut rest = parts.iter();
        let in_order = kept_parts.iter().all(|k| rest.by_ref().any(|p| p == k));
        let removed = parts.len() - kept_parts.len();
        let removed_results = parts
            .iter()
            .filter(|p| matches!(p["type"].as_str(), Some("tool-result" | "tool_result")))
            .count()
            - kept_parts.iter().filter(|p| matches!(p["type"].as_str(), Some("tool-result" | "tool_result"))).count();
        same_but_content && in_order && removed == removed_results
    }

    fn is_trimmed_subsequence(sub: &[Message], of: &[Message]) -> bool {
        let mut of = of.iter();
        sub.iter().all(|s| of.any(|o| o.id == s.id && trimmed_from(s, o)))
    }

    #[derive(Debug, Clone, Copy)]
    enum Shape {
        OpenAi,
        AiSdk,
        Anthropic,
    }

    /// One piece of a generated history, in shape-independent terms.
    #[derive(Debug, Clone)]
    enum Chunk {
        User,
        System,
        Assistant,
        /// An assistant message making these calls (ids may repeat).
        Calls(Vec<&'static str>),
        /// Results for these ids, with the person's words after them where the
        /// shape allows (Anthropic); `None` is a result without an id.
        Results(Vec<Option<&'static str>>, bool),
        /// Anthropic only (others: a bare result): results placed after text.
        LateResults(Vec<&'static str>),
        /// A well-formed turn: calls, then their answers in two messages
        /// (split at the index), in the given order; with the person's words
        /// after the first message's results where the shape allows, which
        /// ends the turn there (Anthropic).
        Turn(Vec<&'static str>, Vec<&'static str>, usize, bool),
    }

    fn results_msgs(shape: Shape, seq: &mut i64, ids: &[Option<&str>], words: bool) -> Vec<Message> {
        let mut next = || {
            *seq += 1;
            *seq
        };
        match shape {
            Shape::OpenAi => ids
                .iter()
                .map(|id| {
                    let mut m = msg(next(), Role::Tool);
                    m.tool_call_id = id.map(str::to_owned);
                    m
                })
                .collect(),
            Shape::AiSdk => {
                let mut m = sdk_results(next(), &ids.iter().map(|id| id.unwrap_or("")).collect::<Vec<_>>());
                for (part, id) in m.content.as_array_mut().expect("parts").iter_mut().zip(ids) {
                    if id.is_none() {
                        part.as_object_mut().expect("object").remove("toolCallId");
                    }
                }
                vec![m]
            }
            Shape::Anthropic => {
                let mut m = anthropic_results(
                    next(),
                    &ids.iter().map(|id| id.unwrap_or("")).collect::<Vec<_>>(),
                    words.then_some("ok"),
                );
                for (part, id) in m.content.as_array_mut().expect("parts").iter_mut().zip(ids) {
                    if id.is_none() {
                        part.as_object_mut().expect("object").remove("tool_use_id");
                    }
                }
                vec![m]
            }
        }
    }

    fn build(chunks: Vec<(Shape, Chunk)>) -> Vec<Message> {
        let mut seq = 0;
        let mut out = Vec::new();
        for (shape, chunk) in chunks {
            let next = |seq: &mut i64| {
                *seq += 1;
                *seq
            };
            let calling = |seq: i64, ids: &[&str]| match shape {
                Shape::OpenAi => calling(seq, ids),
                Shape::AiSdk => sdk_calling(seq, ids),
                Shape::Anthropic => anthropic_calling(seq, ids),
            };
            match chunk {
                Chunk::User => out.push(user(next(&mut seq))),
                Chunk::System => out.push(msg(next(&mut seq), Role::System)),
                Chunk::Assistant => out.push(assistant(next(&mut seq))),
                Chunk::Calls(ids) => out.push(calling(next(&mut seq), &ids)),
                Chunk::Results(ids, words) => out.extend(results_msgs(shape, &mut seq, &ids, words)),
                Chunk::LateResults(ids) => match shape {
                    Shape::Anthropic => {
                        let mut parts = vec![text("see:")];
                        parts.extend(ids.iter().map(|id| tool_result(id)));
                        out.push(parts_msg(next(&mut seq), Role::User, Value::Array(parts)));
                    }
                    _ => out.extend(results_msgs(shape, &mut seq, &[ids.first().copied()], false)),
                },
                Chunk::Turn(calls, answers, split, words) => {
                    out.push(calling(next(&mut seq), &calls));
                    let answers: Vec<Option<&str>> = answers.into_iter().map(Some).collect();
                    let (first, second) = answers.split_at(split.min(answers.len()));
                    for (group, words) in [(first, words), (second, false)].into_iter().filter(|(g, _)| !g.is_empty()) {
                        out.extend(results_msgs(shape, &mut seq, group, words));
                    }
                }
            }
        }
        out
    }

    /// Short histories over three call ids, so collisions, duplicates and
    /// partial answers are common; well-formed tool turns (all calls answered,
    /// in any order, in one or two messages) are generated as a block so kept
    /// turns are common too.
    fn chunk() -> impl Strategy<Value = Chunk> {
        let id = prop::sample::select(vec!["a", "b", "c"]);
        prop_oneof![
            Just(Chunk::User),
            Just(Chunk::System),
            Just(Chunk::Assistant),
            prop::collection::vec(id.clone(), 1..4).prop_map(Chunk::Calls),
            (prop::collection::vec(prop::option::weighted(0.9, id.clone()), 1..3), any::<bool>())
                .prop_map(|(ids, words)| Chunk::Results(ids, words)),
            prop::collection::vec(id.clone(), 1..3).prop_map(Chunk::LateResults),
            (prop::sample::subsequence(vec!["a", "b", "c"], 1..=3), 0..3_usize, prop::bool::weighted(0.2))
                .prop_flat_map(|(ids, split, words)| (
                    Just(ids.clone()),
                    Just(ids).prop_shuffle(),
                    Just(split),
                    Just(words)
                ))
                .prop_map(|(calls, answers, split, words)| Chunk::Turn(calls, answers, split, words)),
        ]
    }

    fn history_of(shape: Shape) -> impl Strategy<Value = Vec<Message>> {
        prop::collection::vec(chunk().prop_map(move |c| (shape, c)), 0..10).prop_map(build)
    }

    fn mixed_history() -> impl Strategy<Value = Vec<Message>> {
        let shape = prop_oneof![Just(Shape::OpenAi), Just(Shape::AiSdk), Just(Shape::Anthropic)];
        prop::collection::vec((shape, chunk()), 0..10).prop_map(build)
    }

    /// The properties every shape must have: a (trimmed) subsequence that a
    /// provider accepts (every kept call answered in the next turn, no orphan
    /// result), idempotent, no message emptied, identity on a history already
    /// replay-safe, and messages that are neither calls nor results kept as
    /// they are.
    fn check(input: Vec<Message>) -> Result<(), TestCaseError> {
        let out = sanitize(input.clone());
        prop_assert!(is_trimmed_subsequence(&out, &input), "{:?} from {:?}", seqs(&out), seqs(&input));
        if let Err(why) = replay_safe(&out) {
            prop_assert!(false, "{}: {:?}", why, out);
        }
        prop_assert_eq!(&sanitize(out.clone()), &out);
        // A message emptied of its (orphan) results is dropped, not replayed as an empty turn.
        for m in out.iter().filter(|m| m.content == Value::Array(Vec::new())) {
            prop_assert!(input.contains(m), "message {} was emptied", m.seq);
        }
        if replay_safe(&input).is_ok() {
            prop_assert_eq!(&out, &input);
        }
        for m in input.iter().filter(|m| calls_in(m).is_empty() && results_in(m).is_none()) {
            prop_assert!(out.contains(m), "message {} was lost", m.seq);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn openai_histories_sanitize_safely(input in history_of(Shape::OpenAi)) {
            check(input)?;
        }

        #[test]
        fn ai_sdk_histories_sanitize_safely(input in history_of(Shape::AiSdk)) {
            check(input)?;
        }

        #[test]
        fn anthropic_histories_sanitize_safely(input in history_of(Shape::Anthropic)) {
            check(input)?;
        }

        #[test]
        fn mixed_histories_sanitize_safely(input in mixed_history()) {
            check(input)?;
        }
    }
}
