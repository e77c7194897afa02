//! What the clause model sees of a clause: its words, word pairs, its opening words by
//! position, its length and whether the other person had just asked something, each
//! hashed into a fixed number of buckets so that the model is one array of weights and a
//! clause costs time linear in its length.

use super::tokens::Tok;

/// log2 of the number of hashed feature buckets: 32 768 weights, 128 KiB as `f32`.
pub const BITS: u32 = 15;

/// The conversation around a clause that its words do not show.
#[derive(Clone, Copy, Default)]
pub(super) struct Context {
    /// The other person's last turn asked a question, which this turn may answer.
    pub(super) asked: bool,
    /// The clause opens its sentence (a later clause is more often an aside).
    pub(super) opens_sentence: bool,
}

/// The hashed features of `clause` (lead words skipped by the caller), sorted and without
/// repeats.
/// `doubted`: the clause is a rule's fact scored below the default threshold, not a
/// restatement.
pub(super) fn of(clause: &[Tok], context: Context, doubted: bool) -> Vec<u32> {
    let words: Vec<&str> = clause.iter().filter(|t| t.word).map(|t| t.lower.as_str()).collect();
    let mut out = Vec::with_capacity(3 * words.len() + 8);
    out.push(bucket("bias", ""));
    for (i, word) in words.iter().enumerate() {
        out.push(bucket("w", word));
        if i < 3 {
            out.push(bucket(["p0", "p1", "p2"][i], word));
        }
        if let Some(next) = words.get(i + 1) {
            out.push(pair("b", word, next));
        }
    }
    if let [a, b, ..] = words.as_slice() {
        out.push(pair("p01", a, b));
    }
    if let [_, b, c, ..] = words.as_slice() {
        out.push(pair("p12", b, c));
    }
    if let Some(last) = words.last() {
        out.push(bucket("last", last));
    }
    let length = match words.len() {
        0..=3 => "short",
        4..=6 => "medium",
        7..=10 => "long",
        _ => "very long",
    };
    out.push(bucket("len", length));
    if context.asked {
        out.push(bucket("ctx", "asked"));
    }
    if doubted {
        out.push(bucket("ctx", "doubted"));
    }
    if context.opens_sentence {
        out.push(bucket("ctx", "opens"));
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn bucket(kind: &str, word: &str) -> u32 {
    index(fnv1a(fnv1a(OFFSET, kind.as_bytes()), word.as_bytes()))
}

fn pair(kind: &str, a: &str, b: &str) -> u32 {
    index(fnv1a(fnv1a(fnv1a(OFFSET, kind.as_bytes()), a.as_bytes()), b.as_bytes()))
}

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, with a separator byte after each part so that "ab"+"c" and "a"+"bc" differ. A
/// hash of our own, not `std`'s, whose output may change between Rust releases and would
/// silently scramble the stored weights.
fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes.iter().chain(&[0xff]) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn index(hash: u64) -> u32 {
    // The high bits mix best; fold them into the low ones before masking.
    ((hash ^ (hash >> 32)) & ((1 << BITS) - 1)) as u32
}

#[cfg(test)]
mod tests {
    use super::super::tokens::tokenize;
    use super::*;

    #[test]
    fn features_are_stable_sorted_and_within_the_buckets() {
        let features = of(&tokenize("I restore old clocks"), Context::default(), false);
        assert_eq!(features, of(&tokenize("I restore old clocks"), Context::default(), false));
        assert!(features.windows(2).all(|p| p[0] < p[1]));
        assert!(features.iter().all(|&f| f < 1 << BITS));
        let asked = of(&tokenize("I restore old clocks"), Context { asked: true, opens_sentence: false }, false);
        assert_ne!(features, asked);
        // The hash is fixed: the stored weights depend on it.
        assert_eq!(bucket("w", "clocks"), 8370);
    }
}
