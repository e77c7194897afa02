//! Embedders: what turns a text (a fact, a search query) into a vector, so that recall can
//! find facts by meaning and not only by shared words. One interface ([`Embedder`]) over a
//! model run in-process ([`local`]) and any OpenAI-compatible `/embeddings` server
//! ([`openai`]), chosen by `ENGRAM_EMBEDDINGS`.
//!
//! Every vector leaves here L2-normalised, so that the cosine similarity of two vectors is
//! their dot product and vectors of different servers compare alike. Each vector is tagged
//! with [`Embedder::model_tag`]: vectors of different models are never compared, and a model
//! change is what the backfill looks for.

use std::time::Duration;

/// The domain crate, under the name the server's layers know it by.
use engram_domain as domain;
use engram_remote as remote_servers;

mod bert;
pub mod fetch;
pub mod local;
pub mod openai;

/// Why no vector came back. Messages never hold the embedded text or a secret: they end up
/// in job errors and logs.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// Embeddings are off, or the local model's files are not there (yet).
    #[error("embeddings are not available")]
    Unavailable,
    #[error("embedding server rate limited the request")]
    RateLimited { retry_after: Option<Duration> },
    #[error("embedding server unavailable: {0}")]
    Transient(String),
    #[error("malformed embedding response: {0}")]
    Malformed(String),
    #[error("embedding failed: {0}")]
    Fatal(String),
}

/// The configured embedder (`ENGRAM_EMBEDDINGS`).
pub enum Embedder {
    /// Recall is full text only.
    Off,
    Local(local::Local),
    OpenAi(openai::OpenAi),
}

impl Embedder {
    /// Makes the local model ready, in the background of `serve`: fetches its files when
    /// missing (see [`fetch`]), then loads them. Until it is ready, and if it never is
    /// (offline), recall is full text only; that is said once, here, with how to provide
    /// the files. Nothing to do for the other embedders.
    pub async fn prepare(&self, index_url: Option<&str>) {
        let Embedder::Local(local) = self else { return };
        if !local.files_present() {
            tracing::info!(dir = %local.dir().display(), "fetching the embedding model; recall is full text until it is ready");
            let fetched = match fetch::client() {
                Ok(client) => {
                    fetch::fetch(&client, index_url.unwrap_or(fetch::DEFAULT_INDEX_URL), &fetch::MINILM, local.dir())
                        .await
                }
                Err(e) => Err(fetch::FetchError::Unreachable(e.to_string())),
            };
            if let Err(error) = fetched {
                tracing::warn!(
                    %error,
                    dir = %local.dir().display(),
                    "the embedding model is not available: recall is full text only. Provide its files with \
                     `engram models fetch` (or copy config.json, tokenizer.json and model.safetensors of \
                     all-MiniLM-L6-v2 into ENGRAM_EMBEDDING_MODEL_DIR) and restart, or set ENGRAM_EMBEDDINGS=off"
                );
                return;
            }
        }
        match local.load().await {
            Ok(()) => tracing::info!(model = local::MODEL_NAME, "embedding model ready: recall by meaning is on"),
            Err(error) => tracing::warn!(
                %error,
                dir = %local.dir().display(),
                "the embedding model cannot be loaded: recall is full text only. Replace its files with \
                 `engram models fetch` and restart, or set ENGRAM_EMBEDDINGS=off"
            ),
        }
    }

    /// The tag stored with each vector: which model made it, so that vectors of another
    /// model are neither compared nor kept once the backfill has replaced them. `None` when
    /// embeddings are off.
    pub fn model_tag(&self) -> Option<String> {
        match self {
            Embedder::Off => None,
            Embedder::Local(_) => Some(format!("local:{}", local::MODEL_NAME)),
            Embedder::OpenAi(client) => Some(format!("openai:{}", client.model())),
        }
    }

    /// The tag of the model [`embed`](Self::embed) answers with, when it can answer now:
    /// `None` when embeddings are off or the local model is not loaded yet.
    pub fn ready_model(&self) -> Option<String> {
        self.model_tag().filter(|_| self.is_ready())
    }

    /// Whether [`embed`](Self::embed) can answer now: false when off or while the local
    /// model's files are missing.
    pub fn is_ready(&self) -> bool {
        match self {
            Embedder::Off => false,
            Embedder::Local(local) => local.is_ready(),
            Embedder::OpenAi(_) => true,
        }
    }

    /// One L2-normalised vector per text, in order.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Embedder::Off => Err(EmbedError::Unavailable),
            Embedder::Local(local) => local.embed(texts).await,
            Embedder::OpenAi(client) => client.embed(texts).await,
        }
    }
}

/// Scales `vector` to unit length; a zero or non-finite vector is malformed (it has no
/// direction to compare).
pub(crate) fn normalised(mut vector: Vec<f32>) -> Result<Vec<f32>, EmbedError> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return Err(EmbedError::Malformed("a vector is zero or not finite".into()));
    }
    vector.iter_mut().for_each(|x| *x /= norm);
    Ok(vector)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_scaled_to_unit_length_and_degenerate_ones_refused() {
        let v = normalised(vec![3.0, 4.0]).expect("normalised");
        assert_eq!(v, vec![0.6, 0.8]);
        assert!(matches!(normalised(vec![0.0, 0.0]), Err(EmbedError::Malformed(_))));
        assert!(matches!(normalised(vec![f32::NAN, 1.0]), Err(EmbedError::Malformed(_))));
    }
}
