//! Property-test strategies for the domain's types, for this crate's tests and, through
//! the `strategies` feature, for the tests of crates above that write them.
// Test code: a strategy that cannot build its value is a fault of the strategy.
#![allow(clippy::expect_used)]

use chrono::{DateTime, Utc};
use proptest::{collection::vec, option, prelude::*};
use uuid::Uuid;

use crate::{
    fact::{Fact, Source, SourceMessage},
    ids::{AgentId, ExternalRef},
};

/// Any string, with what JSON must escape (quotes, backslashes, control characters)
/// and what it must not (DEL, non-ASCII) often in it.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z ]{0,40}", "[\\x00-\\x1f\"\\\\\\x7f a-zé€😀/]{0,20}", any::<String>(),]
}

/// Any time chrono can hold, years past 9999 and leap seconds (which chrono writes
/// its own way) included.
pub fn time() -> impl Strategy<Value = DateTime<Utc>> {
    prop_oneof![
        (0i64..4_102_444_800, 0u32..1_000_000_000, 0u32..3).prop_map(|(secs, nanos, coarse)| {
            let nanos = match coarse {
                0 => 0,
                1 => nanos / 1_000_000 * 1_000_000,
                _ => nanos,
            };
            DateTime::from_timestamp(secs, nanos).expect("in range")
        }),
        (-8_000_000_000_000i64..8_000_000_000_000, 0u32..2_000_000_000)
            .prop_filter_map("in chrono's range", |(secs, nanos)| DateTime::from_timestamp(secs, nanos)),
    ]
}

pub fn score() -> impl Strategy<Value = Option<f64>> {
    option::of(prop_oneof![0.0..=1.0, Just(0.5), Just(1.0), Just(f64::NAN), Just(1e-9), Just(1e300), any::<f64>()])
}

pub fn fact() -> impl Strategy<Value = Fact> {
    let source =
        prop_oneof![Just(Source::Extracted), Just(Source::Manual), Just(Source::Agent), Just(Source::BuiltinFallback)];
    (
        (any::<u128>(), "[A-Za-z0-9._:-]{1,20}", "[A-Za-z0-9._:+@\"\\\\-]{1,30}", text(), vec(text(), 0..4), score()),
        (
            source,
            option::of(any::<u128>()),
            vec((any::<u128>(), any::<i64>()), 0..3),
            time(),
            time(),
            option::of(any::<u128>()),
            option::of(time()),
        ),
        (time(), option::of(time()), option::of(time()), any::<i64>(), option::of(time()), any::<(bool, bool)>()),
    )
        .prop_map(
            |(
                (id, agent, user, fact, tags, score),
                (source, conversation, sources, created_at, updated_at, superseded_by, superseded_at),
                (observed_at, valid_until, expires_at, recall_count, last_recalled_at, (same_update, same_observed)),
            )| Fact {
                id: Uuid::from_u128(id),
                agent_id: AgentId::parse(agent).expect("an agent id"),
                external_ref: ExternalRef::parse(user).expect("an external ref"),
                fact,
                tags,
                score,
                source,
                conversation_id: conversation.map(Uuid::from_u128),
                source_messages: sources
                    .into_iter()
                    .map(|(id, seq)| SourceMessage { conversation_id: Uuid::from_u128(id), seq })
                    .collect(),
                created_at,
                // Mostly one time, as stored facts have them.
                updated_at: if same_update { created_at } else { updated_at },
                superseded_by: superseded_by.map(Uuid::from_u128),
                superseded_at,
                observed_at: if same_observed { created_at } else { observed_at },
                valid_until,
                expires_at,
                recall_count,
                last_recalled_at,
            },
        )
}
