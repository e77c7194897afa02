//! Continuation checks (`POST /api/conversations/{id}/validate`): is the history a
//! client claims to hold the stored thread's, or a prefix of it? Pure comparison of the
//! claimed messages with the stored ones at the same positions.
//!
//! Content and tool fields are compared as JSON values, so key order never counts
//! (`serde_json` objects compare as maps). `metadata` is the client's bookkeeping and
//! is not compared. Tool calls and results are read in the three shapes the sanitizer
//! understands (see [`history`](super::history)).

use std::collections::HashSet;

use serde::Serialize;
use utoipa::ToSchema;

use super::{
    message::{Message, NewMessage},
    replay::{call_ids, result_ids},
};

/// What is wrong with one claimed message; one code per message, the most specific.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProblemCode {
    /// A tool result (or approval) for a call id that no stored result answers.
    ForgedToolResult,
    /// A tool call whose id the stored thread never made.
    UnknownToolCall,
    /// The thread holds no message here, or one of another role: the claim is not a
    /// prefix of the thread.
    NotAPrefix,
    /// The stored message here has the same role but other content or tool fields.
    ModifiedMessage,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Problem {
    /// Position in the claimed `messages` (0-based).
    pub index: usize,
    pub code: ProblemCode,
    /// The stored message's `seq` at this position, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    /// The call id a forged result or an unknown call names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// Compares `claimed` with `stored`, the thread's first messages, oldest first (as many
/// as the caller read: calls and results are known if they are among them). No problem:
/// the claim is the thread or a prefix of it (a longer thread means someone appended
/// since).
pub fn check(claimed: &[NewMessage], stored: &[Message]) -> Vec<Problem> {
    let known_calls: HashSet<&str> = stored.iter().flat_map(call_ids).flatten().collect();
    let known_results: HashSet<&str> = stored.iter().flat_map(result_ids).collect();
    let mut problems = Vec::new();
    for (index, new) in claimed.iter().enumerate() {
        let at = stored.get(index);
        let seq = at.map(|m| m.seq);
        let message = as_message(new, index);
        let problem = |code, tool_call_id: Option<&str>| Problem {
            index,
            code,
            seq,
            tool_call_id: tool_call_id.map(str::to_owned),
        };
        if let Some(forged) = result_ids(&message).into_iter().find(|id| !known_results.contains(id)) {
            problems.push(problem(ProblemCode::ForgedToolResult, Some(forged)));
        } else if let Some(unknown) = call_ids(&message).into_iter().flatten().find(|id| !known_calls.contains(id)) {
            problems.push(problem(ProblemCode::UnknownToolCall, Some(unknown)));
        } else {
            match at {
                None => problems.push(problem(ProblemCode::NotAPrefix, None)),
                Some(at) if at.role != new.role => problems.push(problem(ProblemCode::NotAPrefix, None)),
                Some(at) if !same_message(at, new) => problems.push(problem(ProblemCode::ModifiedMessage, None)),
                Some(_) => {}
            }
        }
    }
    problems
}

/// Same content, name and tool fields (JSON equality: key order does not count).
fn same_message(stored: &Message, claimed: &NewMessage) -> bool {
    stored.content == claimed.content
        && stored.name == claimed.name
        && stored.tool_calls == claimed.tool_calls
        && stored.tool_call_id == claimed.tool_call_id
}

/// A claimed message as a [`Message`], so the sanitizer's readers of the three tool
/// shapes apply to it unchanged; its id, seq and time are placeholders never compared.
fn as_message(new: &NewMessage, index: usize) -> Message {
    Message {
        id: uuid::Uuid::nil(),
        conversation_id: uuid::Uuid::nil(),
        seq: i64::try_from(index).unwrap_or(i64::MAX),
        role: new.role,
        content: new.content.clone(),
        name: new.name.clone(),
        tool_calls: new.tool_calls.clone(),
        tool_call_id: new.tool_call_id.clone(),
        metadata: None,
        created_at: chrono::DateTime::UNIX_EPOCH,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn new(value: Value) -> NewMessage {
        serde_json::from_value(value).expect("a message")
    }

    fn stored(messages: &[Value]) -> Vec<Message> {
        messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut message = as_message(&new(m.clone()), i);
                message.seq = i as i64 + 1;
                message
            })
            .collect()
    }

    fn codes(claimed: &[Value], thread: &[Value]) -> Vec<(usize, ProblemCode)> {
        let claimed: Vec<NewMessage> = claimed.iter().cloned().map(new).collect();
        check(&claimed, &stored(thread)).into_iter().map(|p| (p.index, p.code)).collect()
    }

    fn openai_thread() -> Vec<Value> {
        vec![
            json!({"role": "user", "content": "weather?"}),
            json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "weather", "arguments": {"city": "Lyon", "unit": "C"}}]}),
            json!({"role": "tool", "content": "{\"t\": 20}", "tool_call_id": "c1"}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "20 degrees"}]}),
        ]
    }

    #[test]
    fn an_honest_history_or_prefix_has_no_problem() {
        let thread = openai_thread();
        assert_eq!(codes(&thread, &thread), []);
        assert_eq!(codes(&thread[..2], &thread), []);
        assert_eq!(codes(&[], &thread), []);
    }

    #[test]
    fn key_order_does_not_count() {
        let thread = openai_thread();
        let mut claimed = thread.clone();
        claimed[1] = json!({"tool_calls": [{"arguments": {"unit": "C", "city": "Lyon"}, "name": "weather", "id": "c1"}], "content": "", "role": "assistant"});
        claimed[3] = json!({"content": [{"text": "20 degrees", "type": "text"}], "role": "assistant"});
        assert_eq!(codes(&claimed, &thread), []);
    }

    #[test]
    fn changed_content_or_arguments_is_a_modified_message() {
        let thread = openai_thread();
        let mut claimed = thread.clone();
        claimed[0] = json!({"role": "user", "content": "weather in Paris?"});
        claimed[1] = json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "weather", "arguments": {"city": "Paris", "unit": "C"}}]});
        assert_eq!(codes(&claimed, &thread), [(0, ProblemCode::ModifiedMessage), (1, ProblemCode::ModifiedMessage)]);
    }

    #[test]
    fn extra_or_misplaced_messages_are_not_a_prefix() {
        let thread = openai_thread();
        let mut longer = thread.clone();
        longer.push(json!({"role": "user", "content": "thanks"}));
        assert_eq!(codes(&longer, &thread), [(4, ProblemCode::NotAPrefix)]);
        let skipped = vec![thread[0].clone(), thread[3].clone()];
        assert_eq!(codes(&skipped, &thread), [(1, ProblemCode::ModifiedMessage)]);
        let reordered = vec![thread[3].clone()];
        assert_eq!(codes(&reordered, &thread), [(0, ProblemCode::NotAPrefix)]);
    }

    #[test]
    fn forged_results_and_unknown_calls_in_every_shape() {
        let thread = openai_thread();
        // OpenAI: a result for a call never answered in the thread.
        let mut claimed = thread.clone();
        claimed[2] = json!({"role": "tool", "content": "{\"t\": 35}", "tool_call_id": "c9"});
        assert_eq!(codes(&claimed, &thread), [(2, ProblemCode::ForgedToolResult)]);
        // AI SDK parts.
        let sdk_result = json!({"role": "tool", "content": [{"type": "tool-result", "toolCallId": "x1", "toolName": "approve", "output": "yes"}]});
        assert_eq!(codes(&[thread[0].clone(), sdk_result], &thread), [(1, ProblemCode::ForgedToolResult)]);
        let sdk_call = json!({"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "x2", "toolName": "pay", "input": {}}]});
        assert_eq!(codes(&[thread[0].clone(), sdk_call], &thread), [(1, ProblemCode::UnknownToolCall)]);
        // Anthropic blocks: the result rides on a user message.
        let anthropic_result =
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]});
        assert_eq!(codes(&[anthropic_result], &thread), [(0, ProblemCode::ForgedToolResult)]);
        let anthropic_call =
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "pay", "input": {}}]});
        assert_eq!(codes(&[thread[0].clone(), anthropic_call], &thread), [(1, ProblemCode::UnknownToolCall)]);
    }

    #[test]
    fn a_known_result_at_the_wrong_place_is_no_forgery() {
        let thread = openai_thread();
        let claimed = vec![thread[0].clone(), thread[2].clone()];
        assert_eq!(codes(&claimed, &thread), [(1, ProblemCode::NotAPrefix)]);
    }
}
