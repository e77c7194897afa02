//! Rolling summaries of long threads: when one is due ([`summary_due`]), the builtin
//! extractive summary used without an LLM (or for a user who refused consent), the size
//! bound every summary is held to, and the ready-to-send history built from one.

use serde::Serialize;
use utoipa::ToSchema;

use super::{
    fact_text,
    message::{Message, Role},
    prompt,
};

/// One message as a summary reads it: who spoke, and the words (see [`Message::text`]).
pub type Said<'a> = (Role, &'a str);

/// The longest summary stored, in characters, whoever wrote it: a summary is sent with
/// every request of the thread, so it must stay small whatever the thread's length.
pub const MAX_SUMMARY_CHARS: usize = 4000;

/// The longest line the builtin summary keeps of one message, in characters.
const MAX_LINE_CHARS: usize = 200;

/// The first lines of a builtin summary (how the thread began) survive when it must
/// shrink; the rest gives way to newer lines.
const HEAD_LINES: usize = 3;

/// The line standing for lines a builtin summary dropped.
const ELISION: &str = "[…]";

/// What decides whether an append queues a summary.
#[derive(Debug, Clone, Copy)]
pub struct SummaryState {
    /// The agent's `summarize_after_messages` (0 = off) and `summary_window`.
    pub summarize_after_messages: i32,
    pub summary_window: i32,
    /// The conversation's own `memory` flag: an opted-out thread is never summarised.
    pub conversation_memory: bool,
    pub message_count: i64,
    pub last_seq: i64,
    pub summary_through_seq: i64,
    /// The mark of the newest summarize job queued.
    pub summary_queued_through_seq: i64,
}

/// The seq a new summary should fold messages through, or `None` when none is due: more
/// than `summarize_after_messages` messages are newer than both the summary and the
/// newest queued summary (`min` with `message_count`, because messages cleared by
/// `DELETE …/messages` keep their seqs), and all but the newest `summary_window` leave
/// something to fold. So a window at or above the threshold only delays the summary.
pub fn summary_due(state: &SummaryState) -> Option<i64> {
    if !state.conversation_memory || state.summarize_after_messages <= 0 {
        return None;
    }
    let base = state.summary_through_seq.max(state.summary_queued_through_seq);
    let pending = state.message_count.min(state.last_seq - base);
    let through = state.last_seq - i64::from(state.summary_window.max(0));
    (pending > i64::from(state.summarize_after_messages) && through > base).then_some(through)
}

/// The builtin extractive summary: `previous` (the summary so far) followed by one line
/// per folded user or assistant message, `role: ` and the message's first sentence
/// (cleaned as fact text is: control characters and whitespace runs become one space; at
/// most [`MAX_LINE_CHARS`] characters). System prompts, tool
/// results and messages without text add no line. Beyond [`MAX_SUMMARY_CHARS`] the
/// oldest lines after the first [`HEAD_LINES`] are dropped, an elision line in their place.
pub fn extractive<'a>(previous: Option<&str>, messages: impl IntoIterator<Item = Said<'a>>) -> String {
    let old = previous.into_iter().flat_map(str::lines).map(str::to_owned);
    let new = messages.into_iter().filter_map(line_of);
    let lines: Vec<String> = old.chain(new).filter(|l| !l.trim().is_empty()).collect();
    fit(lines)
}

/// A model's summary held to [`MAX_SUMMARY_CHARS`] (cut at a character boundary).
pub fn clip(text: &str) -> String {
    text.trim().chars().take(MAX_SUMMARY_CHARS).collect()
}

fn line_of((role, text): Said<'_>) -> Option<String> {
    let role = match role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System | Role::Tool => return None,
    };
    let text = fact_text::clean(text);
    let sentence = first_sentence(&text);
    if sentence.is_empty() {
        return None;
    }
    Some(format!("{role}: {}", clip_line(sentence)))
}

/// `text` cut to [`MAX_LINE_CHARS`] characters, `…` marking a cut.
fn clip_line(text: &str) -> String {
    let mut clipped: String = text.chars().take(MAX_LINE_CHARS).collect();
    if clipped.len() < text.len() {
        clipped.push('…');
    }
    clipped
}

/// Up to and including the first `.`, `?` or `!` followed by a space, else all of it.
fn first_sentence(text: &str) -> &str {
    let end = text
        .char_indices()
        .zip(text.chars().skip(1))
        .find(|((_, c), next)| matches!(c, '.' | '?' | '!') && *next == ' ')
        .map_or(text.len(), |((i, c), _)| i + c.len_utf8());
    &text[..end]
}

/// Keeps the head lines and as many of the newest lines as fit in [`MAX_SUMMARY_CHARS`]
/// (lines joined by `\n`).
fn fit(lines: Vec<String>) -> String {
    let cost = |line: &String| line.chars().count() + 1;
    if lines.iter().map(cost).sum::<usize>() <= MAX_SUMMARY_CHARS + 1 {
        return lines.join("\n");
    }
    // Lines of an earlier summary written by a model may be paragraphs: clipped like
    // message lines, so that the head always leaves room.
    let mut lines = lines.into_iter().filter(|l| l != ELISION).map(|l| clip_line(&l));
    let head: Vec<String> = lines.by_ref().take(HEAD_LINES).collect();
    let rest: Vec<String> = lines.collect();
    let mut room = (MAX_SUMMARY_CHARS + 1)
        .saturating_sub(head.iter().map(cost).sum::<usize>())
        .saturating_sub(ELISION.chars().count() + 1);
    let mut tail = Vec::new();
    for line in rest.iter().rev() {
        if cost(line) > room {
            break;
        }
        room -= cost(line);
        tail.push(line.clone());
    }
    tail.reverse();
    let mut kept = head;
    kept.push(ELISION.to_owned());
    kept.extend(tail);
    kept.join("\n")
}

/// The answer of `GET /api/conversations/{id}/context`: what an agent sends its model.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThreadContext {
    /// The rolling summary of the messages through `summary_through_seq`; null when the
    /// thread has none yet.
    #[schema(max_length = 4000)]
    pub summary: Option<String>,
    /// The last seq the summary covers (0: none).
    #[schema(minimum = 0)]
    pub summary_through_seq: i64,
    /// The newest messages after `summary_through_seq` (at most `window`), oldest first.
    pub messages: Vec<Message>,
    /// The summary as a fenced `<conversation-summary>` block, or "" without one.
    #[schema(example = "<conversation-summary>\nuser: My name is Alice.\n</conversation-summary>")]
    pub prompt: String,
}

impl ThreadContext {
    pub fn new(summary: Option<String>, summary_through_seq: i64, messages: Vec<Message>) -> ThreadContext {
        let prompt = summary.as_deref().map(prompt::render_summary).unwrap_or_default();
        ThreadContext { summary, summary_through_seq, messages, prompt }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(message_count: i64, summary_through_seq: i64, queued: i64) -> SummaryState {
        SummaryState {
            summarize_after_messages: 20,
            summary_window: 10,
            conversation_memory: true,
            message_count,
            last_seq: message_count,
            summary_through_seq,
            summary_queued_through_seq: queued,
        }
    }

    fn said(messages: &[(Role, String)]) -> impl Iterator<Item = Said<'_>> {
        messages.iter().map(|(role, text)| (*role, text.as_str()))
    }

    #[test]
    fn due_past_the_threshold_through_all_but_the_window() {
        assert_eq!(summary_due(&state(20, 0, 0)), None);
        assert_eq!(summary_due(&state(21, 0, 0)), Some(11));
        assert_eq!(summary_due(&state(60, 0, 0)), Some(50));
        // Counted from the newest summary or queued job, whichever is further.
        assert_eq!(summary_due(&state(60, 50, 0)), None);
        assert_eq!(summary_due(&state(71, 0, 50)), Some(61));
        assert_eq!(summary_due(&state(60, 0, 45)), None);
    }

    #[test]
    fn never_due_when_off_opted_out_or_with_nothing_to_fold() {
        assert_eq!(summary_due(&SummaryState { summarize_after_messages: 0, ..state(60, 0, 0) }), None);
        assert_eq!(summary_due(&SummaryState { conversation_memory: false, ..state(60, 0, 0) }), None);
        // A window wider than the threshold waits until something falls out of it.
        let wide = SummaryState { summarize_after_messages: 5, summary_window: 10, ..state(10, 0, 0) };
        assert_eq!(summary_due(&wide), None);
        assert_eq!(summary_due(&SummaryState { last_seq: 11, message_count: 11, ..wide }), Some(1));
    }

    #[test]
    fn cleared_messages_do_not_count() {
        // 60 messages cleared, then 15 new ones: 15 are unsummarised, not 75.
        let cleared = SummaryState { message_count: 15, last_seq: 75, ..state(0, 0, 0) };
        assert_eq!(summary_due(&cleared), None);
        assert_eq!(summary_due(&SummaryState { message_count: 21, last_seq: 81, ..cleared }), Some(71));
    }

    #[test]
    fn extractive_keeps_first_sentences_of_user_and_assistant_lines() {
        let messages = [
            (Role::System, "You are helpful.".to_owned()),
            (Role::User, "My name is Alice.  I live\nin Oslo.".to_owned()),
            (Role::Assistant, "Hello Alice! How can I help?".to_owned()),
            (Role::Tool, "{\"ok\": true}".to_owned()),
            (Role::Assistant, " ".to_owned()),
            (Role::User, "Version 2.5 is out".to_owned()),
        ];
        let summary = extractive(Some("user: Hi."), said(&messages));
        assert_eq!(summary, "user: Hi.\nuser: My name is Alice.\nassistant: Hello Alice!\nuser: Version 2.5 is out");
    }

    #[test]
    fn extractive_lines_hold_no_control_characters() {
        let line = extractive(None, [(Role::User, "Hi\u{7}there,\u{1b}[31m Ana.\nBye")]);
        assert_eq!(line, "user: Hi there, [31m Ana.");
    }

    #[test]
    fn extractive_is_bounded_and_keeps_the_beginning_and_the_newest() {
        let mut summary: Option<String> = None;
        for round in 0..50 {
            let messages: Vec<(Role, String)> =
                (0..20).map(|i| (Role::User, format!("Line {round}-{i} {}", "x".repeat(300)))).collect();
            let next = extractive(summary.as_deref(), said(&messages));
            assert!(next.chars().count() <= MAX_SUMMARY_CHARS, "{} chars", next.chars().count());
            summary = Some(next);
        }
        let summary = summary.unwrap_or_default();
        let lines: Vec<&str> = summary.lines().collect();
        assert!(lines[0].starts_with("user: Line 0-0 "), "{}", lines[0]);
        assert_eq!(lines.iter().filter(|l| **l == ELISION).count(), 1);
        assert!(lines.last().is_some_and(|l| l.starts_with("user: Line 49-19 ")));
        assert!(lines.iter().all(|l| l.chars().count() <= MAX_LINE_CHARS + 10));
    }

    #[test]
    fn a_models_long_paragraphs_folded_by_the_builtin_summary_stay_bounded() {
        let paragraphs = ["p".repeat(3000), "q".repeat(3000), "r".repeat(3000)].join("\n");
        let messages = [(Role::User, "Now without an LLM.".to_owned())];
        let summary = extractive(Some(&paragraphs), said(&messages));
        assert!(summary.chars().count() <= MAX_SUMMARY_CHARS, "{} chars", summary.chars().count());
        assert!(summary.ends_with("\nuser: Now without an LLM."), "{summary}");
    }

    #[test]
    fn clip_bounds_a_models_summary() {
        assert_eq!(clip("  short  "), "short");
        assert_eq!(clip(&"é".repeat(MAX_SUMMARY_CHARS + 5)).chars().count(), MAX_SUMMARY_CHARS);
    }

    #[test]
    fn context_fences_the_summary() {
        let context = ThreadContext::new(Some("user: I am Alice".into()), 5, vec![]);
        assert_eq!(context.prompt, "<conversation-summary>\nuser: I am Alice\n</conversation-summary>");
        assert_eq!(ThreadContext::new(None, 0, vec![]).prompt, "");
    }
}
