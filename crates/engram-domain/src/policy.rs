//! Whether memory may be used for one user of one agent: the agent's settings and the
//! user's consent, read together in one query and resolved here only, so the end
//! decision, the extraction and the memory context cannot disagree.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::{
    agent_config::Settings,
    ids::{AgentId, ExternalRef},
};

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// The agent's settings; `None` when the agent was never configured (memory off).
    pub agent: Option<Settings>,
    /// The user's stored consent; `None` when they never said.
    pub stored_consent: Option<bool>,
}

impl Policy {
    /// The agent's settings, or the defaults when it was never configured.
    pub fn settings(&self) -> Settings {
        self.agent.clone().unwrap_or_default()
    }

    /// The user's consent: as stored, else `ENGRAM_DEFAULT_AI_CONSENT`.
    pub fn consent(&self, default_consent: bool) -> bool {
        resolve_consent(self.stored_consent, default_consent)
    }

    /// True when the agent's memory is on and the user consents.
    pub fn memory_on(&self, default_consent: bool) -> bool {
        self.agent.as_ref().is_some_and(|a| a.memory_enabled) && self.consent(default_consent)
    }

    /// The other agents whose facts the agent's reads take too: its `reads_facts_of`
    /// while its memory is on and the user consents, none otherwise. (Each of them is
    /// read only while its own memory is on, which the read itself tests.)
    pub fn shared_agents(&self, default_consent: bool) -> &[AgentId] {
        match &self.agent {
            Some(settings) if self.memory_on(default_consent) => &settings.reads_facts_of,
            _ => &[],
        }
    }
}

/// A stored consent wins; a user who never said gets the configured default.
pub fn resolve_consent(stored: Option<bool>, default_consent: bool) -> bool {
    stored.unwrap_or(default_consent)
}

/// A user's consent as the API and the export show it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Consent {
    pub external_ref: ExternalRef,
    pub ai_consent: bool,
    /// Null when the user never said (the configured default applies).
    pub updated_at: Option<DateTime<Utc>>,
}

impl Consent {
    /// The stored record (consent and when it was set), or the configured default.
    pub fn view(user: &ExternalRef, stored: Option<(bool, DateTime<Utc>)>, default_consent: bool) -> Consent {
        let ai_consent = resolve_consent(stored.map(|(consent, _)| consent), default_consent);
        Consent { external_ref: user.clone(), ai_consent, updated_at: stored.map(|(_, at)| at) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on() -> Option<Settings> {
        Some(Settings { memory_enabled: true, ..Settings::default() })
    }

    #[test]
    fn stored_consent_overrides_the_default() {
        assert!(Policy { agent: on(), stored_consent: Some(true) }.consent(false));
        assert!(!Policy { agent: on(), stored_consent: Some(false) }.consent(true));
        assert!(Policy { agent: on(), stored_consent: None }.consent(true));
        assert!(!Policy { agent: on(), stored_consent: None }.consent(false));
    }

    #[test]
    fn memory_needs_a_configured_agent_switched_on_and_consent() {
        assert!(Policy { agent: on(), stored_consent: None }.memory_on(true));
        assert!(!Policy { agent: None, stored_consent: Some(true) }.memory_on(true));
        let off = Some(Settings { memory_enabled: false, ..Settings::default() });
        assert!(!Policy { agent: off, stored_consent: Some(true) }.memory_on(true));
        assert!(!Policy { agent: on(), stored_consent: Some(false) }.memory_on(true));
    }

    #[test]
    fn shared_agents_are_read_only_while_memory_is_on_and_the_user_consents() {
        let profile = vec![AgentId::parse("profile".into()).unwrap()];
        let sharing =
            |memory_enabled| Some(Settings { memory_enabled, reads_facts_of: profile.clone(), ..Settings::default() });
        assert_eq!(Policy { agent: sharing(true), stored_consent: None }.shared_agents(true), &profile[..]);
        assert!(Policy { agent: sharing(true), stored_consent: Some(false) }.shared_agents(true).is_empty());
        assert!(Policy { agent: sharing(false), stored_consent: Some(true) }.shared_agents(true).is_empty());
        assert!(Policy { agent: None, stored_consent: Some(true) }.shared_agents(true).is_empty());
    }

    #[test]
    fn unconfigured_agents_get_the_default_settings() {
        assert_eq!(Policy { agent: None, stored_consent: None }.settings(), Settings::default());
    }
}
