//! Hostile input and a failing database: bounded metric labels, NUL refused alike on
//! both backends, query caps, long facts in any script, time limits, and a PostgreSQL
//! that goes away and comes back while Engram keeps running.

use std::time::{Duration, Instant};

use crate::common::*;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::Connection;
use tokio::{
    net::{TcpListener, TcpStream},
    task::JoinSet,
};

const AGENT: &str = "concierge";
const USER: &str = "user-1";

on_both_backends!(
    nul_is_refused_everywhere_and_stores_nothing,
    oversized_queries_are_refused_quickly,
    long_facts_in_any_script_are_stored,
    metadata_and_tool_fields_are_capped,
    a_request_past_its_time_limit_is_a_503,
    a_refused_remember_leaves_its_connection_clean,
    a_large_export_streams_every_page,
);

fn facts_path() -> String {
    format!("/api/agents/{AGENT}/users/{USER}/facts")
}

async fn new_conversation(app: &TestApp, token: &str) -> String {
    let (status, body) = app.post("/api/conversations", token, json!({"agent_id": AGENT, "external_ref": USER})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["id"].as_str().expect("id").to_owned()
}

async fn nul_is_refused_everywhere_and_stores_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    let id = new_conversation(&app, &token).await;
    let nul = "a\u{0}b";
    let bodies = [
        ("/api/conversations".to_owned(), json!({"agent_id": AGENT, "external_ref": USER, "title": nul})),
        ("/api/conversations".to_owned(), json!({"agent_id": AGENT, "external_ref": USER, "metadata": {nul: 1}})),
        (format!("/api/conversations/{id}/messages"), json!({"messages": [{"role": "user", "content": nul}]})),
        (
            format!("/api/conversations/{id}/messages"),
            json!({"messages": [{"role": "user", "content": "hi", "metadata": {"k": nul}}]}),
        ),
        (facts_path(), json!({"fact": nul})),
    ];
    for (path, body) in bodies {
        let (status, answer) = app.post(&path, &token, body).await;
        assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    for path in [format!("{}/search?q=a%00b", facts_path()), format!("/api/agents/{AGENT}/users/a%00b/facts")] {
        let (status, answer) = app.get(&path, &token).await;
        assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    // Nothing of the refused requests was stored.
    let (_, list) = app.get("/api/conversations", &token).await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
    let (_, messages) = app.get(&format!("/api/conversations/{id}/messages"), &token).await;
    assert_eq!(messages["items"], json!([]), "{messages}");
    let (_, facts) = app.get(&facts_path(), &token).await;
    assert_eq!(facts["items"], json!([]), "{facts}");
    // An escaped backslash before `u0000` is text, not NUL.
    let (status, answer) = app.post(&facts_path(), &token, json!({"fact": "Writes \\u0000 in C"})).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
}

async fn oversized_queries_are_refused_quickly(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    app.enable_memory("acme", AGENT).await;
    for i in 0..50 {
        let (status, _) = app.post(&facts_path(), &token, json!({"fact": format!("Likes topic{i}")})).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let huge: Vec<String> = (0..6000).map(|i| format!("w{i}")).collect();
    let huge = huge.join("+");
    for path in [
        format!("{}/search?q={huge}", facts_path()),
        format!("/api/agents/{AGENT}/users/{USER}/memory-context?query={huge}"),
        format!("{}/search?q={}", facts_path(), "a".repeat(1001)),
    ] {
        let started = Instant::now();
        let (status, body) = app.get(&path, &token).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    }
    let at_limit = vec!["topic7"; 64].join("+");
    let (status, body) = app.get(&format!("{}/search?q={at_limit}", facts_path()), &token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

async fn long_facts_in_any_script_are_stored(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    for text in ["東".repeat(1000), "ж".repeat(1000), "🙂".repeat(1000)] {
        let (status, body) = app.post(&facts_path(), &token, json!({"fact": text})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        // The duplicate rule still holds for such facts.
        let (status, again) = app.post(&facts_path(), &token, json!({"fact": text})).await;
        assert_eq!(status, StatusCode::OK, "{again}");
        assert_eq!(again["id"], body["id"]);
    }
    let (_, facts) = app.get(&facts_path(), &token).await;
    assert_eq!(facts["items"].as_array().map(Vec::len), Some(3));
}

async fn metadata_and_tool_fields_are_capped(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    let id = new_conversation(&app, &token).await;
    let big = "x".repeat(17 * 1024);
    let (status, body) = app
        .post("/api/conversations", &token, json!({"agent_id": AGENT, "external_ref": USER, "metadata": {"k": big}}))
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let path = format!("/api/conversations/{id}/messages");
    let cases = [
        (json!({"role": "user", "content": "hi", "metadata": {"k": big}}), StatusCode::BAD_REQUEST),
        (json!({"role": "user", "content": "hi", "name": "n".repeat(257)}), StatusCode::BAD_REQUEST),
        (json!({"role": "tool", "content": "ok", "tool_call_id": "c".repeat(257)}), StatusCode::BAD_REQUEST),
        (
            json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "name": "f", "arguments": {"blob": "y".repeat(65 * 1024)}}
            ]}),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
    ];
    for (message, expected) in cases {
        let (status, body) = app.post(&path, &token, json!({"messages": [message]})).await;
        assert_eq!(status, expected, "{body}");
    }
    let (_, messages) = app.get(&path, &token).await;
    assert_eq!(messages["items"], json!([]));
    let (status, body) = app
        .post(&path, &token, json!({"messages": [{"role": "user", "content": "hi", "name": "n".repeat(256)}]}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// Holds the conversation's row (PostgreSQL) or the whole file (SQLite) from outside,
/// so an append waits past the one-second request limit.
async fn a_request_past_its_time_limit_is_a_503(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--request-timeout-secs", "1"]).await;
    let token = agent("acme");
    let id = new_conversation(&app, &token).await;
    let lock = hold_write_lock(&app.db.url, &id).await;
    let started = Instant::now();
    let response = append_hello(&app, &token, &id).await;
    let elapsed = started.elapsed();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers().get("retry-after").map(|v| v.to_str().unwrap()), Some("1"));
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["code"], "unavailable");
    assert!(elapsed < Duration::from_secs(3), "answered after {elapsed:?}");
    drop(lock);
    // The abandoned append stored nothing.
    let (_, messages) = app.get(&format!("/api/conversations/{id}/messages"), &token).await;
    assert_eq!(messages["items"], json!([]));
}

/// Holds the owner's lock (PostgreSQL: its advisory lock, the key computed here in SQL
/// as `docs/deployment.md` gives it; SQLite: the file) so that a remember cannot get it,
/// on a pool of one connection: every request after it runs on the connection the
/// refused remember had, which must be out of its transaction. On PostgreSQL the wait
/// ends inside the request (the database's `lock_timeout`), before the request's limit
/// would cancel it; on SQLite the request's limit ends it.
async fn a_refused_remember_leaves_its_connection_clean(backend: Backend) {
    let db = TestDb::fresh(backend).await;
    if backend == Backend::Postgres {
        let mut conn = sqlx::PgConnection::connect(&db.url).await.expect("connect");
        sqlx::raw_sql(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET lock_timeout = %L', current_database(), '300ms'); END $$",
        )
        .execute(&mut conn)
        .await
        .expect("set lock_timeout");
    }
    let extra = ["--request-timeout-secs", "1", "--db-max-connections", "1"];
    let app = TestApp::start(db, extra.iter().map(|a| a.to_string()).collect()).await;
    let token = agent("acme");
    let lock = hold_owner_lock(&app.db.url, "acme", AGENT, USER).await;
    let (status, body) = app.post(&facts_path(), &token, json!({"fact": "Repairs clocks on weekends"})).await;
    assert_error(status, &body, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    drop(lock);
    // The refused remember's connection serves again once its rollback is done.
    let stored = eventually(Duration::from_secs(10), || async {
        let (status, _) = app.post(&facts_path(), &token, json!({"fact": "Keeps a vegetable garden"})).await;
        (status == StatusCode::CREATED).then_some(())
    })
    .await;
    assert!(stored.is_some(), "remember never succeeded again");
    for _ in 0..3 {
        let (status, facts) = app.get(&facts_path(), &token).await;
        assert_eq!(status, StatusCode::OK, "{facts}");
        assert_eq!(texts(&facts["items"]), ["Keeps a vegetable garden"], "the refused remember stored nothing");
    }
}

/// A connection holding the lock of one owner's writers until dropped.
async fn hold_owner_lock(url: &str, tenant: &str, agent_id: &str, user: &str) -> Lock {
    let lock = "SELECT pg_advisory_lock(('x' || encode(substring(sha256( \
                  int4send(octet_length($1)) || convert_to($1, 'UTF8') || \
                  int4send(octet_length($2)) || convert_to($2, 'UTF8') || \
                  int4send(octet_length($3)) || convert_to($3, 'UTF8')) FROM 1 FOR 8), 'hex'))::bit(64)::bigint)";
    hold(url, lock, &[tenant, agent_id, user]).await
}

/// Appends one message, returning the raw response (its headers are checked).
async fn append_hello(app: &TestApp, token: &str, id: &str) -> reqwest::Response {
    app.client
        .post(format!("{}/api/conversations/{id}/messages", app.base))
        .bearer_auth(token)
        .json(&json!({"messages": [{"role": "user", "content": "hello"}]}))
        .send()
        .await
        .expect("sent")
}

/// A connection holding a write lock until dropped.
enum Lock {
    Postgres { _held: sqlx::PgConnection },
    Sqlite { _held: sqlx::SqliteConnection },
}

async fn hold_write_lock(url: &str, conversation: &str) -> Lock {
    hold(url, "SELECT id FROM conversations WHERE id = $1::uuid FOR UPDATE", &[conversation]).await
}

/// On PostgreSQL, a connection in a transaction that has run `lock` with `binds`; on
/// SQLite, one holding the file's write lock. Either holds it until dropped.
async fn hold(url: &str, lock: &'static str, binds: &[&str]) -> Lock {
    if !url.starts_with("postgres") {
        return hold_sqlite_file(url).await;
    }
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    sqlx::query("BEGIN").execute(&mut conn).await.expect("begin");
    let query = binds.iter().fold(sqlx::query(lock), |query, value| query.bind(*value));
    query.execute(&mut conn).await.expect("lock");
    Lock::Postgres { _held: conn }
}

/// SQLite busy past its timeout is a 503 to retry, not a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_busy_is_a_503_with_retry_after() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let token = agent("acme");
    let id = new_conversation(&app, &token).await;
    let lock = hold_write_lock(&app.db.url, &id).await;
    let response = append_hello(&app, &token, &id).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
    drop(lock);
    let (status, body) = app
        .post(
            &format!("/api/conversations/{id}/messages"),
            &token,
            json!({"messages": [{"role": "user", "content": "again"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// Any token is a valid HTTP method; the metrics must not grow a series per token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_methods_do_not_grow_the_metrics() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    for i in 0..50 {
        let method = Method::from_bytes(format!("X{i}{}", "Y".repeat(2000)).as_bytes()).expect("method");
        let (status, _) = app.call(method, "/healthz", None, None).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    }
    let text = app.client.get(format!("{}/metrics", app.base)).send().await.expect("sent").text().await.expect("text");
    assert!(!text.contains("YYYY"), "a raw method reached the metrics");
    for label in text.split("method=\"").skip(1) {
        let method = label.split('"').next().unwrap_or_default();
        assert!(
            ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "other"].contains(&method),
            "unexpected method label {method:?}"
        );
    }
    assert!(text.contains("method=\"other\""), "custom methods are counted as `other`");
}

/// A TCP relay between Engram and PostgreSQL that the test can cut and restore.
struct Relay {
    addr: std::net::SocketAddr,
    upstream: String,
    tasks: JoinSet<()>,
}

impl Relay {
    async fn start(upstream: String) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut relay = Relay { addr, upstream, tasks: JoinSet::new() };
        relay.serve(listener);
        relay
    }

    fn serve(&mut self, listener: TcpListener) {
        let upstream = self.upstream.clone();
        self.tasks.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                connections.spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
    }

    /// Closes the listener and every relayed connection: like a database host gone.
    async fn cut(&mut self) {
        self.tasks.shutdown().await;
    }

    async fn restore(&mut self) {
        let listener = TcpListener::bind(self.addr).await.expect("rebind the relay's port");
        self.serve(listener);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_gone_is_a_quick_503_and_its_return_needs_no_restart() {
    let mut db = TestDb::fresh(Backend::Postgres).await;
    let host_port =
        db.url.split("://").nth(1).and_then(|rest| rest.split('@').next_back()).and_then(|r| r.split('/').next());
    let host_port = host_port.expect("host:port in the test URL").to_owned();
    let mut relay = Relay::start(host_port.clone()).await;
    db.url = db.url.replacen(&host_port, &relay.addr.to_string(), 1);
    let app = TestApp::start(db, vec!["--job-poll-ms".into(), "50".into()]).await;
    let token = agent("acme");
    let (status, _) = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(status, StatusCode::OK);
    new_conversation(&app, &token).await;

    relay.cut().await;
    for (method, path, body) in [
        (Method::GET, "/readyz", None),
        (Method::GET, "/api/conversations", None),
        (Method::POST, "/api/conversations", Some(json!({"agent_id": AGENT, "external_ref": USER}))),
    ] {
        let started = Instant::now();
        let auth = if path == "/readyz" { None } else { Some(token.as_str()) };
        let (status, answer) = app.call(method, path, auth, body).await;
        assert_error(status, &answer, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
        assert!(started.elapsed() < Duration::from_secs(3), "{path} answered after {:?}", started.elapsed());
    }

    relay.restore().await;
    let ready = eventually(Duration::from_secs(20), || async {
        let (status, _) = app.call(Method::GET, "/readyz", None, None).await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    assert!(ready.is_some(), "Engram did not recover when PostgreSQL came back");
    let (_, list) = app.get("/api/conversations", &token).await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
    new_conversation(&app, &token).await;
}

/// A pooled connection that PostgreSQL closed while it sat idle (a restart, an idle
/// timeout, a proxy) is found out before use and replaced: no request fails for it. The
/// pool tests only connections idle for a second or more, not every one it hands out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_connections_closed_while_idle_are_replaced_unseen() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let token = agent("acme");
    new_conversation(&app, &token).await;
    let (status, _) = app.get("/api/conversations", &token).await;
    assert_eq!(status, StatusCode::OK);

    let closed = app
        .db
        .rows::<(bool,)>(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .await;
    assert!(!closed.is_empty() && closed.iter().all(|(done,)| *done), "Engram's connections closed: {closed:?}");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for attempt in 0..5 {
        let (status, list) = app.get("/api/conversations", &token).await;
        assert_eq!(status, StatusCode::OK, "request {attempt} after the connections were closed: {list}");
        assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
    }
}

/// An extraction reads a bounded window of the thread, however long it is: the newest
/// messages up to the job's mark (docs/behaviour.md says the older unextracted ones are
/// passed over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extraction_reads_a_bounded_window_of_a_long_thread() {
    let app = TestApp::spawn_with(Backend::Sqlite, &["--job-poll-ms", "50"]).await;
    app.enable_memory("acme", AGENT).await;
    let token = agent("acme");
    let id = new_conversation(&app, &token).await;
    let path = format!("/api/conversations/{id}/messages");
    for batch in 0..3 {
        let messages: Vec<Value> = (0..100)
            .map(|i| match (batch, i) {
                (0, 0) => json!({"role": "user", "content": "My name is Zebedee."}),
                (2, 99) => json!({"role": "user", "content": "I live in Lisbon."}),
                _ => json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": "ok"}),
            })
            .collect();
        let (status, body) = app.post(&path, &token, json!({"messages": messages})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, ended) = app.post(&format!("/api/conversations/{id}/end"), &token, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{ended}");
    let job_id = ended["extraction"]["job_id"].as_str().expect("queued").to_owned();
    let done = eventually(Duration::from_secs(30), || async {
        let (_, job) = app.get(&format!("/api/jobs/{job_id}"), &admin("acme")).await;
        (job["status"] == "succeeded").then_some(job)
    })
    .await;
    assert!(done.is_some(), "the extraction did not succeed");
    let (_, facts) = app.get(&facts_path(), &token).await;
    let texts: Vec<&str> =
        facts["items"].as_array().expect("items").iter().filter_map(|f| f["fact"].as_str()).collect();
    assert!(texts.iter().any(|t| t.contains("Lisbon")), "{texts:?}");
    assert!(!texts.iter().any(|t| t.contains("Zebedee")), "read past the window: {texts:?}");
}

/// The export is read a page at a time (200 rows): more than a page of facts, of
/// conversations' messages and of conversations all arrive, in order, in valid JSON.
async fn a_large_export_streams_every_page(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    for i in 0..230 {
        let (status, _) = app.post(&facts_path(), &token, json!({"fact": format!("Likes topic number {i}")})).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let id = new_conversation(&app, &token).await;
    for batch in 0..3 {
        let messages: Vec<Value> =
            (0..100).map(|i| json!({"role": "user", "content": format!("message {}", batch * 100 + i)})).collect();
        let (status, _) =
            app.post(&format!("/api/conversations/{id}/messages"), &token, json!({"messages": messages})).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    for _ in 0..2 {
        new_conversation(&app, &token).await;
    }
    let (status, export) = app.get(&format!("/api/rgpd/users/{USER}/ai-data"), &admin("acme")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(export["external_ref"], USER);
    assert_eq!(export["consent"]["ai_consent"], true);
    let facts = export["facts"].as_array().expect("facts");
    assert_eq!(facts.len(), 230);
    let conversations = export["conversations"].as_array().expect("conversations");
    assert_eq!(conversations.len(), 3);
    assert_eq!(conversations[0]["id"], id.as_str());
    let seqs: Vec<i64> =
        conversations[0]["messages"].as_array().expect("messages").iter().filter_map(|m| m["seq"].as_i64()).collect();
    assert_eq!(seqs, (1..=300).collect::<Vec<_>>());
    assert_eq!(conversations[1]["messages"], json!([]));
}

/// SQLite's write lock on the whole file.
async fn hold_sqlite_file(url: &str) -> Lock {
    let mut conn = sqlx::SqliteConnection::connect(url).await.expect("connect");
    sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await.expect("lock");
    Lock::Sqlite { _held: conn }
}
