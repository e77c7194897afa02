//! The local embedder: all-MiniLM-L6-v2 (a BERT sentence-embedding model, Apache-2.0, 384
//! dimensions) run in-process with candle on the CPU ([`bert`](super::bert)): mean pooling
//! over the tokens, then L2 normalisation, as the sentence-transformers model it comes from
//! does.
//!
//! Its files come from a directory ([`MODEL_FILES`]); until they are there and loaded, the
//! embedder answers [`EmbedError::Unavailable`] and recall is full text only. Inference is
//! CPU-bound for milliseconds per text, so it never runs on the async workers that serve
//! requests: callers queue their texts ([`Queue`]) and one inference thread per core takes
//! them, one batch at a time, small requests of several callers in one batch.

use std::{
    collections::VecDeque,
    path::{Path, PathBuf},
    sync::{
        Arc, Condvar, Mutex, MutexGuard, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use candle_core::{DType, Device, Tensor};
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};
use tokio::sync::oneshot;

use super::{EmbedError, bert, normalised};

/// The model's name in vector tags (`local:all-MiniLM-L6-v2`).
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";

/// Its dimensions.
pub const DIMENSIONS: usize = 384;

/// The files the model needs, all in one directory.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Tokens read per text: the sequence length the model was trained with. A longer text is
/// embedded by its beginning, which also bounds the work one text can cause.
const MAX_TOKENS: usize = 256;

/// Longest a caller waits for a thread to take its texts before the embedding counts as
/// failed (and the fact is embedded later by the backfill). Once taken, the batch's run is
/// bounded by its size.
const WAIT_LIMIT: Duration = Duration::from_secs(10);

/// Requests waiting at most; beyond, a caller is told at once that every core is busy
/// rather than queueing work it would time out on.
const QUEUE_LIMIT: usize = 256;

/// How large a batch several callers' requests may share, as its padded size: the longest
/// text's bytes times the number of texts (128 bytes: about 32 tokens). Every text of a
/// batch is padded to the longest, and each caller waits for the whole batch. Measured on
/// one core (all-MiniLM-L6-v2, CPU per text): two 6-token queries together cost 60 % each
/// of one alone (5.4 against 9.0 ms), four 48 %; two 32-token ones 82 % (14.0 against 17.1
/// ms), which is slower for both callers than running them one after the other. So short
/// queries share a batch and long texts run alone, as does a batch over the budget.
const SHARED_BYTES: usize = 128;

struct Model {
    encoder: bert::Encoder,
    tokenizer: Tokenizer,
}

/// The local embedder; cheap to share behind the application's `Arc`.
pub struct Local {
    dir: PathBuf,
    /// The inference threads (a one-thread pool each), once the model is loaded.
    threads: OnceLock<Vec<rayon::ThreadPool>>,
    queue: Arc<Queue>,
}

/// The requests waiting for an inference thread.
///
/// One thread per core, each running its batches single-threaded: candle's matrix products
/// split their work over the rayon pool they run in (by default the global one, a thread
/// per core), so two concurrent batches would oversubscribe the cores; and one batch alone
/// takes about as long on one thread as on two (a product of a few rows is faster on one).
/// Measured on 2 cores (10-token query, 4 concurrent callers): p99 35 ms this way against
/// 50 ms with the global pool and 75 ms with one batch at a time on every core.
///
/// A thread that takes a short request also takes the short requests queued behind it (see
/// [`SHARED_BYTES`]): the weights are read once for all of them, where each query alone
/// would read them again.
///
/// The thread count is set here, in code, rather than through `RAYON_NUM_THREADS`, which
/// would change every other user of rayon too.
struct Queue {
    state: Mutex<Waiting>,
    arrived: Condvar,
    next_id: AtomicU64,
}

#[derive(Default)]
struct Waiting {
    requests: VecDeque<Request>,
    /// Set when the embedder is dropped: the threads finish.
    closed: bool,
}

type Answer = Result<Vec<Vec<f32>>, EmbedError>;

struct Request {
    id: u64,
    texts: Vec<String>,
    reply: oneshot::Sender<Answer>,
}

impl Request {
    /// The bytes of its longest text.
    fn longest(&self) -> usize {
        self.texts.iter().map(String::len).max().unwrap_or(0)
    }
}

impl Queue {
    fn new() -> Queue {
        Queue { state: Mutex::new(Waiting::default()), arrived: Condvar::new(), next_id: AtomicU64::new(0) }
    }

    fn lock(&self) -> MutexGuard<'_, Waiting> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `texts`; the receiver gets their vectors.
    fn push(&self, texts: Vec<String>) -> Result<(u64, oneshot::Receiver<Answer>), EmbedError> {
        let (reply, answer) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut waiting = self.lock();
        if waiting.requests.len() >= QUEUE_LIMIT {
            return Err(EmbedError::Transient("every core is busy embedding".into()));
        }
        waiting.requests.push_back(Request { id, texts, reply });
        drop(waiting);
        self.arrived.notify_one();
        Ok((id, answer))
    }

    /// Takes request `id` back if no thread has taken it yet; whether it did.
    fn withdraw(&self, id: u64) -> bool {
        let mut waiting = self.lock();
        let before = waiting.requests.len();
        waiting.requests.retain(|request| request.id != id);
        waiting.requests.len() < before
    }

    /// Waits for the next batch: the oldest request, and the requests behind it that fit
    /// beside it within [`SHARED_BYTES`]. `None` once closed. Requests whose caller has gone are
    /// dropped unread.
    fn next_batch(&self) -> Option<Vec<Request>> {
        let mut waiting = self.lock();
        loop {
            if waiting.closed {
                return None;
            }
            waiting.requests.retain(|request| !request.reply.is_closed());
            if let Some(first) = waiting.requests.pop_front() {
                let (mut longest, mut texts) = (first.longest(), first.texts.len());
                let mut batch = vec![first];
                let mut index = 0;
                while index < waiting.requests.len() {
                    let next = &waiting.requests[index];
                    let (wider, more) = (longest.max(next.longest()), texts + next.texts.len());
                    if wider * more <= SHARED_BYTES {
                        (longest, texts) = (wider, more);
                        batch.extend(waiting.requests.remove(index));
                    } else {
                        index += 1;
                    }
                }
                return Some(batch);
            }
            waiting = self.arrived.wait(waiting).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.arrived.notify_all();
    }
}

impl Local {
    pub fn new(dir: PathBuf) -> Local {
        Local { dir, threads: OnceLock::new(), queue: Arc::new(Queue::new()) }
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
        self.threads.get().is_some_and(|pools| !pools.is_empty())
    }

    /// Loads the model from its directory, on a blocking thread (it reads about 90 MB),
    /// then starts one inference thread per core. Loading again once loaded does nothing.
    pub async fn load(&self) -> anyhow::Result<()> {
        if self.is_ready() {
            return Ok(());
        }
        let dir = self.dir.clone();
        let model = tokio::task::spawn_blocking(move || load_model(&dir))
            .await
            .map_err(|_| anyhow::anyhow!("loading the model failed"))??;
        let model = Arc::new(model);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pools = self.threads.get_or_init(|| {
            (0..cores)
                .filter_map(|core| {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(1)
                        .thread_name(move |_| format!("engram-embed-{core}"))
                        .build()
                        .inspect_err(|error| tracing::warn!(%error, "cannot start an embedding thread"))
                        .ok()?;
                    // The pool's one thread serves the queue until the embedder is dropped;
                    // the products it runs split over that pool, i.e. stay on that thread.
                    let (model, queue) = (model.clone(), self.queue.clone());
                    pool.spawn(move || serve(&model, &queue));
                    Some(pool)
                })
                .collect()
        });
        anyhow::ensure!(!pools.is_empty(), "no embedding thread could be started");
        Ok(())
    }

    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if !self.is_ready() {
            return Err(EmbedError::Unavailable);
        }
        let (id, mut answer) = self.queue.push(texts.to_vec())?;
        let answer = match tokio::time::timeout(WAIT_LIMIT, &mut answer).await {
            Ok(answer) => answer,
            Err(_) if self.queue.withdraw(id) => {
                return Err(EmbedError::Transient("every core is busy embedding".into()));
            }
            // Taken by a thread in the meantime: its batch is running and ends.
            Err(_) => answer.await,
        };
        answer.unwrap_or_else(|_| Err(EmbedError::Fatal("the model failed".into())))
    }
}

impl Drop for Local {
    /// Ends the inference threads (their pools are dropped after this).
    fn drop(&mut self) {
        self.queue.close();
    }
}

/// An inference thread: batches from the queue until it closes, each answer sent to its
/// caller (who may have gone: then it is dropped).
fn serve(model: &Model, queue: &Queue) {
    while let Some(batch) = queue.next_batch() {
        let texts: Vec<String> = batch.iter().flat_map(|request| request.texts.iter().cloned()).collect();
        let vectors = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(model, &texts)));
        match vectors {
            Ok(Ok(vectors)) => {
                let mut vectors = vectors.into_iter();
                for request in batch {
                    let answer = vectors.by_ref().take(request.texts.len()).map(normalised).collect();
                    let _ = request.reply.send(answer);
                }
            }
            Ok(Err(error)) => {
                for request in batch {
                    let _ = request.reply.send(Err(EmbedError::Fatal(format!("the model failed: {error}"))));
                }
            }
            // Dropping the replies tells the callers.
            Err(_) => {}
        }
    }
}

fn load_model(dir: &Path) -> anyhow::Result<Model> {
    let read = |name: &str| std::fs::read(dir.join(name)).map_err(|e| anyhow::anyhow!("cannot read {name}: {e}"));
    let config: bert::Config = serde_json::from_slice(&read("config.json")?)
        .map_err(|e| anyhow::anyhow!("config.json is not a BERT configuration: {e}"))?;
    let encoder = bert::Encoder::load(&config, &read("model.safetensors")?)
        .map_err(|e| anyhow::anyhow!("the model cannot be loaded: {e}"))?;
    let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
        .map_err(|e| anyhow::anyhow!("tokenizer.json is not a tokenizer: {e}"))?;
    tokenizer.with_padding(Some(PaddingParams::default()));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: MAX_TOKENS.min(encoder.max_tokens()),
            ..TruncationParams::default()
        }))
        .map_err(|e| anyhow::anyhow!("cannot set the tokenizer's truncation: {e}"))?;
    Ok(Model { encoder, tokenizer })
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
    let hidden = model.encoder.forward(&ids, &mask)?;
    let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
    let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
    let counts = mask.sum(1)?;
    Ok(summed.broadcast_div(&counts)?.to_vec2::<f32>()?)
}
