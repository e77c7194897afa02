//! Replay-safe conversation history: [`sanitize`] removes incomplete or
//! malformed tool-call turns so a stored history (or a window of it) can be
//! sent back to a chat-completion API without being rejected.
//!
//! # The rule
//!
//! OpenAI answers 400 when an assistant message with `tool_calls` is not
//! *immediately* followed by `tool` messages answering each call id, or when a
//! `tool` message does not answer a preceding call; Anthropic requires the
//! `tool_result` blocks in the very next turn after the `tool_use`. Both agree
//! on the strictest reading, so that is the one used here:
//!
//! * A *tool turn* is an assistant message with a non-empty `tool_calls`
//!   array plus the maximal run of `tool` messages directly after it. Any
//!   other message (user, assistant, **or system**) ends the run; a result that
//!   arrives after it does not count, and neither does one stored before its
//!   call.
//! * Within the run, a `tool` message is an *answer* if its `tool_call_id`
//!   names one of the turn's calls that has not been answered yet. Tool
//!   messages without `tool_call_id`, with an unknown id, or repeating an
//!   already answered id are dropped; the first answer wins.
//! * The turn is kept (assistant message and its answers, in stored order)
//!   only if every call is answered and the call ids are distinct (a repeated
//!   id cannot be matched unambiguously). Otherwise the whole turn is dropped.
//! * A `tool` message outside any tool turn (an orphan, or one whose call was
//!   cut off by the window) is dropped.
//! * Every other message, including an assistant message with an empty
//!   `tool_calls` array, is kept unchanged. Order is never changed.

use std::collections::HashSet;

use super::message::{Message, Role};

/// Returns `messages` (oldest first) without the tool turns that a provider
/// would reject on replay; see the module docs for the exact rule.
///
/// The result is a subsequence of the input and `sanitize` is idempotent, so
/// callers can apply it to any window, at any layer, as often as they like.
pub fn sanitize(messages: Vec<Message>) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut rest = messages.into_iter().peekable();

    while let Some(message) = rest.next() {
        if message.role == Role::Tool {
            // Not directly after an assistant tool call: orphan or cut off.
            continue;
        }
        if !opens_tool_turn(&message) {
            out.push(message);
            continue;
        }

        let mut run = Vec::new();
        while let Some(tool) = rest.next_if(|m| m.role == Role::Tool) {
            run.push(tool);
        }
        if let Some(answers) = complete_answers(&message, run) {
            out.push(message);
            out.extend(answers);
        }
    }
    out
}

/// Whether `message` asks for tool results; an empty `tool_calls` array asks
/// for nothing, so such a message is treated as a plain assistant reply.
fn opens_tool_turn(message: &Message) -> bool {
    message.role == Role::Assistant && message.tool_calls.as_ref().is_some_and(|c| !c.is_empty())
}

/// The answers from `run` that belong to `assistant`'s calls, first answer
/// per call id, or `None` when the turn cannot be replayed as a whole.
fn complete_answers(assistant: &Message, run: Vec<Message>) -> Option<Vec<Message>> {
    let calls = assistant.tool_calls.as_deref().unwrap_or_default();
    let mut pending: HashSet<&str> = HashSet::with_capacity(calls.len());
    for call in calls {
        if !pending.insert(call.id.as_str()) {
            return None;
        }
    }

    let mut answers = Vec::with_capacity(calls.len());
    for tool in run {
        let answers_pending = tool.tool_call_id.as_deref().is_some_and(|id| pending.remove(id));
        if answers_pending {
            answers.push(tool);
        }
    }
    pending.is_empty().then_some(answers)
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

    /// Checks the replay invariant directly, independently of `sanitize`'s
    /// implementation: every tool turn is complete and every tool message
    /// belongs to the run right after a call it answers.
    fn replay_safe(messages: &[Message]) -> Result<(), String> {
        let mut i = 0;
        while i < messages.len() {
            let m = &messages[i];
            i += 1;
            if m.role == Role::Tool {
                return Err(format!("tool message {} outside a tool turn", m.seq));
            }
            let Some(calls) = m.tool_calls.as_ref().filter(|c| !c.is_empty()) else {
                continue;
            };
            if m.role != Role::Assistant {
                continue;
            }
            let mut pending: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
            while let Some(tool) = messages.get(i).filter(|t| t.role == Role::Tool) {
                let id = tool.tool_call_id.as_deref().unwrap_or_default();
                let Some(pos) = pending.iter().position(|p| *p == id) else {
                    return Err(format!("tool message {} answers no pending call", tool.seq));
                };
                pending.swap_remove(pos);
                i += 1;
            }
            if !pending.is_empty() {
                return Err(format!("assistant message {} has unanswered calls", m.seq));
            }
        }
        Ok(())
    }

    #[test]
    fn replay_check_rejects_broken_histories() {
        assert!(replay_safe(&[calling(1, &["a", "b"]), answer(2, "a")]).is_err());
        assert!(replay_safe(&[answer(1, "a")]).is_err());
        assert!(replay_safe(&[calling(1, &["a"]), answer(2, "a"), answer(3, "a")]).is_err());
        assert!(replay_safe(&[calling(1, &["a"]), user(2), answer(3, "a")]).is_err());
        assert!(replay_safe(&[calling(1, &["a"]), answer(2, "a")]).is_ok());
    }

    fn is_subsequence(sub: &[Message], of: &[Message]) -> bool {
        let mut of = of.iter();
        sub.iter().all(|s| of.any(|o| o == s))
    }

    /// One message shape: role, the call ids it makes, the call id it answers.
    type Shape = (Role, Option<Vec<&'static str>>, Option<&'static str>);

    /// Short histories over three call ids, so collisions, duplicates and
    /// partial answers are common; well-formed tool turns (all calls answered,
    /// in any order) are generated as a block so kept turns are common too.
    fn history() -> impl Strategy<Value = Vec<Message>> {
        let id = prop::sample::select(vec!["a", "b", "c"]);
        let single = |shape: Shape| vec![shape];
        let chunk = prop_oneof![
            Just(single((Role::User, None, None))),
            Just(single((Role::System, None, None))),
            Just(single((Role::Assistant, None, None))),
            Just(single((Role::Assistant, Some(Vec::new()), None))),
            prop::collection::vec(id.clone(), 1..4).prop_map(move |ids| single((Role::Assistant, Some(ids), None))),
            prop::option::weighted(0.9, id.clone()).prop_map(move |id| single((Role::Tool, None, id))),
            prop::sample::subsequence(vec!["a", "b", "c"], 1..=3)
                .prop_flat_map(|ids| (Just(ids.clone()), Just(ids).prop_shuffle()))
                .prop_map(|(calls, answers)| {
                    let mut turn: Vec<Shape> = vec![(Role::Assistant, Some(calls), None)];
                    turn.extend(answers.into_iter().map(|a| (Role::Tool, None, Some(a))));
                    turn
                }),
        ];
        prop::collection::vec(chunk, 0..10).prop_map(|chunks| {
            chunks
                .into_iter()
                .flatten()
                .zip(0_i64..)
                .map(|((role, calls, answers), seq)| {
                    let mut m = match calls {
                        Some(ids) => calling(seq, &ids),
                        None => msg(seq, role),
                    };
                    m.tool_call_id = answers.map(str::to_owned);
                    m
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn sanitized_history_is_a_replay_safe_subsequence(input in history()) {
            let out = sanitize(input.clone());
            prop_assert!(is_subsequence(&out, &input));
            if let Err(why) = replay_safe(&out) {
                prop_assert!(false, "{}: {:?}", why, seqs(&out));
            }
        }

        #[test]
        fn sanitize_is_idempotent(input in history()) {
            let once = sanitize(input);
            prop_assert_eq!(sanitize(once.clone()), once);
        }

        #[test]
        fn non_tool_messages_are_kept(input in history()) {
            let out = sanitize(input.clone());
            for m in input.iter().filter(|m| m.role != Role::Tool && !opens_tool_turn(m)) {
                prop_assert!(out.contains(m));
            }
        }
    }
}
