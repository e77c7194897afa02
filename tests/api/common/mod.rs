//! Test harness: the real app on a random port, a fresh database per test (SQLite file
//! or a new PostgreSQL database) that is removed again when the test is done, and an
//! HTTP client that speaks the API.
#![allow(dead_code)]

pub mod llm;

use std::{path::PathBuf, sync::Arc, time::Duration};

use clap::Parser;
use engram::{app::App, config::ServeConfig};
use jsonwebtoken::{EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::{
    sync::{Notify, oneshot},
    task::JoinHandle,
};

pub const SECRET: &str = "test-secret-test-secret-test-secret!";

/// The agent and the end user most tests talk about.
pub const AGENT: &str = "support-bot";
pub const USER: &str = "whatsapp:+33612345678";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Runs each named `async fn(Backend)` once per backend, as `sqlite::name` and
/// `postgres::name`, so the output shows both ran.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::Backend::Sqlite).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::Backend::Postgres).await
                }
            )*
        }
    };
}
// Exported by path rather than `#[macro_export]`, so `use crate::common::*` brings it in.
pub(crate) use on_both_backends;

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: ServeConfig,
}

/// Where a test's data lives. Clones share it, so it survives restarts of the app; when
/// the last clone is dropped the data directory and the PostgreSQL database go with it.
#[derive(Debug, Clone)]
pub struct TestDb {
    pub backend: Backend,
    pub url: String,
    pub data_dir: PathBuf,
    _removal: Arc<Removal>,
}

impl TestDb {
    /// The rows `sql` reads, straight from the database (not through the app), on either
    /// backend: what tests check the storage itself with.
    pub async fn rows<T>(&self, sql: &'static str) -> Vec<T>
    where
        T: Send
            + Unpin
            + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
            + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>,
    {
        match self.backend {
            Backend::Postgres => {
                let pool = sqlx::PgPool::connect(&self.url).await.expect("connect");
                sqlx::query_as(sql).fetch_all(&pool).await.expect("read")
            }
            Backend::Sqlite => {
                let pool = sqlx::SqlitePool::connect(&self.url).await.expect("connect");
                sqlx::query_as(sql).fetch_all(&pool).await.expect("read")
            }
        }
    }

    /// Runs `sql` straight on the database, on either backend: what tests arrange a state
    /// the API cannot reach with (a past day's figures).
    pub async fn execute(&self, sql: &str) {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self.backend {
            Backend::Postgres => {
                let pool = sqlx::PgPool::connect(&self.url).await.expect("connect");
                sqlx::query(sql).execute(&pool).await.expect("write");
            }
            Backend::Sqlite => {
                let pool = sqlx::SqlitePool::connect(&self.url).await.expect("connect");
                sqlx::query(sql).execute(&pool).await.expect("write");
            }
        }
    }

    pub async fn fresh(backend: Backend) -> TestDb {
        let id = uuid::Uuid::now_v7().simple().to_string();
        let data_dir = std::env::temp_dir().join(format!("engram-test-{id}"));
        // Armed before anything is created, so a failure half-way still cleans up.
        let mut removal = Removal { data_dir: data_dir.clone(), database: None };
        std::fs::create_dir_all(&data_dir).expect("create test data dir");
        let url = match backend {
            Backend::Sqlite => format!("sqlite://{}/engram.db", data_dir.display()),
            Backend::Postgres => {
                let admin = postgres_url();
                let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin)
                    .await
                    .expect("connect to the test PostgreSQL");
                let name = format!("engram_test_{id}");
                sqlx::Executor::execute(&mut conn, sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .await
                    .expect("create test database");
                removal.database = Some((admin.clone(), name.clone()));
                replace_db_name(&admin, &name)
            }
        };
        TestDb { backend, url, data_dir, _removal: Arc::new(removal) }
    }
}

/// Removes a test's data directory and drops its PostgreSQL database (admin URL, name)
/// when dropped, even when the test panicked.
#[derive(Debug)]
struct Removal {
    data_dir: PathBuf,
    database: Option<(String, String)>,
}

impl Drop for Removal {
    fn drop(&mut self) {
        if let Some((admin, name)) = self.database.take() {
            // `Drop` cannot await, and a runtime cannot be blocked on from inside another
            // one, so the DROP runs on a thread of its own with a small runtime. Joining it
            // makes sure the database is gone before the test (and maybe the process) ends.
            match std::thread::spawn(move || drop_database(&admin, &name)).join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => warn(&format!("test database not dropped: {e}")),
                Err(_) => warn("dropping a test database panicked"),
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&self.data_dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            warn(&format!("test data dir {} not removed: {e}", self.data_dir.display()));
        }
    }
}

/// Writes to the real stderr: the test harness captures `eprintln!` of passing tests,
/// and a leftover should be seen. It does not fail the test, which may already be
/// unwinding (a second panic would abort the whole run).
fn warn(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "warning: {message}");
}

/// Drops the database even while an app (or a killed `engram serve`) still holds
/// connections to it: `WITH (FORCE)` ends them, so the app need not be stopped first.
fn drop_database(admin: &str, name: &str) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let mut conn =
            <sqlx::PgConnection as sqlx::Connection>::connect(admin).await.map_err(|e| format!("connect: {e}"))?;
        let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
        sqlx::Executor::execute(&mut conn, sqlx::AssertSqlSafe(sql)).await.map_err(|e| format!("{name}: {e}"))?;
        sqlx::Connection::close(conn).await.map_err(|e| format!("close: {e}"))
    })
}

pub fn postgres_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .or_else(|_| std::env::var("DATABASE_URL"))
        .ok()
        .filter(|u| u.starts_with("postgres"))
        .expect("PostgreSQL tests need TEST_DATABASE_URL (scripts/test starts a throwaway server)")
}

fn replace_db_name(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let base = match base[after_scheme..].find('/') {
        Some(slash) => &base[..after_scheme + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

/// Where the API answers and the client that speaks to it: what a test calls, whether the
/// app runs in the test ([`TestApp`], which derefs to it) or as a process of its own.
#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub client: reqwest::Client,
}

pub struct TestApp {
    pub api: Api,
    pub db: TestDb,
    pub extra: Vec<String>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> TestApp {
        Self::spawn_with(backend, &[]).await
    }

    /// Starts the app with extra `engram serve` flags (e.g. `--idle-end-secs 1`).
    pub async fn spawn_with(backend: Backend, extra: &[&str]) -> TestApp {
        let db = TestDb::fresh(backend).await;
        Self::start(db, extra.iter().map(|s| s.to_string()).collect()).await
    }

    /// Starts the app with `extra` flags and memory on for agent `concierge` of tenant
    /// `acme` ([`Api::enable_memory`]): where the tests of what memory does begin.
    pub async fn spawn_with_memory(backend: Backend, extra: &[&str]) -> TestApp {
        let app = Self::spawn_with(backend, extra).await;
        app.enable_memory("acme", "concierge").await;
        app
    }

    pub async fn start(db: TestDb, extra: Vec<String>) -> TestApp {
        let mut args = vec![
            "engram".to_string(),
            "--database-url".into(),
            db.url.clone(),
            "--data-dir".into(),
            db.data_dir.display().to_string(),
            "--bind".into(),
            "127.0.0.1:0".into(),
            "--jwt-secret".into(),
            SECRET.into(),
        ];
        // Embeddings are off unless a test asks for them: the default (the local model,
        // fetched from PyPI when missing) would make every test depend on the internet.
        if !extra.iter().any(|arg| arg.starts_with("--embeddings")) {
            args.extend(["--embeddings".into(), "off".into()]);
        }
        args.extend(extra.iter().cloned());
        let config = Args::try_parse_from(&args).expect("valid test config").config;
        let app = App::build(config).await.expect("app builds");
        let addr = app.local_addr().expect("bound");
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(app.run(async move {
            let _ = rx.await;
        }));
        TestApp { api: Api::at(format!("http://{addr}")), db, extra, shutdown: Some(tx), task: Some(task) }
    }

    /// Stops the app gracefully and starts a new one on the same database.
    pub async fn restart(mut self) -> TestApp {
        self.stop().await;
        Self::start(self.db.clone(), self.extra.clone()).await
    }

    pub async fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("app task").expect("app ran cleanly");
        }
    }
}

impl std::ops::Deref for TestApp {
    type Target = Api;

    fn deref(&self) -> &Api {
        &self.api
    }
}

impl Api {
    /// A client of the API at `base` (`http://host:port`).
    pub fn at(base: String) -> Api {
        Api { base, client: reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client") }
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self.client.request(method, format!("{}{}", self.base, path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        read(request).await
    }

    /// A GET of `path` with each of `queries` is refused with 400 `invalid_request`.
    pub async fn assert_invalid_queries(&self, path: &str, token: &str, queries: &[&str]) {
        for query in queries {
            let (status, error) = self.get(&format!("{path}{query}"), token).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {error}");
            assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
        }
    }

    /// Appends `body` to conversation `id` under an `Idempotency-Key`.
    pub async fn append_with_key(&self, id: &str, token: &str, key: &str, body: &Value) -> (StatusCode, Value) {
        let request = self
            .client
            .post(format!("{}/api/conversations/{id}/messages", self.base))
            .bearer_auth(token)
            .header("idempotency-key", key)
            .json(body);
        read(request).await
    }

    /// `body` sent as it is, with `content_type`: for bodies `call` would not send.
    pub async fn put_raw(
        &self,
        path: &str,
        token: &str,
        content_type: &str,
        body: &'static str,
    ) -> (StatusCode, Value) {
        let request = self
            .client
            .put(format!("{}{}", self.base, path))
            .bearer_auth(token)
            .header("content-type", content_type)
            .body(body);
        read(request).await
    }

    /// A request with extra `headers`; the answer's headers come back too.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        token: &str,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> (StatusCode, reqwest::header::HeaderMap, Value) {
        let mut request = self.client.request(method, format!("{}{}", self.base, path)).bearer_auth(token);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        read_with_headers(request).await
    }

    pub async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, Some(token), None).await
    }

    pub async fn put(&self, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::PUT, path, Some(token), Some(body)).await
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }

    pub async fn patch(&self, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::PATCH, path, Some(token), Some(body)).await
    }

    pub async fn delete(&self, path: &str, token: &str) -> (StatusCode, Value) {
        self.call(Method::DELETE, path, Some(token), None).await
    }

    /// Turns memory on for an agent (admin), extracting when a conversation ends only:
    /// what the tests of extraction at the end (and of what it feeds) look at. Rolling
    /// extraction has its own tests.
    pub async fn enable_memory(&self, tenant: &str, agent: &str) {
        let settings = json!({"memory_enabled": true, "extract_every_user_turns": null});
        let (status, _) = self.put(&format!("/api/agents-config/{agent}"), &admin(tenant), settings).await;
        assert_eq!(status, StatusCode::OK);
    }

    /// The Prometheus text `/metrics` answers with.
    pub async fn metrics(&self) -> String {
        let (_, metrics) = self.call(Method::GET, "/metrics", None, None).await;
        metrics.as_str().unwrap_or_default().to_owned()
    }

    /// `/metrics` holds each of `series` (a name with its labels).
    pub async fn assert_metrics(&self, series: &[&str]) {
        let metrics = self.metrics().await;
        for series in series {
            assert!(metrics.contains(series), "{series} missing from /metrics");
        }
    }
}

impl Drop for TestApp {
    /// Asks the app to stop; its data goes when the last [`TestDb`] clone is dropped (the
    /// one in this struct, unless a restarted app or the test still holds another).
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// A token signed with the test secret; `claims` are merged over sensible defaults.
/// Sends `request`; its status and its body as JSON (`null` when empty, a string when
/// not JSON).
async fn read(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let (status, _, value) = read_with_headers(request).await;
    (status, value)
}

/// The answer's status, headers and body (JSON, a string when it is not, null when empty).
async fn read_with_headers(request: reqwest::RequestBuilder) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let response = request.send().await.expect("request sent");
    let (status, headers) = (response.status(), response.headers().clone());
    let text = response.text().await.expect("body read");
    let value = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) };
    (status, headers, value)
}

pub fn token_with(claims: Value) -> String {
    let mut base = json!({"tenant": "acme", "exp": now() + 3600, "scope": "admin"});
    if let (Some(base), Some(extra)) = (base.as_object_mut(), claims.as_object()) {
        for (k, v) in extra {
            if v.is_null() {
                base.remove(k);
            } else {
                base.insert(k.clone(), v.clone());
            }
        }
    }
    jsonwebtoken::encode(&Header::default(), &base, &EncodingKey::from_secret(SECRET.as_bytes())).expect("sign")
}

pub fn token(tenant: &str, scope: &str) -> String {
    token_with(json!({"tenant": tenant, "scope": scope}))
}

pub fn admin(tenant: &str) -> String {
    token(tenant, "admin")
}

/// A token for an agent platform: read and write memory, nothing else.
pub fn agent(tenant: &str) -> String {
    token(tenant, "memory:read memory:write")
}

pub fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// Asserts the API error shape and code.
#[track_caller]
pub fn assert_error(status: StatusCode, body: &Value, expected_status: StatusCode, code: &str) {
    assert_eq!(status, expected_status, "body: {body}");
    assert_eq!(body["error"]["code"], code, "body: {body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "body: {body}");
    assert!(body["error"]["request_id"].as_str().is_some_and(|m| !m.is_empty()), "body: {body}");
}

/// Percent-encodes a path segment.
/// The `fact` texts of a list of facts (a page's or a search's `items`), in order.
pub fn texts(items: &Value) -> Vec<&str> {
    items.as_array().map(|a| a.iter().filter_map(|f| f["fact"].as_str()).collect()).unwrap_or_default()
}

/// The `relevance` of each hit of a search answer, in order.
#[track_caller]
pub fn relevances(hits: &Value) -> Vec<f64> {
    hits["items"].as_array().expect("items").iter().map(|h| h["relevance"].as_f64().expect("relevance")).collect()
}

pub fn enc(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Polls `check` until it returns Some or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An OpenAI-compatible LLM whose answer waits until the test releases it, to hold an
/// extraction in the middle of its LLM call.
pub struct BlockingLlm {
    received: Arc<Notify>,
    release: Arc<Notify>,
}

impl BlockingLlm {
    /// Waits until an extraction's request has reached the LLM.
    pub async fn called(&self) {
        tokio::time::timeout(Duration::from_secs(20), self.received.notified()).await.expect("the extraction started");
    }

    /// Lets the pending request answer (with one fact, "Name is Zorblax").
    pub fn answer(&self) {
        self.release.notify_one();
    }
}

/// Starts the app with its `openai` extractor pointed at a [`BlockingLlm`], memory on
/// for agent `concierge` of tenant `acme`, and `extra` flags.
pub async fn spawn_with_blocking_llm(backend: Backend, extra: &[&str]) -> (TestApp, BlockingLlm) {
    let llm = BlockingLlm { received: Arc::new(Notify::new()), release: Arc::new(Notify::new()) };
    let reply = json!({
        "id": "c", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant",
            "content": json!({"operations": [{"op": "add", "fact": "Name is Zorblax", "score": 0.9}]}).to_string()}, "finish_reason": "stop"}]
    });
    let (received, release) = (llm.received.clone(), llm.release.clone());
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let (received, release, reply) = (received.clone(), release.clone(), reply.clone());
            async move {
                received.notify_one();
                release.notified().await;
                axum::Json(reply)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}/v1", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    let mut args =
        vec!["--extractor", "openai", "--llm-base-url", &base, "--llm-model", "m", "--llm-timeout-secs", "60"];
    args.extend_from_slice(&["--job-poll-ms", "50"]);
    args.extend_from_slice(extra);
    let app = TestApp::spawn_with_memory(backend, &args).await;
    (app, llm)
}

/// Creates a conversation, appends user turns with assistant replies, ends it, and
/// returns the end response.
pub async fn converse(app: &Api, agent_id: &str, user: &str, turns: &[&str]) -> (String, Value) {
    let token = agent("acme");
    let (status, conversation) =
        app.post("/api/conversations", &token, json!({"agent_id": agent_id, "external_ref": user})).await;
    assert_eq!(status, StatusCode::CREATED, "{conversation}");
    let id = conversation["id"].as_str().expect("conversation id").to_string();
    let mut messages = Vec::new();
    for turn in turns {
        messages.push(json!({"role": "user", "content": turn}));
        messages.push(json!({"role": "assistant", "content": "Noted!"}));
    }
    let (status, body) =
        app.post(&format!("/api/conversations/{id}/messages"), &token, json!({"messages": messages})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, ended) = app.post(&format!("/api/conversations/{id}/end"), &token, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{ended}");
    (id, ended)
}

/// Waits until the job reaches one of `states` and returns it.
pub async fn job_reaching(app: &Api, job_id: &str, states: &[&str], timeout: Duration) -> Value {
    let token = admin("acme");
    let found = eventually(timeout, || async {
        let (_, job) = app.get(&format!("/api/jobs/{job_id}"), &token).await;
        states.contains(&job["status"].as_str().unwrap_or_default()).then_some(job)
    })
    .await;
    match found {
        Some(job) => job,
        None => {
            let (_, job) = app.get(&format!("/api/jobs/{job_id}"), &token).await;
            panic!("job never reached {states:?}: {job}")
        }
    }
}

/// The id of the extraction job an end queued.
pub fn job_id(ended: &Value) -> String {
    assert_eq!(ended["extraction"]["queued"], true, "{ended}");
    ended["extraction"]["job_id"].as_str().expect("job id").to_string()
}

/// Waits until the webhook subscription's delivery of `event_id` is in `status`.
pub async fn delivery_reaching(app: &Api, subscription: &str, event_id: i64, status: &str, within: Duration) -> Value {
    let path = format!("/api/webhooks/{subscription}/deliveries/{event_id}");
    let found = eventually(within, || async {
        let (_, delivery) = app.get(&path, &admin("acme")).await;
        (delivery["status"] == status).then_some(delivery)
    })
    .await;
    match found {
        Some(delivery) => delivery,
        None => panic!("delivery never {status}: {}", app.get(&path, &admin("acme")).await.1),
    }
}
