//! Single-valued slots: what a person has one of at a time (a name, a home city, a job, an
//! employer, an age, a relationship status, a birthday). A newer fact in the same slot
//! supersedes the older one, so "Lives in Lyon" and, a month later, "Moved to Paris" do
//! not both stay in memory as if both were true.
//!
//! A fact's slot is read from the start of its text, in the third-person forms the
//! builtin extractor writes and the LLM prompt asks for ("Lives in …", "Works as …",
//! "Is 34 years old"). The rule is deliberately narrow: a fact in no slot is never
//! superseded, so a missed slot costs a stale fact, while a wrong one would hide a true
//! one. Linear in the text's length.

/// A single-valued slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    Name,
    Home,
    Job,
    Employer,
    Age,
    Relationship,
    Birthday,
}

/// Lower-case openings that put a fact in a slot.
const OPENINGS: &[(&str, Slot)] = &[
    ("name is ", Slot::Name),
    ("is named ", Slot::Name),
    ("is called ", Slot::Name),
    ("goes by ", Slot::Name),
    ("lives in ", Slot::Home),
    ("lives at ", Slot::Home),
    ("moved to ", Slot::Home),
    ("relocated to ", Slot::Home),
    ("home is in ", Slot::Home),
    ("works as ", Slot::Job),
    ("job is ", Slot::Job),
    ("has a new job as ", Slot::Job),
    ("is employed as ", Slot::Job),
    ("works at ", Slot::Employer),
    ("works for ", Slot::Employer),
    ("employer is ", Slot::Employer),
    ("is employed at ", Slot::Employer),
    ("is employed by ", Slot::Employer),
    ("birthday is ", Slot::Birthday),
    ("was born on ", Slot::Birthday),
    ("age is ", Slot::Age),
];

/// Relationship statuses, as the whole rest of an "Is …" fact.
const STATUSES: &[&str] =
    &["married", "single", "divorced", "engaged", "widowed", "separated", "in a relationship", "dating someone"];

impl Slot {
    /// The slot a fact's text fills, if any.
    pub fn of(fact: &str) -> Option<Slot> {
        let text = fact.trim().trim_end_matches(['.', '!']).to_lowercase();
        if let Some(slot) = OPENINGS.iter().find_map(|(opening, slot)| text.starts_with(opening).then_some(*slot)) {
            return Some(slot);
        }
        let rest = text.strip_prefix("is ")?;
        if STATUSES.contains(&rest) || rest.strip_prefix("now ").is_some_and(|r| STATUSES.contains(&r)) {
            return Some(Slot::Relationship);
        }
        let years = rest.strip_suffix(" years old")?;
        years.bytes().all(|b| b.is_ascii_digit()).then_some(Slot::Age).filter(|_| !years.is_empty())
    }

    /// The name stored in the `slot` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Slot::Name => "name",
            Slot::Home => "home",
            Slot::Job => "job",
            Slot::Employer => "employer",
            Slot::Age => "age",
            Slot::Relationship => "relationship",
            Slot::Birthday => "birthday",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_valued_facts_have_their_slot() {
        let cases = [
            ("Name is Jean-Luc", Slot::Name),
            ("Lives in Lyon", Slot::Home),
            ("Moved to Paris.", Slot::Home),
            ("Works as a nurse", Slot::Job),
            ("Has a new job as a nurse", Slot::Job),
            ("Works at Acme", Slot::Employer),
            ("works for the city", Slot::Employer),
            ("Is 34 years old", Slot::Age),
            ("Is married", Slot::Relationship),
            ("Is now single", Slot::Relationship),
            ("Birthday is May 3", Slot::Birthday),
        ];
        for (fact, slot) in cases {
            assert_eq!(Slot::of(fact), Some(slot), "{fact}");
        }
    }

    #[test]
    fn facts_a_person_has_many_of_have_none() {
        for fact in [
            "Likes tea",
            "Is a vegan",
            "Is allergic to peanuts",
            "Lived in Rome as a child",
            "Has a daughter named Emma",
            "Is married to the idea of travel",
            "Is thirty years old",
            "Is years old",
            "Speaks French",
            "Worked at Acme before",
        ] {
            assert_eq!(Slot::of(fact), None, "{fact}");
        }
    }
}
