//! `/api/rgpd`: erasure and export of everything held about one end user (GDPR
//! Art. 15, 17 and 20), and erasure receipts. Scope `rgpd` (or `admin`).

use axum::{
    http::header,
    response::{IntoResponse, Response},
};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::ctx::Ctx;
use super::json::Json;
use super::{CommonErrors, NotFound, input::ApiPath};
use crate::{
    auth::Gdpr,
    domain::{
        conversation::Conversation,
        event::{Actor, Event, ExportedVersion},
        fact::Fact,
        ids::ExternalRef,
        import::ImportedId,
        message::Message,
        policy::Consent,
        webhook::ExportedDelivery,
        working_memory::{AgentWorkingMemory, WorkingMemory},
    },
    error::ApiError,
    service::{AppState, ErasedCounts, Receipt, erasure, gdpr_export::export_body},
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
    /// When no file of the database held the erased rows' old versions any more; null
    /// while that is still owed (then `GET /api/rgpd/receipts/{receipt_id}` tells when).
    pub purged_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Erase everything about an end user in the tenant, across all agents: facts,
/// conversations, messages, working memory and jobs, in one transaction, with a receipt. A running
/// extraction stores nothing afterwards. Repeating it answers zeros. A consent refusal
/// is kept so that it outlives the erasure.
#[utoipa::path(delete, path = "/api/rgpd/users/{external_ref}/ai-data", tag = "rgpd",
    params(("external_ref" = ExternalRef, Path, description = "The end user's id, percent-encoded")), responses(
        (status = 200, body = Erasure, links(
            ("GetReceipt" = (operation_id = "get_receipt", parameters(("receipt_id" = "$response.body#/receipt_id"))))
        )), CommonErrors ))]
async fn erase_user(
    Ctx { state, caller }: Ctx<Gdpr>,
    ApiPath(user): ApiPath<ExternalRef>,
) -> Result<Json<Erasure>, ApiError> {
    let receipt = erasure::erase(&state, &caller.tenant, &user, Actor::Api).await?;
    tracing::info!(receipt_id = %receipt.receipt_id, "end user erased");
    Ok(Json(Erasure {
        external_ref: user,
        deleted: receipt.deleted,
        receipt_id: receipt.receipt_id,
        completed_at: receipt.completed_at,
        purged_at: receipt.purged_at,
    }))
}

// The export is streamed by `export_body`; these two types document its shape.
/// One conversation with its rolling summary and its messages, as the export holds it.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ExportedConversation {
    #[serde(flatten)]
    pub conversation: Conversation,
    /// The conversation's rolling summary; null when it has none.
    #[schema(max_length = 4000)]
    pub summary: Option<String>,
    /// The last seq the summary covers (0: none).
    #[schema(minimum = 0)]
    pub summary_through_seq: i64,
    /// The conversation's working memory document; null when it has none.
    pub working_memory: Option<WorkingMemory>,
    pub messages: Vec<Message>,
}

/// Everything held about one end user (GDPR Art. 15 and 20).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct Export {
    pub external_ref: ExternalRef,
    pub consent: Consent,
    pub conversations: Vec<ExportedConversation>,
    pub facts: Vec<Fact>,
    /// The person's working memory documents, one per agent that keeps one.
    pub working_memories: Vec<AgentWorkingMemory>,
    /// Every version of the person's facts (their history).
    pub fact_versions: Vec<ExportedVersion>,
    /// The person's events still kept (`ENGRAM_EVENT_RETENTION`), oldest first.
    pub events: Vec<Event>,
    /// The webhook deliveries of those events.
    pub webhook_deliveries: Vec<ExportedDelivery>,
    /// The client ids the person's records were imported under (`POST /api/import`).
    pub imported_ids: Vec<ImportedId>,
}

/// Everything held about an end user in the tenant, across agents, machine-readable:
/// consent, conversations with their summaries, working memory and messages, facts, and
/// working memory documents.
#[utoipa::path(get, path = "/api/rgpd/users/{external_ref}/ai-data", tag = "rgpd",
    params(("external_ref" = ExternalRef, Path, description = "The end user's id, percent-encoded")),
    responses((status = 200, body = Export), CommonErrors))]
async fn export_user(
    Ctx { state, caller }: Ctx<Gdpr>,
    ApiPath(user): ApiPath<ExternalRef>,
) -> Result<Response, ApiError> {
    let body = export_body(&state, &caller.tenant, &user).await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// An erasure receipt: the keyed hash of the subject, the counts and the time — never
/// the identifier itself.
#[utoipa::path(get, path = "/api/rgpd/receipts/{receipt_id}", tag = "rgpd", params(("receipt_id" = Uuid, Path)),
    responses((status = 200, body = Receipt), CommonErrors, NotFound))]
async fn get_receipt(Ctx { state, caller }: Ctx<Gdpr>, ApiPath(id): ApiPath<Uuid>) -> Result<Json<Receipt>, ApiError> {
    Ok(Json(erasure::receipt(&state, &caller.tenant, id).await?))
}
