//! README.md and docs/ are reference: they say what is true now. What was tried and
//! measured, with the dates and builds of each run, belongs in docs/decisions/. So outside
//! that folder the docs hold no commit hashes, dates, issue numbers or words about work
//! sessions, and the three pages that once grew into lab notebooks keep to their size.
//!
//! Std only and no server, like tests/docs_links.rs.

mod markdown;

use std::{fs, path::Path};

use markdown::{documents, prose_lines, without_code_spans};

/// The pages with a ceiling, and their most lines.
const LINE_CAPS: [(&str, usize); 3] = [("README.md", 150), ("docs/performance.md", 300), ("docs/extraction.md", 250)];

/// Where history is kept, with its dates and figures.
const HISTORY: &str = "docs/decisions";

/// Phrases that tell of a work session, a branch, or the machine of a past run. "Session"
/// alone is not one: the admin panel has a session, and Multi-Session Chat has sessions 1–4.
const WORK_SESSION_PHRASES: &[&str] = &[
    "this session",
    "that session",
    "previous session",
    "last session",
    "next session",
    "same session",
    "work session",
    "session start",
    "session's machine",
    "first session",
    "second session",
    "third session",
    "fourth session",
    "fifth session",
    "sixth session",
    "seventh session",
    "eighth session",
    "ninth session",
    "tenth session",
    "this machine",
    "this branch",
    "on branch",
];

/// Words that look like a git commit hash: 7 to 40 lowercase hex digits with at least one
/// digit and one letter, standing alone. Words in a URL are left out (a link may name a
/// commit on purpose), and so are longer digests: the docs state the model files' SHA-256
/// (64 digits), which is reference. A UUID is one word with its hyphens, so not hex.
fn commit_hashes(line: &str) -> Vec<&str> {
    line.split_whitespace()
        .filter(|chunk| !chunk.contains("://"))
        .flat_map(|chunk| chunk.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')))
        .filter(|word| {
            (7..=40).contains(&word.len())
                && word.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                && word.bytes().any(|b| b.is_ascii_digit())
                && word.bytes().any(|b| b.is_ascii_alphabetic())
        })
        .collect()
}

/// ISO dates (`20yy-mm-dd`) in prose. Inside code they are examples or identifiers (an
/// `as_of` time, a protocol revision), so the caller passes prose without its code.
fn dates(prose: &str) -> Vec<&str> {
    let bytes = prose.as_bytes();
    let shape = |at: usize| {
        let digit = |i: usize| bytes.get(at + i).is_some_and(u8::is_ascii_digit);
        bytes[at..].starts_with(b"20")
            && digit(2)
            && digit(3)
            && bytes.get(at + 4) == Some(&b'-')
            && digit(5)
            && digit(6)
            && bytes.get(at + 7) == Some(&b'-')
            && digit(8)
            && digit(9)
    };
    (0..bytes.len())
        .filter(|&at| (at == 0 || !bytes[at - 1].is_ascii_digit()) && shape(at))
        .map(|at| &prose[at..at + 10])
        .collect()
}

/// Issue references, in prose or code: "issue 29", "issues 25", or "#12" standing alone
/// (not a `#anchor` such as `#1-setup`, nor an HTML entity such as `&#39;`).
fn issue_refs(line: &str) -> Vec<String> {
    let lower = line.to_lowercase();
    let mut found = Vec::new();
    for word in ["issue ", "issues "] {
        for (at, _) in lower.match_indices(word) {
            let before = lower[..at].chars().next_back();
            let number: String = lower[at + word.len()..].chars().take_while(char::is_ascii_digit).collect();
            if !number.is_empty() && !before.is_some_and(char::is_alphanumeric) {
                found.push(format!("{}{number}", &lower[at..at + word.len()]));
            }
        }
    }
    for (at, _) in lower.match_indices('#') {
        let before = lower[..at].chars().next_back();
        let number: String = lower[at + 1..].chars().take_while(char::is_ascii_digit).collect();
        let after = lower[at + 1 + number.len()..].chars().next();
        if !number.is_empty()
            && !before.is_some_and(|c| c.is_alphanumeric() || c == '&')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
        {
            found.push(format!("#{number}"));
        }
    }
    found
}

/// The work-session phrases of a line, in any case.
fn work_session_phrases(line: &str) -> Vec<&'static str> {
    let lower = line.to_lowercase();
    WORK_SESSION_PHRASES.iter().copied().filter(|phrase| lower.contains(phrase)).collect()
}

/// Every trace of history in one Markdown text, as `file: what (in: line)`.
fn history(file: &str, markdown: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut report = |what: String, line: &str| {
        let excerpt: String = line.trim().chars().take(100).collect();
        problems.push(format!("{file}: {what} (in: {excerpt})"));
    };
    for line in markdown.lines() {
        for hash in commit_hashes(line) {
            report(format!("commit hash `{hash}`"), line);
        }
        for phrase in work_session_phrases(line) {
            report(format!("work-session words \"{phrase}\""), line);
        }
        for reference in issue_refs(line) {
            report(format!("issue reference \"{reference}\""), line);
        }
    }
    for line in prose_lines(markdown) {
        for date in dates(&without_code_spans(line)) {
            report(format!("date {date}"), line);
        }
    }
    problems
}

#[test]
fn the_readme_and_the_measured_pages_keep_to_their_size() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let over: Vec<String> = LINE_CAPS
        .iter()
        .filter_map(|&(file, cap)| {
            let lines = fs::read_to_string(root.join(file)).expect("a readable Markdown file").lines().count();
            (lines > cap).then(|| format!("{file}: {lines} lines, at most {cap}"))
        })
        .collect();
    assert!(over.is_empty(), "too long (move history to {HISTORY}/):\n{}", over.join("\n"));
}

#[test]
fn the_readme_and_docs_outside_decisions_hold_no_history() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let reference: Vec<_> = documents(root).into_iter().filter(|path| !path.starts_with(HISTORY)).collect();
    assert!(reference.len() > 3, "README.md and docs/*.md, found {reference:?}");
    let problems: Vec<String> = reference
        .iter()
        .flat_map(|path| {
            let text = fs::read_to_string(root.join(path)).expect("a readable Markdown file");
            history(&path.display().to_string(), &text)
        })
        .collect();
    assert!(problems.is_empty(), "history outside {HISTORY}/:\n{}", problems.join("\n"));
}

/// The checker itself: each kind of history is found, and the reference text that looks
/// like it (a digest, a UUID, a percent-escape, an anchor, a timestamp in code, the panel's
/// session, Multi-Session Chat's sessions) is not.
#[test]
fn history_is_found_and_reference_is_not() {
    let history_text = "Measured on f2adb0e (2026-11-29), seventh session, for issue 29 (#12).\n\
                        On this machine it was faster than on branch `extract`.\n";
    assert_eq!(
        history("h.md", history_text).iter().map(|p| p.split(" (in:").next().unwrap()).collect::<Vec<_>>(),
        [
            "h.md: commit hash `f2adb0e`",
            "h.md: work-session words \"seventh session\"",
            "h.md: issue reference \"issue 29\"",
            "h.md: issue reference \"#12\"",
            "h.md: work-session words \"this machine\"",
            "h.md: work-session words \"on branch\"",
            "h.md: date 2026-11-29",
        ]
    );

    let reference_text = "SHA-256 `52d7b3d37fb7dad48cdf141f100dacd0e7f866f348a533dd1392c5023f2604a5`, \
                          id 0192f5a4-7b3c-7def-8abc-0123456789ab, `whatsapp%3A%2B33612345678`.\n\
                          See [setup](#1-setup), [web](https://example.com/commit/f2adb0e1), &#39;.\n\
                          `?as_of=2026-01-01T00:00:00Z` and revision `2025-06-18`; the session cookie;\n\
                          Multi-Session Chat sessions 1–4, session 1 at 1.06×; deadbeef and 1234567.\n\
                          ```\ncurl \"$URL?as_of=2026-01-01\"  # 1. step\n```\n";
    assert_eq!(history("r.md", reference_text), Vec::<String>::new());
}
