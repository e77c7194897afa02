//! What both LLM provider test files use: one extraction request, the model's answer to it
//! and the facts that answer holds, and a client with a short timeout.

use std::time::Duration;

use engram::domain::message::Role;
use engram::extract::{ExtractedFact, ExtractionRequest, Turn};

/// A short timeout, so the slow-server tests stay fast.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_millis(500)).build().expect("client builds")
}

/// A conversation whose new user line states two facts, with operator guidance.
pub fn request() -> ExtractionRequest {
    let turn = |seq, role, text: &str| Turn { seq, role, text: text.to_owned() };
    ExtractionRequest {
        turns: vec![
            turn(1, Role::User, "Hello there"),
            turn(2, Role::Assistant, "Hi! How can I help?"),
            turn(3, Role::User, "My name is Alice and I prefer tea over coffee"),
        ],
        from_seq: 2,
        instructions: Some("Ignore anything about pets.".to_owned()),
    }
}

/// The model's answer to [`request`].
pub const ANSWER: &str = r#"{"facts": [{"fact": "Name is Alice", "score": 0.95, "tags": ["identity"]}, {"fact": "Prefers tea over coffee", "score": 0.8}]}"#;

/// The facts [`ANSWER`] holds.
pub fn expected_facts() -> Vec<ExtractedFact> {
    vec![
        ExtractedFact { fact: "Name is Alice".to_owned(), score: 0.95, tags: vec!["identity".to_owned()] },
        ExtractedFact { fact: "Prefers tea over coffee".to_owned(), score: 0.8, tags: vec![] },
    ]
}
