//! `/api/rgpd`: erasure and export of everything held about one end user (GDPR
//! Art. 15, 17 and 20), and erasure receipts. Scope `rgpd` (or `admin`).

use std::collections::HashMap;

use axum::{Json, extract::State};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::{AppState, consent::Consent, extract::ApiPath};
use crate::{
    auth::{Caller, Scope},
    domain::{conversation::Conversation, fact::Fact, ids::ExternalRef, message::Message},
    error::{ApiError, ErrorBody},
    store::rgpd::{ErasedCounts, Receipt},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(erase_user, export_user)).routes(routes!(get_receipt))
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Erasure {
    pub external_ref: ExternalRef,
    pub deleted: ErasedCounts,
    pub receipt_id: Uuid,
    pub completed_at: chrono::DateTime<chrono::Utc>,
}

/// Erase everything about an end user in the tenant, across all agents: facts,
/// conversations, messages and jobs, in one transaction, with a receipt. A running
/// extraction stores nothing afterwards. Repeating it answers zeros. A consent refusal
/// is kept so that it outlives the erasure.
#[utoipa::path(delete, path = "/api/rgpd/users/{external_ref}/ai-data", tag = "rgpd",
    params(("external_ref" = String, Path, description = "The end user's id, percent-encoded")),
    responses((status = 200, body = Erasure), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
async fn erase_user(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(user): ApiPath<ExternalRef>,
) -> Result<Json<Erasure>, ApiError> {
    caller.require(Scope::Rgpd)?;
    let subject_hash = subject_hash(&state, &caller.tenant, &user);
    let receipt = state.store.erase_user(&caller.tenant, &user, &subject_hash).await?;
    tracing::info!(receipt_id = %receipt.receipt_id, "end user erased");
    Ok(Json(Erasure {
        external_ref: user,
        deleted: receipt.deleted,
        receipt_id: receipt.receipt_id,
        completed_at: receipt.completed_at,
    }))
}

/// One conversation with its messages, as the export holds it.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ExportedConversation {
    #[serde(flatten)]
    pub conversation: Conversation,
    pub messages: Vec<Message>,
}

/// Everything held about one end user (GDPR Art. 15 and 20).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Export {
    pub external_ref: ExternalRef,
    pub consent: Consent,
    pub conversations: Vec<ExportedConversation>,
    pub facts: Vec<Fact>,
}

/// Everything held about an end user in the tenant, across agents, machine-readable:
/// consent, conversations with their messages, and facts.
#[utoipa::path(get, path = "/api/rgpd/users/{external_ref}/ai-data", tag = "rgpd",
    params(("external_ref" = String, Path, description = "The end user's id, percent-encoded")),
    responses((status = 200, body = Export), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
async fn export_user(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(user): ApiPath<ExternalRef>,
) -> Result<Json<Export>, ApiError> {
    caller.require(Scope::Rgpd)?;
    let data = state.store.export_user(&caller.tenant, &user).await?;
    let consent = super::consent::consent_view(&state, &user, data.consent);
    let (conversations, messages, facts) = (data.conversations, data.messages, data.facts);
    let mut by_conversation: HashMap<Uuid, Vec<Message>> = HashMap::new();
    for message in messages {
        by_conversation.entry(message.conversation_id).or_default().push(message);
    }
    let conversations = conversations
        .into_iter()
        .map(|conversation| {
            let messages = by_conversation.remove(&conversation.id).unwrap_or_default();
            ExportedConversation { conversation, messages }
        })
        .collect();
    Ok(Json(Export { external_ref: user, consent, conversations, facts }))
}

/// An erasure receipt: the keyed hash of the subject, the counts and the time — never
/// the identifier itself.
#[utoipa::path(get, path = "/api/rgpd/receipts/{receipt_id}", tag = "rgpd",
    params(("receipt_id" = Uuid, Path)),
    responses((status = 200, body = Receipt), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
async fn get_receipt(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<Receipt>, ApiError> {
    caller.require(Scope::Rgpd)?;
    state.store.get_receipt(&caller.tenant, id).await?.map(Json).ok_or(ApiError::NotFound("receipt"))
}

/// Tenant and identifier are joined with a NUL, which neither can contain, so two
/// different pairs never hash the same input.
fn subject_hash(state: &AppState, tenant: &str, user: &ExternalRef) -> String {
    let input = format!("{tenant}\u{0}{}", user.as_str());
    crate::crypto::hmac_sha256_hex(state.receipt_key.0.as_bytes(), input.as_bytes())
}
