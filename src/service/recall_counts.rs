//! Recall bookkeeping without a write on the read path: the reads that return facts
//! (memory context and search, over REST, the tools and MCP) note the ids they returned
//! here, in memory; the flusher (`worker::recall_flush`) takes what gathered and adds it
//! to the facts' `recall_count` / `last_recalled_at` in batches. A crash loses the counts
//! gathered since the last flush, never a fact.

use std::{collections::HashMap, sync::Mutex};

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Facts with counts waiting for a flush, at most: past it new facts' recalls are
/// dropped (counted in `engram_recalls_dropped_total`) rather than the map growing. Far
/// above what a flush interval gathers at the measured read rates (a few thousand
/// requests a second, ten facts each, mostly the same facts), and about 5 MB when full.
pub const CAPACITY: usize = 100_000;

/// The counts gathered since the last flush: per fact, how many reads returned it and
/// when the last one did.
#[derive(Debug)]
pub struct RecallCounts {
    enabled: bool,
    pending: Mutex<HashMap<Uuid, (u32, DateTime<Utc>)>>,
}

impl RecallCounts {
    /// `enabled` false (`ENGRAM_RECALL_TRACKING=false`) makes [`RecallCounts::note`] a no-op.
    pub fn new(enabled: bool) -> RecallCounts {
        RecallCounts { enabled, pending: Mutex::new(HashMap::new()) }
    }

    /// Notes that a read returned the facts `ids`, now. Takes the lock once for all of
    /// them, for as long as a few map updates.
    pub fn note(&self, ids: impl IntoIterator<Item = Uuid>) {
        if !self.enabled {
            return;
        }
        let now = crate::store::now();
        let mut dropped = 0u64;
        {
            // A poisoned lock only means another read panicked mid-update: counts are
            // advisory, so carry on with what is there.
            let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for id in ids {
                let full = pending.len() >= CAPACITY;
                match pending.get_mut(&id) {
                    Some((count, last)) => {
                        *count = count.saturating_add(1);
                        *last = now;
                    }
                    None if full => dropped += 1,
                    None => {
                        pending.insert(id, (1, now));
                    }
                }
            }
        }
        if dropped > 0 {
            metrics::counter!("engram_recalls_dropped_total").increment(dropped);
        }
    }

    /// Takes everything gathered so far, leaving the map empty.
    pub fn take(&self) -> Vec<(Uuid, u32, DateTime<Utc>)> {
        let taken = std::mem::take(&mut *self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        taken.into_iter().map(|(id, (count, last))| (id, count, last)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_fact_and_empties_on_take() {
        let counts = RecallCounts::new(true);
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        counts.note([a, b]);
        counts.note([a]);
        let mut taken = counts.take();
        taken.sort_by_key(|(id, ..)| *id);
        assert_eq!(taken.iter().map(|(id, n, _)| (*id, *n)).collect::<Vec<_>>(), [(a, 2), (b, 1)]);
        assert!(counts.take().is_empty());
    }

    #[test]
    fn a_full_map_drops_new_facts_but_still_counts_known_ones() {
        let counts = RecallCounts::new(true);
        counts.note((0..CAPACITY).map(|_| Uuid::now_v7()));
        let known = counts.take()[0].0;
        counts.note((0..CAPACITY - 1).map(|_| Uuid::now_v7()).chain([known]));
        let newcomer = Uuid::now_v7();
        counts.note([newcomer, known]);
        let taken = counts.take();
        assert_eq!(taken.len(), CAPACITY);
        assert!(!taken.iter().any(|(id, ..)| *id == newcomer), "a new fact is dropped when full");
        assert!(taken.iter().any(|(id, n, _)| *id == known && *n == 2), "a known one still counts");
    }

    #[test]
    fn off_notes_nothing() {
        let counts = RecallCounts::new(false);
        counts.note([Uuid::now_v7()]);
        assert!(counts.take().is_empty());
    }
}
