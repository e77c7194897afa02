//! `engram-bench`: offline evaluations of Engram's components against the public data sets
//! under `../shared/data`, one subcommand per evaluation.
//!
//! `extraction` measures the built-in fact extractor on Synthetic-Persona-Chat: for each
//! speaker of each conversation, the facts extracted from that speaker's turns are matched
//! one-to-one against the speaker's persona lines, and compared with a naive baseline that
//! keeps every first-person sentence.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use engram::domain::{message::Role, search_query::STOP_WORDS};
use engram::extract::{ExtractionRequest, Turn, builtin};
use rust_stemmers::{Algorithm, Stemmer};

const USAGE: &str = "\
usage: engram-bench <command> [options]

commands:
  extraction [--data PATH] [--limit N]
      Precision, recall and F1 of the built-in fact extractor against the persona lines of
      Synthetic-Persona-Chat (default data: ../shared/data/spc-valid.csv), beside a baseline
      that keeps every first-person sentence.";

/// Default confidence threshold of an agent; facts below it are never stored.
const MIN_CONFIDENCE: f64 = 0.7;

/// A fact and a persona line are the same statement when their content words overlap at
/// least this much.
const MATCH_F1: f64 = 0.5;

enum Failure {
    /// Bad command line: print the usage and exit with 2.
    Usage(String),
    Run(String),
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, options)) = args.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let result = match command.as_str() {
        "extraction" => extraction(options),
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(Failure::Usage(format!("unknown command `{other}`"))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("error: {message}\n\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Failure::Run(message)) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------------------
// extraction
// ---------------------------------------------------------------------------------------

struct ExtractionArgs {
    data: PathBuf,
    limit: Option<usize>,
}

fn parse_extraction_args(options: &[String]) -> Result<ExtractionArgs, Failure> {
    let mut args = ExtractionArgs {
        data: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/spc-valid.csv")),
        limit: None,
    };
    let mut options = options.iter();
    while let Some(option) = options.next() {
        let (name, inline) = match option.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (option.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| options.next().cloned())
                .ok_or_else(|| Failure::Usage(format!("{name} needs a value")))
        };
        match name {
            "--data" => args.data = PathBuf::from(value()?),
            "--limit" => {
                let raw = value()?;
                let limit = raw.parse().map_err(|_| Failure::Usage(format!("--limit: not a number: {raw}")))?;
                args.limit = Some(limit);
            }
            other => {
                return Err(Failure::Usage(format!("extraction: unknown option `{other}`")));
            }
        }
    }
    Ok(args)
}

/// One row of Synthetic-Persona-Chat.
struct Dialogue {
    /// Persona lines of User 1 and User 2.
    personas: [Vec<String>; 2],
    /// Turns in order: speaker index (0 for User 1) and text.
    turns: Vec<(usize, String)>,
}

fn extraction(options: &[String]) -> Result<(), Failure> {
    let args = parse_extraction_args(options)?;
    let text = std::fs::read_to_string(&args.data)
        .map_err(|e| Failure::Run(format!("cannot read {}: {e}", args.data.display())))?;
    let started = Instant::now();
    let mut dialogues = parse_dialogues(&text).map_err(Failure::Run)?;
    if let Some(limit) = args.limit {
        dialogues.truncate(limit);
    }
    let scorer = Scorer::new();
    let mut baseline = Tally::default();
    let mut confident = Tally::default();
    let mut all_scores = Tally::default();
    for dialogue in &dialogues {
        for speaker in 0..2 {
            let gold = &dialogue.personas[speaker];
            let facts = builtin::extract(&speaker_request(dialogue, speaker));
            let kept: Vec<String> =
                facts.iter().filter(|f| f.score >= MIN_CONFIDENCE).map(|f| f.fact.clone()).collect();
            let every: Vec<String> = facts.into_iter().map(|f| f.fact).collect();
            confident.add(&scorer, &kept, gold);
            all_scores.add(&scorer, &every, gold);
            baseline.add(&scorer, &first_person_sentences(dialogue, speaker), gold);
        }
    }
    let elapsed = started.elapsed();
    println!(
        "extraction: {} ({} rows, {} speakers, {} persona lines) in {:.2} s",
        args.data.display(),
        dialogues.len(),
        dialogues.len() * 2,
        baseline.gold,
        elapsed.as_secs_f64()
    );
    println!("matching: greedy one-to-one, content-word token F1 >= {MATCH_F1}; micro-averaged\n");
    println!(
        "{:<34} {:>6} {:>6} {:>7} {:>9} {:>7} {:>7}",
        "method", "facts", "gold", "matched", "precision", "recall", "F1"
    );
    let threshold = format!("builtin (score >= {MIN_CONFIDENCE})");
    for (name, tally) in [
        ("baseline (first-person sentences)", &baseline),
        (threshold.as_str(), &confident),
        ("builtin (any score)", &all_scores),
    ] {
        println!(
            "{:<34} {:>6} {:>6} {:>7} {:>9.3} {:>7.3} {:>7.3}",
            name,
            tally.facts,
            tally.gold,
            tally.matched,
            tally.precision(),
            tally.recall(),
            tally.f1()
        );
    }
    Ok(())
}

/// The conversation as the extractor sees it when `speaker` is the user.
fn speaker_request(dialogue: &Dialogue, speaker: usize) -> ExtractionRequest {
    let turns = dialogue
        .turns
        .iter()
        .zip(1..)
        .map(|((who, text), seq)| Turn {
            seq,
            role: if *who == speaker { Role::User } else { Role::Assistant },
            text: text.clone(),
        })
        .collect();
    ExtractionRequest { turns, from_seq: 0, instructions: None }
}

const FIRST_PERSON: &[&str] = &["i", "i'm", "im", "i've", "i'd", "i'll", "me", "my", "mine", "myself"];

/// The baseline: every sentence of the speaker that mentions themself, verbatim.
fn first_person_sentences(dialogue: &Dialogue, speaker: usize) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (_, text) in dialogue.turns.iter().filter(|(who, _)| *who == speaker) {
        for sentence in text.split_inclusive(['.', '!', '?']) {
            let sentence = sentence.trim();
            let first_person = sentence
                .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '\u{2019}')
                .any(|w| FIRST_PERSON.contains(&w.replace('\u{2019}', "'").to_lowercase().as_str()));
            if first_person && seen.insert(sentence.to_lowercase()) {
                out.push(sentence.to_string());
            }
        }
    }
    out
}

fn parse_dialogues(text: &str) -> Result<Vec<Dialogue>, String> {
    let mut records = parse_csv(text)?.into_iter();
    let header = records.next().ok_or("empty CSV file")?;
    let column =
        |name: &str| header.iter().position(|h| h.trim() == name).ok_or_else(|| format!("missing column `{name}`"));
    let (p1, p2, conv) =
        (column("user 1 personas")?, column("user 2 personas")?, column("Best Generated Conversation")?);
    let field = |record: &[String], i: usize| record.get(i).cloned().unwrap_or_default();
    Ok(records
        .filter(|record| record.iter().any(|f| !f.trim().is_empty()))
        .map(|record| Dialogue {
            personas: [lines(&field(&record, p1)), lines(&field(&record, p2))],
            turns: parse_turns(&field(&record, conv)),
        })
        .collect())
}

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()
}

/// `User 1: ...` / `User 2: ...` lines; a line without a prefix continues the previous turn.
fn parse_turns(conversation: &str) -> Vec<(usize, String)> {
    let mut turns: Vec<(usize, String)> = Vec::new();
    for line in conversation.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let speaker = [("User 1:", 0), ("User 2:", 1)]
            .iter()
            .find_map(|(prefix, who)| line.strip_prefix(prefix).map(|rest| (*who, rest)));
        match (speaker, turns.last_mut()) {
            (Some((who, rest)), _) => turns.push((who, rest.trim().to_string())),
            (None, Some((_, text))) => {
                text.push(' ');
                text.push_str(line);
            }
            (None, None) => {}
        }
    }
    turns
}

/// RFC 4180: comma-separated fields, optionally double-quoted; quoted fields may hold
/// commas, line breaks and doubled quotes. Records end at CRLF or LF.
fn parse_csv(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut in_quotes = false;
    let mut line = 1;
    while let Some(c) = chars.next() {
        if c == '\n' {
            line += 1;
        }
        if in_quotes {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    field.push('"');
                    chars.next();
                }
                '"' => in_quotes = false,
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if field.is_empty() => in_quotes = true,
            ',' => record.push(std::mem::take(&mut field)),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            _ => field.push(c),
        }
    }
    if in_quotes {
        return Err(format!("unterminated quoted field at end of file (line {line})"));
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    Ok(records)
}

// ---------------------------------------------------------------------------------------
// Matching and metrics
// ---------------------------------------------------------------------------------------

/// Words the matching ignores beyond the search stop words (which include pronouns):
/// contraction leftovers and fillers that carry no content, so that "Likes tea" and
/// "I really like tea." compare equal.
const EXTRA_STOP_WORDS: [&str; 11] = ["d", "ll", "m", "o", "re", "ve", "y", "im", "ive", "also", "really"];

struct Scorer {
    stemmer: Stemmer,
    stop_words: HashSet<&'static str>,
}

impl Scorer {
    fn new() -> Self {
        Scorer {
            stemmer: Stemmer::create(Algorithm::English),
            stop_words: STOP_WORDS.iter().chain(EXTRA_STOP_WORDS.iter()).copied().collect(),
        }
    }

    /// Lowercased, split on non-alphanumerics, stop words dropped, stemmed.
    fn content_words(&self, text: &str) -> Vec<String> {
        text.to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty() && !self.stop_words.contains(w))
            .map(|w| self.stemmer.stem(w).into_owned())
            .collect()
    }
}

/// Token F1 of two bags of words (counting repeats, as in SQuAD).
fn token_f1(a: &[String], b: &[String]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for word in b {
        *counts.entry(word).or_default() += 1;
    }
    let mut common = 0usize;
    for word in a {
        if let Some(n) = counts.get_mut(word.as_str())
            && *n > 0
        {
            *n -= 1;
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / a.len() as f64;
    let recall = common as f64 / b.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// Pairs facts with gold lines, best overlap first, each used at most once; returns the
/// number of pairs.
fn greedy_match(facts: &[Vec<String>], gold: &[Vec<String>]) -> usize {
    let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
    for (i, fact) in facts.iter().enumerate() {
        for (j, line) in gold.iter().enumerate() {
            let f1 = token_f1(fact, line);
            if f1 >= MATCH_F1 {
                pairs.push((f1, i, j));
            }
        }
    }
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut fact_used = vec![false; facts.len()];
    let mut gold_used = vec![false; gold.len()];
    let mut matched = 0;
    for (_, i, j) in pairs {
        if !fact_used[i] && !gold_used[j] {
            fact_used[i] = true;
            gold_used[j] = true;
            matched += 1;
        }
    }
    matched
}

#[derive(Default)]
struct Tally {
    facts: usize,
    gold: usize,
    matched: usize,
}

impl Tally {
    fn add(&mut self, scorer: &Scorer, facts: &[String], gold: &[String]) {
        let facts: Vec<Vec<String>> = facts.iter().map(|f| scorer.content_words(f)).collect();
        let gold: Vec<Vec<String>> = gold.iter().map(|g| scorer.content_words(g)).collect();
        self.facts += facts.len();
        self.gold += gold.len();
        self.matched += greedy_match(&facts, &gold);
    }

    fn precision(&self) -> f64 {
        ratio(self.matched, self.facts)
    }

    fn recall(&self) -> f64 {
        ratio(self.matched, self.gold)
    }

    fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) }
    }
}

fn ratio(n: usize, d: usize) -> f64 {
    if d == 0 { 0.0 } else { n as f64 / d as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(scorer: &Scorer, text: &str) -> Vec<String> {
        scorer.content_words(text)
    }

    #[test]
    fn content_words_drop_stop_words_and_stem() {
        let scorer = Scorer::new();
        assert_eq!(words(&scorer, "I love to bake cookies."), ["love", "bake", "cooki"]);
        assert_eq!(words(&scorer, "Loves baking cookies"), ["love", "bake", "cooki"]);
        assert!(words(&scorer, "I am. You are!").is_empty());
    }

    #[test]
    fn token_f1_counts_overlap() {
        let scorer = Scorer::new();
        let a = words(&scorer, "Lives in Paris");
        let b = words(&scorer, "I live in Paris, France.");
        assert!((token_f1(&a, &b) - 2.0 * 1.0 * (2.0 / 3.0) / (1.0 + 2.0 / 3.0)).abs() < 1e-9);
        assert_eq!(token_f1(&a, &a), 1.0);
        assert_eq!(token_f1(&a, &[]), 0.0);
        assert_eq!(token_f1(&a, &words(&scorer, "Plays tennis")), 0.0);
        let repeated = vec!["tea".to_string(), "tea".to_string()];
        let once = vec!["tea".to_string()];
        assert!((token_f1(&repeated, &once) - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn greedy_match_is_one_to_one_best_first() {
        let scorer = Scorer::new();
        let facts: Vec<Vec<String>> =
            ["Likes tea", "Likes green tea", "Plays chess"].iter().map(|f| words(&scorer, f)).collect();
        let gold: Vec<Vec<String>> = ["I like green tea.", "I hate cats."].iter().map(|g| words(&scorer, g)).collect();
        // Both tea facts match the first line, but it can be used only once.
        assert_eq!(greedy_match(&facts, &gold), 1);
        let gold_both: Vec<Vec<String>> =
            ["I like green tea.", "I like tea."].iter().map(|g| words(&scorer, g)).collect();
        assert_eq!(greedy_match(&facts, &gold_both), 2);
        assert_eq!(greedy_match(&[], &gold), 0);
    }

    #[test]
    fn tally_micro_averages() {
        let tally = Tally { facts: 4, gold: 8, matched: 2 };
        assert_eq!(tally.precision(), 0.5);
        assert_eq!(tally.recall(), 0.25);
        assert!((tally.f1() - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(Tally::default().f1(), 0.0);
    }

    #[test]
    fn csv_handles_quotes_newlines_and_crlf() {
        let text = "a,b,c\r\n\"x, y\",\"line 1\nline 2\",\"say \"\"hi\"\"\"\r\nplain,,last";
        let records = parse_csv(text).expect("valid csv");
        assert_eq!(
            records,
            vec![vec!["a", "b", "c"], vec!["x, y", "line 1\nline 2", "say \"hi\""], vec!["plain", "", "last"],]
        );
        assert!(parse_csv("\"open").is_err());
    }

    #[test]
    fn dialogues_split_speakers() {
        let text = "user 1 personas,user 2 personas,Best Generated Conversation\n\
                    \"I like tea.\nI am a nurse.\",\"I play chess.\",\"User 1: Hi! I like tea.\n\
                    User 2: I play chess.\nand go.\"\n";
        let dialogues = parse_dialogues(text).expect("valid data");
        assert_eq!(dialogues.len(), 1);
        let d = &dialogues[0];
        assert_eq!(d.personas[0], ["I like tea.", "I am a nurse."]);
        assert_eq!(d.turns[1], (1, "I play chess. and go.".to_string()));
        let request = speaker_request(d, 1);
        assert_eq!(request.turns[0].role, Role::Assistant);
        assert_eq!(request.turns[1].role, Role::User);
        assert_eq!(request.turns[1].seq, 2);
        assert_eq!(first_person_sentences(d, 0), ["I like tea."]);
    }

    #[test]
    fn extraction_args() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let parsed = parse_extraction_args(&args(&["--data", "x.csv", "--limit=5"]))
            .map_err(|_| "parse failed")
            .expect("valid args");
        assert_eq!(parsed.data, PathBuf::from("x.csv"));
        assert_eq!(parsed.limit, Some(5));
        assert!(parse_extraction_args(&args(&["--limit", "many"])).is_err());
        assert!(parse_extraction_args(&args(&["--bogus"])).is_err());
        assert!(parse_extraction_args(&args(&["--data"])).is_err());
    }
}
