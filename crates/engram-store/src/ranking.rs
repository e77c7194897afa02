//! Full-text ranking of an owner's facts, from the query words each matching fact holds.
//!
//! The database finds the owner's facts that hold any query word (one index lookup per
//! word, see [`super::word_index`]), each with the words it holds; the scoring is done
//! here. Done in SQL it materialised a row per (fact, word), counted each word's facts and
//! grouped the pairs by fact, through sorters: when every query word is common among the
//! owner's facts (a user's name, "likes", their city; an agent passing a whole message as
//! the query) that was most of a 20-word search's time, ~2.8 of ~4.5 ms on SQLite for
//! 3 585 pairs. Here it is two passes over the matching facts and a selection of the best
//! `limit`.

use uuid::Uuid;
/// One fact the ranking kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ranked {
    pub(super) id: Uuid,
    /// Distinct query words the fact holds.
    pub(super) matched: i64,
    /// The sum, over those words, of one over the number of the owner's matching facts
    /// that hold the word (an IDF that needs no logarithm), in billionths rounded to a
    /// whole number of them, so that sums of the same terms tie however they were added.
    pub(super) rarity: i64,
}

impl Ranked {
    /// [`Ranked::rarity`] as the number it stands for.
    pub(super) fn rarity(&self) -> f64 {
        self.rarity as f64 / 1e9
    }

    /// Best first: most words, then rarest words, then newest (ids are time-ordered).
    fn key(&self) -> (i64, i64, Uuid) {
        (self.matched, self.rarity, self.id)
    }
}

/// The `limit` best of `matches` (each matching fact once, with a bit set for each query
/// word it holds, words in the query's order), best first. Linear in the matches, plus
/// the sort of the `limit` kept.
pub(super) fn rank(matches: &[(Uuid, u64)], limit: usize) -> Vec<Ranked> {
    let mut holders = [0_u32; 64];
    for &(_, held) in matches {
        for word in words(held) {
            holders[word] += 1;
        }
    }
    // A word's facts are at most the owner's cap: the conversion is exact.
    let weights = holders.map(|count| if count == 0 { 0.0 } else { 1.0 / f64::from(count) });
    let mut ranked: Vec<Ranked> = matches
        .iter()
        .filter(|(_, held)| *held != 0)
        .map(|&(id, held)| {
            // Added in the query's order, so a fact's sum is the same however it was found.
            let rarity: f64 = words(held).map(|word| weights[word]).sum();
            Ranked { id, matched: i64::from(held.count_ones()), rarity: (rarity * 1e9).round() as i64 }
        })
        .collect();
    let best_first = |a: &Ranked, b: &Ranked| b.key().cmp(&a.key());
    if limit == 0 {
        return Vec::new();
    }
    if ranked.len() > limit {
        ranked.select_nth_unstable_by(limit - 1, best_first);
        ranked.truncate(limit);
    }
    ranked.sort_unstable_by(best_first);
    ranked
}

/// The words whose bits `held` sets, in the query's order.
fn words(held: u64) -> impl Iterator<Item = usize> {
    let mut rest = held;
    std::iter::from_fn(move || {
        let word = rest.trailing_zeros() as usize;
        rest &= rest.wrapping_sub(1);
        (word < 64).then_some(word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rank` of each query word's facts (each fact once per word), as a statement listing
    /// them word by word would give them.
    fn rank_postings(postings: &[Vec<Uuid>], limit: usize) -> Vec<Ranked> {
        let mut matches: Vec<(Uuid, u64)> = Vec::new();
        for (word, facts) in postings.iter().enumerate() {
            for id in facts {
                match matches.iter_mut().find(|(known, _)| known == id) {
                    Some((_, held)) => *held |= 1 << word,
                    None => matches.push((*id, 1 << word)),
                }
            }
        }
        rank(&matches, limit)
    }

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn most_words_then_rarest_words_then_newest() {
        // Word a: facts 1, 2, 3; word b: facts 2, 3; word c: fact 4 alone.
        let postings = [vec![id(1), id(2), id(3)], vec![id(2), id(3)], vec![id(4)], vec![]];
        let ranked = rank_postings(&postings, 10);
        let order: Vec<Uuid> = ranked.iter().map(|r| r.id).collect();
        // 2 and 3 hold two words (tied on rarity: the newer, 3, first); 4's one word is
        // rarer than 1's.
        assert_eq!(order, [id(3), id(2), id(4), id(1)]);
        assert_eq!(ranked[0].matched, 2);
        assert_eq!(ranked[0].rarity, 833_333_333, "1/3 + 1/2 in billionths");
        assert_eq!(ranked[2].rarity(), 1.0);
    }

    #[test]
    fn keeps_the_best_limit_in_order() {
        // Fact n holds the words 0..n: the more words, the higher.
        let postings: Vec<Vec<Uuid>> = (0..50).map(|word| (word + 1..=50).map(id).collect()).collect();
        let ranked = rank_postings(&postings, 5);
        let order: Vec<u128> = ranked.iter().map(|r| r.id.as_u128()).collect();
        assert_eq!(order, [50, 49, 48, 47, 46]);
        assert_eq!(ranked[0].matched, 50);
        assert!(rank_postings(&postings, 0).is_empty());
        assert_eq!(rank_postings(&postings, 500).len(), 50);
    }

    #[test]
    fn sums_of_the_same_terms_tie_whatever_their_order() {
        // Fact 1 holds words of 10, 5 and 3 facts, in that order; fact 2 the same sizes
        // the other way round. Added in another order, doubles may differ in their last
        // bits; in billionths they tie, and the newer fact wins. Every other fact holds
        // one word.
        let word = |holder: u128, size: u128, filler: u128| -> Vec<Uuid> {
            std::iter::once(id(holder)).chain((1..size).map(|k| id(filler + k))).collect()
        };
        let postings =
            [word(1, 10, 100), word(1, 5, 200), word(1, 3, 300), word(2, 3, 400), word(2, 5, 500), word(2, 10, 600)];
        let ranked = rank_postings(&postings, 2);
        assert_eq!(ranked[0].rarity, ranked[1].rarity);
        assert_eq!(ranked.iter().map(|r| r.id).collect::<Vec<_>>(), [id(2), id(1)]);
    }

    #[test]
    fn the_last_of_64_words_counts_and_a_fact_holding_none_is_left_out() {
        let matches = [(id(1), 1 << 63), (id(2), 0), (id(3), 1 | 1 << 63)];
        let ranked = rank(&matches, 10);
        assert_eq!(ranked.iter().map(|r| r.id).collect::<Vec<_>>(), [id(3), id(1)]);
        assert_eq!((ranked[0].matched, ranked[0].rarity), (2, 1_500_000_000), "1/1 + 1/2 in billionths");
        assert_eq!((ranked[1].matched, ranked[1].rarity), (1, 500_000_000));
    }
}
