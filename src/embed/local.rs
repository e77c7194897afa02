//! The local embedder: all-MiniLM-L6-v2 (a BERT sentence-embedding model, Apache-2.0, 384
//! dimensions) run in-process with candle on the CPU: mean pooling over the tokens, then L2
//! normalisation, as the sentence-transformers model it comes from does.
//!
//! Its files come from a directory ([`MODEL_FILES`]); until they are there and loaded, the
//! embedder answers [`EmbedError::Unavailable`] and recall is full text only. Inference is
//! CPU-bound for milliseconds per text, so it never runs on the async workers that serve
//! requests: each batch runs alone on one core's own thread ([`Cores`]), at most one batch
//! per core at once.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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
    cores: Cores,
}

/// Where inference runs: one single-threaded rayon pool per core, each lent to one batch
/// at a time. Batches beyond the number of cores wait for a free one instead of piling
/// up, where they would all slow down together.
///
/// Single-threaded on purpose: candle's matrix products (and candle-nn's softmax) split
/// their work over the rayon pool they run in, by default the global one with a thread
/// per core. A batch run from outside any pool would then spread over every core, and two
/// concurrent batches oversubscribe them. Measured on 2 cores (all-MiniLM-L6-v2, a
/// 10-token query): one batch alone takes about as long on one thread as on two (a matrix
/// product of 10 rows is faster on one), and 4 concurrent callers see a p99 of about 35 ms
/// this way against 50 ms with the global pool and 75 ms with one batch at a time on
/// every core. The cost: the backfill, one batch at a time, runs on one core (about 150
/// facts/s instead of 200 in `engram-bench scale`). The thread count is set here, in
/// code, rather than through `RAYON_NUM_THREADS`, which would change every other user of
/// rayon too.
struct Cores {
    pools: Arc<[rayon::ThreadPool]>,
    /// The indexes of the pools no batch holds.
    free: Arc<Mutex<Vec<usize>>>,
    /// One permit per free pool: what a batch waits on.
    permits: Arc<Semaphore>,
}

/// A pool lent to one batch; given back when dropped.
struct Lent {
    index: usize,
    free: Arc<Mutex<Vec<usize>>>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Lent {
    fn drop(&mut self) {
        // Given back before the permit is released (fields drop after this body).
        self.free.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(self.index);
    }
}

impl Cores {
    fn new() -> anyhow::Result<Cores> {
        let count = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pools = (0..count)
            .map(|core| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .thread_name(move |_| format!("engram-embed-{core}"))
                    .build()
                    .map_err(|e| anyhow::anyhow!("cannot start the embedding threads: {e}"))
            })
            .collect::<anyhow::Result<Arc<[_]>>>()?;
        Ok(Cores { pools, free: Arc::new(Mutex::new((0..count).collect())), permits: Arc::new(Semaphore::new(count)) })
    }

    /// Waits for a free pool, at most [`QUEUE_LIMIT`].
    async fn lend(&self) -> Result<Lent, EmbedError> {
        let permit = tokio::time::timeout(QUEUE_LIMIT, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| EmbedError::Transient("every core is busy embedding".into()))?
            .map_err(|_| EmbedError::Unavailable)?;
        let index = self.free.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).pop();
        // A permit is only ever held with a pool, so one is free.
        let index = index.ok_or(EmbedError::Unavailable)?;
        Ok(Lent { index, free: self.free.clone(), _permit: permit })
    }
}

impl Local {
    pub fn new(dir: PathBuf) -> anyhow::Result<Local> {
        Ok(Local { dir, model: OnceLock::new(), cores: Cores::new()? })
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
        let lent = self.cores.lend().await?;
        let pools = self.cores.pools.clone();
        let texts = texts.to_vec();
        // The blocking thread only waits for the pool's (a panic comes back through it).
        let vectors = tokio::task::spawn_blocking(move || {
            let lent = lent;
            pools[lent.index].install(|| run(&model, &texts))
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
