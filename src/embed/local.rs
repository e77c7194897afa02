//! The local embedder: all-MiniLM-L6-v2 (a BERT sentence-embedding model, Apache-2.0, 384
//! dimensions) run in-process with candle on the CPU: mean pooling over the tokens, then L2
//! normalisation, as the sentence-transformers model it comes from does.
//!
//! Its files come from a directory ([`MODEL_FILES`]); until they are there and loaded, the
//! embedder answers [`EmbedError::Unavailable`] and recall is full text only. Inference is
//! CPU-bound for milliseconds per text, so it runs on tokio's blocking threads, at most one
//! batch per core at once, never on the async workers that serve requests.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, OnceLock},
    time::Duration,
};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};
use tokio::sync::Semaphore;

use super::{EmbedError, normalised};

/// The model's name in vector tags (`local:all-MiniLM-L6-v2`).
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";

/// Its dimensions.
pub const DIMENSIONS: usize = 384;

/// The files the model needs, all in one directory.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Tokens read per text: the sequence length the model was trained with. A longer text is
/// embedded by its beginning, which also bounds the work one text can cause.
const MAX_TOKENS: usize = 256;

/// Longest a caller waits for a free core before the embedding counts as failed (and the
/// fact is embedded later by the backfill).
const QUEUE_LIMIT: Duration = Duration::from_secs(10);

struct Model {
    bert: BertModel,
    tokenizer: Tokenizer,
}

/// The local embedder; cheap to share behind the application's `Arc`.
pub struct Local {
    dir: PathBuf,
    model: OnceLock<Arc<Model>>,
    /// One permit per core: batches beyond that wait here instead of piling onto the
    /// blocking pool, where they would all slow down together.
    cores: Arc<Semaphore>,
}

impl Local {
    pub fn new(dir: PathBuf) -> Local {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Local { dir, model: OnceLock::new(), cores: Arc::new(Semaphore::new(cores)) }
    }

    /// Where the model's files are read from (`ENGRAM_EMBEDDING_MODEL_DIR`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether every model file is in the directory (they may still fail to load).
    pub fn files_present(&self) -> bool {
        MODEL_FILES.iter().all(|name| self.dir.join(name).is_file())
    }

    pub fn is_ready(&self) -> bool {
        self.model.get().is_some()
    }

    /// Loads the model from its directory, on a blocking thread (it reads about 90 MB).
    /// Loading again once loaded does nothing.
    pub async fn load(&self) -> anyhow::Result<()> {
        if self.is_ready() {
            return Ok(());
        }
        let dir = self.dir.clone();
        let model = tokio::task::spawn_blocking(move || load_model(&dir))
            .await
            .map_err(|_| anyhow::anyhow!("loading the model failed"))??;
        let _ = self.model.set(Arc::new(model));
        Ok(())
    }

    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model = self.model.get().cloned().ok_or(EmbedError::Unavailable)?;
        let permit = tokio::time::timeout(QUEUE_LIMIT, self.cores.clone().acquire_owned())
            .await
            .map_err(|_| EmbedError::Transient("every core is busy embedding".into()))?
            .map_err(|_| EmbedError::Unavailable)?;
        let texts = texts.to_vec();
        let vectors = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            run(&model, &texts)
        })
        .await
        .map_err(|_| EmbedError::Fatal("the model failed".into()))?;
        vectors.map_err(|e| EmbedError::Fatal(format!("the model failed: {e}")))?.into_iter().map(normalised).collect()
    }
}

fn load_model(dir: &Path) -> anyhow::Result<Model> {
    let read = |name: &str| std::fs::read(dir.join(name)).map_err(|e| anyhow::anyhow!("cannot read {name}: {e}"));
    let config: Config = serde_json::from_slice(&read("config.json")?)
        .map_err(|e| anyhow::anyhow!("config.json is not a BERT configuration: {e}"))?;
    let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
        .map_err(|e| anyhow::anyhow!("tokenizer.json is not a tokenizer: {e}"))?;
    tokenizer.with_padding(Some(PaddingParams::default()));
    tokenizer
        .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..TruncationParams::default() }))
        .map_err(|e| anyhow::anyhow!("cannot set the tokenizer's truncation: {e}"))?;
    let weights = VarBuilder::from_buffered_safetensors(read("model.safetensors")?, DType::F32, &Device::Cpu)
        .map_err(|e| anyhow::anyhow!("model.safetensors cannot be read: {e}"))?;
    let bert = BertModel::load(weights, &config).map_err(|e| anyhow::anyhow!("the model cannot be loaded: {e}"))?;
    Ok(Model { bert, tokenizer })
}

/// The mean of the token vectors of each text (padding excluded), not yet normalised.
fn run(model: &Model, texts: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
    let encodings = model.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| anyhow::anyhow!("{e}"))?;
    let rows = |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> candle_core::Result<Tensor> {
        let rows =
            encodings.iter().map(|e| Tensor::new(f(e), &Device::Cpu)).collect::<candle_core::Result<Vec<_>>>()?;
        Tensor::stack(&rows, 0)
    };
    let ids = rows(&|e| e.get_ids())?;
    let mask = rows(&|e| e.get_attention_mask())?;
    let token_types = ids.zeros_like()?;
    let hidden = model.bert.forward(&ids, &token_types, Some(&mask))?;
    let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
    let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
    let counts = mask.sum(1)?;
    Ok(summed.broadcast_div(&counts)?.to_vec2::<f32>()?)
}
