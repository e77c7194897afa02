//! The service as separate processes: a worker killed with SIGKILL mid-job, and three
//! replicas sharing one PostgreSQL job queue.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

/// One `engram serve` process.
pub(crate) struct Service {
    child: Child,
    pub(crate) base: String,
}

impl Service {
    pub(crate) async fn start(db: &TestDb, extra: &[&str]) -> Service {
        let port = {
            let socket = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
            socket.local_addr().expect("addr").port()
        };
        let child = Command::new(env!("CARGO_BIN_EXE_engram"))
            .arg("serve")
            .args(extra)
            .env("DATABASE_URL", &db.url)
            .env("ENGRAM_DATA_DIR", &db.data_dir)
            .env("ENGRAM_BIND", format!("127.0.0.1:{port}"))
            .env("ENGRAM_JWT_SECRET", SECRET)
            .env("ENGRAM_JOB_POLL_MS", "100")
            // No model download from PyPI in a test.
            .env("ENGRAM_EMBEDDINGS", "off")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("engram starts");
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        let up = eventually(Duration::from_secs(30), || {
            let (client, url) = (client.clone(), format!("{base}/readyz"));
            async move { client.get(url).send().await.ok().filter(|r| r.status().is_success()).map(|_| ()) }
        })
        .await;
        assert!(up.is_some(), "engram serve did not become ready");
        Service { child, base }
    }

    fn kill(&mut self) {
        // SIGKILL: no graceful shutdown, the lease is left behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(crate) async fn call(
    base: &str,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new().request(method, format!("{base}{path}")).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Creates, fills and ends a conversation through `base`; returns the job id.
async fn end_conversation(base: &str, user: &str) -> String {
    let token = agent("acme");
    let post = reqwest::Method::POST;
    let (_, conversation) = call(
        base,
        post.clone(),
        "/api/conversations",
        &token,
        Some(json!({"agent_id": "concierge", "external_ref": user})),
    )
    .await;
    let id = conversation["id"].as_str().expect("conversation").to_string();
    let messages: Vec<Value> = ["My name is Alice.", "I live in Paris.", "I prefer tea over coffee."]
        .iter()
        .map(|t| json!({"role": "user", "content": t}))
        .collect();
    let (status, _) = call(
        base,
        post.clone(),
        &format!("/api/conversations/{id}/messages"),
        &token,
        Some(json!({"messages": messages})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, ended) = call(base, post, &format!("/api/conversations/{id}/end"), &token, Some(json!({}))).await;
    ended["extraction"]["job_id"].as_str().unwrap_or_else(|| panic!("no job queued: {ended}")).to_string()
}

async fn job(base: &str, id: &str) -> Value {
    call(base, reqwest::Method::GET, &format!("/api/jobs/{id}"), &admin("acme"), None).await.1
}

async fn enable_memory(base: &str) {
    let (status, _) = call(
        base,
        reqwest::Method::PUT,
        "/api/agents-config/concierge",
        &admin("acme"),
        // Extraction at the end only: each conversation is one job.
        Some(json!({"memory_enabled": true, "extract_every_user_turns": null})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_worker_job_completes_after_lease_expiry_without_duplicates() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let db = TestDb::fresh(backend).await;
        // The first LLM call hangs long enough to kill the process in the middle of it.
        let llm = MockServer::start().await;
        let reply = json!({
            "id": "c", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant",
                "content": json!({"operations": [{"op": "add", "fact": "Name is Alice", "score": 0.9}, {"op": "add", "fact": "Lives in Paris", "score": 0.9}]}).to_string()},
                "finish_reason": "stop"}]
        });
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(reply.clone()).set_delay(Duration::from_secs(20)))
            .up_to_n_times(1)
            .mount(&llm)
            .await;
        Mock::given(method("POST")).respond_with(ResponseTemplate::new(200).set_body_json(reply)).mount(&llm).await;
        let base_url = format!("{}/v1", llm.uri());
        let args = [
            "--extractor",
            "openai",
            "--llm-base-url",
            &base_url,
            "--llm-model",
            "m",
            "--llm-timeout-secs",
            "30",
            "--job-lease-secs",
            "2",
        ];
        let mut first = Service::start(&db, &args).await;
        enable_memory(&first.base).await;
        let id = end_conversation(&first.base, "alice").await;
        let running = eventually(Duration::from_secs(10), || {
            let (base, id) = (first.base.clone(), id.clone());
            async move { (job(&base, &id).await["status"] == "running").then_some(()) }
        })
        .await;
        assert!(running.is_some(), "{backend:?}: the job never started");
        first.kill();

        let second = Service::start(&db, &args).await;
        let done = eventually(Duration::from_secs(30), || {
            let (base, id) = (second.base.clone(), id.clone());
            async move { Some(job(&base, &id).await).filter(|j| j["status"] == "succeeded") }
        })
        .await
        .unwrap_or_else(|| panic!("{backend:?}: the job was not picked up again"));
        assert_eq!(done["attempts"], 2, "{backend:?}: {done}");
        let (_, facts) =
            call(&second.base, reqwest::Method::GET, "/api/agents/concierge/users/alice/facts", &agent("acme"), None)
                .await;
        let mut texts: Vec<&str> =
            facts["items"].as_array().expect("items").iter().filter_map(|f| f["fact"].as_str()).collect();
        texts.sort();
        assert_eq!(texts, ["Lives in Paris", "Name is Alice"], "{backend:?}: no duplicates");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_run_each_job_exactly_once() {
    let db = TestDb::fresh(Backend::Postgres).await;
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(Service::start(&db, &["--workers", "2"]).await);
    }
    enable_memory(&replicas[0].base).await;
    let mut ends = Vec::new();
    for i in 0..30 {
        let base = replicas[i % 3].base.clone();
        ends.push(tokio::spawn(async move { end_conversation(&base, &format!("user-{i}")).await }));
    }
    let mut ids = Vec::new();
    for end in ends {
        ids.push(end.await.expect("end task"));
    }
    for id in &ids {
        let base = replicas[0].base.clone();
        let done = eventually(Duration::from_secs(60), || {
            let (base, id) = (base.clone(), id.clone());
            async move { Some(job(&base, &id).await).filter(|j| j["status"] == "succeeded") }
        })
        .await
        .unwrap_or_else(|| panic!("job {id} did not succeed"));
        assert_eq!(done["attempts"], 1, "{done}");
    }
    let mut stored = 0;
    for i in 0..30 {
        let (_, facts) = call(
            &replicas[i % 3].base,
            reqwest::Method::GET,
            &format!("/api/agents/concierge/users/user-{i}/facts"),
            &agent("acme"),
            None,
        )
        .await;
        let mut texts: Vec<&str> =
            facts["items"].as_array().expect("items").iter().filter_map(|f| f["fact"].as_str()).collect();
        let count = texts.len();
        texts.sort();
        texts.dedup();
        assert_eq!(texts.len(), count, "duplicate facts for user-{i}");
        assert!(count >= 3, "user-{i} has {count} facts");
        stored += count;
    }
    // Each job's success is one event, and each stored fact one `fact.added`, however
    // the replicas raced for the jobs; the feed read from any replica is the same.
    let mut events = Vec::new();
    let mut after = 0;
    loop {
        let path = format!("/api/events?after={after}&limit=1000");
        let (_, page) = call(&replicas[2].base, reqwest::Method::GET, &path, &admin("acme"), None).await;
        let items = page["items"].as_array().expect("items").clone();
        if items.is_empty() {
            break;
        }
        after = page["next_cursor"].as_i64().expect("cursor");
        events.extend(items);
    }
    let mut succeeded: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "job.succeeded")
        .map(|e| e["data"]["job_id"].as_str().expect("job id"))
        .collect();
    succeeded.sort();
    let mut expected: Vec<&str> = ids.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(succeeded, expected, "one event per job");
    assert_eq!(events.iter().filter(|e| e["type"] == "fact.added").count(), stored);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_and_exits_zero() {
    let db = TestDb::fresh(Backend::Sqlite).await;
    let mut service = Service::start(&db, &[]).await;
    enable_memory(&service.base).await;
    let status = Command::new("kill").args(["-TERM", &service.child.id().to_string()]).status().expect("kill runs");
    assert!(status.success());
    let exited = eventually(Duration::from_secs(20), || {
        let polled = service.child.try_wait().ok().flatten();
        async move { polled }
    })
    .await
    .expect("engram exits after SIGTERM");
    assert!(exited.success(), "exit status {exited:?}");
    // What was written before the signal is there after a restart.
    let again = Service::start(&db, &[]).await;
    let (status, config) =
        call(&again.base, reqwest::Method::GET, "/api/agents-config/concierge", &admin("acme"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(config["memory_enabled"], true);
}

/// Issue 25: a receiver that is down while Engram is killed with SIGKILL still gets every
/// event once both are back: deliveries are rows committed with their events, and a
/// delivery cut off mid-send is claimed again when its lease runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_events_survive_a_kill_while_the_receiver_is_down() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let db = TestDb::fresh(backend).await;
        // A port nobody listens on yet: the receiver is down.
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
        let args = ["--webhook-allow-private", "true", "--webhook-retry-base-ms", "200", "--webhook-timeout-secs", "2"];
        let mut first = Service::start(&db, &args).await;
        let (status, created) = call(
            &first.base,
            reqwest::Method::POST,
            "/api/webhooks",
            &admin("acme"),
            Some(json!({"url": format!("http://127.0.0.1:{port}/hook")})),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        for i in 0..10 {
            let (status, _) = call(
                &first.base,
                reqwest::Method::POST,
                "/api/agents/concierge/users/ann/facts",
                &agent("acme"),
                Some(json!({"fact": format!("Fact number {i}")})),
            )
            .await;
            assert_eq!(status, StatusCode::CREATED);
        }
        first.kill();

        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("the receiver's port");
        let receiver = MockServer::builder().listener(listener).start().await;
        Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&receiver).await;
        let second = Service::start(&db, &args).await;
        let (status, feed) =
            call(&second.base, reqwest::Method::GET, "/api/events?limit=100", &admin("acme"), None).await;
        assert_eq!(status, StatusCode::OK, "{feed}");
        let written: Vec<i64> = feed["items"].as_array().unwrap().iter().map(|e| e["id"].as_i64().unwrap()).collect();
        assert_eq!(written.len(), 10, "{backend:?}: one event per fact, kept through the kill");
        let received = eventually(Duration::from_secs(60), || {
            let receiver = &receiver;
            async move {
                let mut ids: Vec<i64> = receiver
                    .received_requests()
                    .await
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok()?["data"]["id"].as_i64())
                    .collect();
                ids.sort_unstable();
                ids.dedup();
                (ids.len() == 10).then_some(ids)
            }
        })
        .await;
        assert_eq!(received, Some(written), "{backend:?}: every event after the restart");
    }
}
