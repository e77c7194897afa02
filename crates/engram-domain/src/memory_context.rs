//! The memory context an agent fetches at the start of a conversation: whether it may
//! have one at all, which facts it gets, and the prompt block built from exactly those.

use serde::Serialize;
use utoipa::ToSchema;

use super::{
    fact::Fact,
    policy::Policy,
    prompt::{self, PromptFact},
    search_query::SearchQuery,
    working_memory::WorkingMemory,
};

/// Most facts one memory context may ask for.
pub const MAX_FACTS: usize = 100;

/// The answer of `GET …/memory-context`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct MemoryContext {
    /// False when the agent's memory is off or the user refused consent; `facts` and
    /// `prompt` are then empty.
    pub enabled: bool,
    /// Exactly the facts in `prompt`, in the same order.
    pub facts: Vec<Fact>,
    /// The fenced `<user-memory>` block ("" when there is no fact), then, with
    /// `working_memory=true`, a blank line and the `<working-memory>` block.
    #[schema(example = "<user-memory>\n- Name is Alice\n- Prefers tea over coffee\n</user-memory>")]
    pub prompt: String,
    /// Only with `working_memory=true`: the agent's working memory document about the
    /// user, or null when it has none. Its block is in `prompt` when it has text and
    /// fits `token_budget` (it is never cut: it is left out whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<WorkingMemory>)]
    pub working_memory: Option<Option<WorkingMemory>>,
}

impl MemoryContext {
    pub fn disabled() -> MemoryContext {
        MemoryContext { enabled: false, facts: Vec::new(), prompt: String::new(), working_memory: None }
    }

    /// Builds the context from `candidates` in priority order (relevant first, then
    /// recent; the same fact may appear twice): repeats dropped, the first
    /// `max_facts` kept, then the lowest-scored ones dropped until the prompt fits
    /// `token_budget`. Facts that render to nothing are left out of both lists.
    ///
    /// `working_memory` is `Some` when the caller asked for it: its block is fitted
    /// first and the facts share what is left of the budget.
    pub fn assemble(
        candidates: Vec<Fact>,
        max_facts: usize,
        token_budget: Option<usize>,
        working_memory: Option<Option<WorkingMemory>>,
    ) -> MemoryContext {
        let budget = token_budget.unwrap_or(usize::MAX);
        // The separator goes with the block: a fact block plus this never exceeds the
        // budget, as the estimate of a sum is at most the sum of the estimates.
        let block = working_memory
            .as_ref()
            .and_then(|document| document.as_ref())
            .map(|document| prompt::render_working_memory(&document.content))
            .filter(|block| !block.is_empty())
            .map(|block| (prompt::estimate_tokens(&format!("\n\n{block}")), block))
            .filter(|(cost, _)| *cost <= budget);
        let facts_budget = budget - block.as_ref().map_or(0, |(cost, _)| *cost);
        let mut unique: Vec<Fact> = Vec::with_capacity(max_facts.min(candidates.len()));
        for fact in candidates {
            if unique.len() == max_facts {
                break;
            }
            if !unique.iter().any(|kept| kept.id == fact.id) {
                unique.push(fact);
            }
        }
        let prompt_facts: Vec<PromptFact<'_>> =
            unique.iter().map(|f| PromptFact { text: &f.fact, score: f.score }).collect();
        let (kept, mut prompt) = prompt::fit_and_render(&prompt_facts, facts_budget);
        if let Some((_, block)) = block {
            if !prompt.is_empty() {
                prompt.push_str("\n\n");
            }
            prompt.push_str(&block);
        }
        // `kept` is ascending, so the facts stay in the prompt's order.
        let facts =
            unique.into_iter().enumerate().filter(|(i, _)| kept.binary_search(i).is_ok()).map(|(_, f)| f).collect();
        MemoryContext { enabled: true, facts, prompt, working_memory }
    }
}

/// How many facts the memory context gives by default, or `None` when it must be
/// empty: memory off or never configured, or consent refused (stored, or by default).
pub fn default_max_facts(policy: &Policy, default_consent: bool) -> Option<usize> {
    let max_injected_facts = policy.agent.as_ref()?.max_injected_facts;
    policy.memory_on(default_consent).then(|| usize::try_from(max_injected_facts).unwrap_or(0).clamp(1, MAX_FACTS))
}

/// The query string of `GET …/memory-context`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextRequest {
    /// `None` when absent or blank: a blank query asks for nothing in particular.
    pub query: Option<SearchQuery>,
    pub max_facts: Option<usize>,
    pub token_budget: Option<usize>,
    /// Include the agent's working memory document about the user.
    pub working_memory: bool,
    /// The facts current at this time instead of now (`as_of`).
    pub as_of: Option<chrono::DateTime<chrono::Utc>>,
}

impl ContextRequest {
    pub fn parse(
        query: Option<&str>,
        max_facts: Option<i64>,
        token_budget: Option<i64>,
        working_memory: bool,
    ) -> Result<Self, String> {
        let max_facts = max_facts
            .map(|n| {
                usize::try_from(n)
                    .ok()
                    .filter(|n| (1..=MAX_FACTS).contains(n))
                    .ok_or_else(|| format!("max_facts must be 1-{MAX_FACTS}, got {n}"))
            })
            .transpose()?;
        let token_budget = token_budget
            .map(|n| {
                usize::try_from(n)
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| format!("token_budget must be at least 1, got {n}"))
            })
            .transpose()?;
        // Blank asks for nothing in particular; a query over the caps is a mistake.
        let query = query.filter(|q| !q.trim().is_empty()).map(SearchQuery::parse).transpose()?;
        Ok(ContextRequest { query, max_facts, token_budget, working_memory, as_of: None })
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use uuid::Uuid;

    use super::*;
    use crate::{
        agent_config::Settings,
        fact::Source,
        ids::{AgentId, ExternalRef},
    };

    fn fact(text: &str, score: Option<f64>) -> Fact {
        Fact {
            id: Uuid::now_v7(),
            agent_id: AgentId::parse("bot".into()).unwrap(),
            external_ref: ExternalRef::parse("u1".into()).unwrap(),
            fact: text.into(),
            tags: vec![],
            score,
            source: Source::Manual,
            conversation_id: None,
            source_messages: vec![],
            created_at: Utc::now(),
            updated_at: Utc::now(),
            superseded_by: None,
            superseded_at: None,
            observed_at: Utc::now(),
            valid_until: None,
            expires_at: None,
            recall_count: 0,
            last_recalled_at: None,
        }
    }

    fn texts(context: &MemoryContext) -> Vec<&str> {
        context.facts.iter().map(|f| f.fact.as_str()).collect()
    }

    #[test]
    fn repeats_are_dropped_before_counting() {
        let (a, b, c) = (fact("a", None), fact("b", None), fact("c", None));
        let candidates = vec![b.clone(), a.clone(), b.clone(), a, c];
        let context = MemoryContext::assemble(candidates, 3, None, None);
        assert_eq!(texts(&context), ["b", "a", "c"]);
        assert_eq!(context.prompt, "<user-memory>\n- b\n- a\n- c\n</user-memory>");
        assert!(context.enabled);
    }

    #[test]
    fn budget_drops_lowest_scores_and_facts_match_the_prompt() {
        let candidates = vec![fact("fact #0", Some(0.2)), fact("fact #1", None), fact("fact #2", Some(0.9))];
        let context = MemoryContext::assemble(candidates, 10, Some(12), None);
        assert_eq!(texts(&context), ["fact #1", "fact #2"]);
        assert_eq!(context.prompt, "<user-memory>\n- fact #1\n- fact #2\n</user-memory>");
        assert!(prompt::estimate_tokens(&context.prompt) <= 12);
    }

    fn document(content: &str) -> Option<Option<WorkingMemory>> {
        Some(Some(WorkingMemory { content: content.into(), etag: "v1".into(), updated_at: Utc::now() }))
    }

    #[test]
    fn working_memory_follows_the_facts_and_takes_its_share_of_the_budget() {
        let candidates = || vec![fact("fact #1", Some(0.9)), fact("fact #2", Some(0.2))];
        let context = MemoryContext::assemble(candidates(), 10, None, document("plan: trains"));
        assert_eq!(
            context.prompt,
            "<user-memory>\n- fact #1\n- fact #2\n</user-memory>\n\n<working-memory>\nplan: trains\n</working-memory>"
        );
        // 49 characters of separator and document block (13 tokens) leave 44 characters for facts: one.
        let context = MemoryContext::assemble(candidates(), 10, Some(24), document("plan: trains"));
        assert_eq!(texts(&context), ["fact #1"]);
        assert!(context.prompt.ends_with("</working-memory>"));
        assert!(prompt::estimate_tokens(&context.prompt) <= 24, "{}", context.prompt);
        // A document over the budget is left out whole; the facts keep the budget.
        let context = MemoryContext::assemble(candidates(), 10, Some(12), document(&"x".repeat(100)));
        assert_eq!(texts(&context), ["fact #1", "fact #2"]);
        assert!(!context.prompt.contains("working-memory") && context.working_memory.is_some());
        // Asked for and absent: null in the answer, nothing in the prompt.
        let context = MemoryContext::assemble(vec![], 10, None, Some(None));
        assert_eq!(serde_json::to_value(&context).unwrap()["working_memory"], serde_json::Value::Null);
        assert!(context.prompt.is_empty());
        let context = MemoryContext::assemble(vec![], 10, None, document("alone"));
        assert_eq!(context.prompt, "<working-memory>\nalone\n</working-memory>");
        let not_asked = serde_json::to_value(MemoryContext::assemble(vec![], 10, None, None)).unwrap();
        assert!(not_asked.get("working_memory").is_none());
    }

    #[test]
    fn facts_that_render_to_nothing_are_not_listed() {
        let context = MemoryContext::assemble(vec![fact("<>", Some(1.0)), fact("tea", None)], 10, None, None);
        assert_eq!(texts(&context), ["tea"]);
        let empty = MemoryContext::assemble(vec![], 10, None, None);
        assert_eq!((empty.enabled, empty.facts.len(), empty.prompt.as_str()), (true, 0, ""));
    }

    #[test]
    fn default_max_facts_needs_memory_on_and_consent() {
        let agent = |memory_enabled| Some(Settings { memory_enabled, max_injected_facts: 7, ..Settings::default() });
        let policy = |agent, stored_consent| Policy { agent, stored_consent };
        assert_eq!(default_max_facts(&policy(agent(true), None), true), Some(7));
        assert_eq!(default_max_facts(&policy(agent(true), Some(true)), false), Some(7));
        assert_eq!(default_max_facts(&policy(agent(true), None), false), None);
        assert_eq!(default_max_facts(&policy(agent(true), Some(false)), true), None);
        assert_eq!(default_max_facts(&policy(agent(false), Some(true)), true), None);
        assert_eq!(default_max_facts(&policy(None, Some(true)), true), None);
    }

    #[test]
    fn request_limits() {
        assert!(ContextRequest::parse(None, Some(0), None, false).is_err());
        assert!(ContextRequest::parse(None, Some(101), None, false).is_err());
        assert!(ContextRequest::parse(None, None, Some(0), false).is_err());
        assert!(ContextRequest::parse(None, None, Some(-5), false).is_err());
        let ok = ContextRequest::parse(Some("  "), Some(100), Some(1), true).unwrap();
        assert_eq!(
            ok,
            ContextRequest {
                query: None,
                max_facts: Some(100),
                token_budget: Some(1),
                working_memory: true,
                as_of: None
            }
        );
        let with_query = ContextRequest::parse(Some("tea"), None, None, false).unwrap();
        assert_eq!(with_query.query.map(|q| q.text().to_owned()).as_deref(), Some("tea"));
    }
}
