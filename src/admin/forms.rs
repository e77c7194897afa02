//! What the panel's forms share: the messages of a refused form, by field.

use std::collections::BTreeMap;

/// Messages by field name, for the form shown again.
#[derive(Debug, Default)]
pub struct FieldErrors(BTreeMap<&'static str, String>);

impl FieldErrors {
    pub fn get(&self, field: &str) -> Option<&String> {
        self.0.get(field)
    }

    pub fn add(&mut self, field: &'static str, message: String) {
        self.0.entry(field).or_insert(message);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
