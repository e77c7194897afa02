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

/// One `engram serve` process; it derefs to the API it serves.
pub(crate) struct Service {
    child: Child,
    api: Api,
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
        let api = Api::at(format!("http://127.0.0.1:{port}"));
        let up = eventually(Duration::from_secs(30), || async {
            let ready = api.client.get(format!("{}/readyz", api.base)).send().await;
            ready.ok().filter(|r| r.status().is_success()).map(|_| ())
        })
        .await;
        assert!(up.is_some(), "engram serve did not become ready");
        Service { child, api }
    }

    fn kill(&mut self) {
        // SIGKILL: no graceful shutdown, the lease is left behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl std::ops::Deref for Service {
    type Target = Api;

    fn deref(&self) -> &Api {
        &self.api
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Ends a conversation of three facts about `user` through `api`; the extraction job's id.
async fn end_conversation(api: &Api, user: &str) -> String {
    let turns = ["My name is Alice.", "I live in Paris.", "I prefer tea over coffee."];
    job_id(&converse(api, "concierge", user, &turns).await.1)
}

async fn job(api: &Api, id: &str) -> Value {
    api.get(&format!("/api/jobs/{id}"), &admin("acme")).await.1
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
        first.enable_memory("acme", "concierge").await;
        let id = end_conversation(&first, "alice").await;
        let running = eventually(Duration::from_secs(10), || async {
            (job(&first, &id).await["status"] == "running").then_some(())
        })
        .await;
        assert!(running.is_some(), "{backend:?}: the job never started");
        first.kill();

        let second = Service::start(&db, &args).await;
        let done = job_reaching(&second, &id, &["succeeded"], Duration::from_secs(30)).await;
        assert_eq!(done["attempts"], 2, "{backend:?}: {done}");
        let (_, facts) = second.get("/api/agents/concierge/users/alice/facts", &agent("acme")).await;
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
    replicas[0].enable_memory("acme", "concierge").await;
    let mut ends = Vec::new();
    for i in 0..30 {
        let api = replicas[i % 3].api.clone();
        ends.push(tokio::spawn(async move { end_conversation(&api, &format!("user-{i}")).await }));
    }
    let mut ids = Vec::new();
    for end in ends {
        ids.push(end.await.expect("end task"));
    }
    for id in &ids {
        let done = job_reaching(&replicas[0], id, &["succeeded"], Duration::from_secs(60)).await;
        assert_eq!(done["attempts"], 1, "{done}");
    }
    let mut stored = 0;
    for i in 0..30 {
        let (_, facts) =
            replicas[i % 3].get(&format!("/api/agents/concierge/users/user-{i}/facts"), &agent("acme")).await;
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
        let (_, page) = replicas[2].get(&path, &admin("acme")).await;
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
    service.enable_memory("acme", "concierge").await;
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
    let (status, config) = again.get("/api/agents-config/concierge", &admin("acme")).await;
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
        let hook = json!({"url": format!("http://127.0.0.1:{port}/hook")});
        let (status, created) = first.post("/api/webhooks", &admin("acme"), hook).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        for i in 0..10 {
            let fact = json!({"fact": format!("Fact number {i}")});
            let (status, _) = first.post("/api/agents/concierge/users/ann/facts", &agent("acme"), fact).await;
            assert_eq!(status, StatusCode::CREATED);
        }
        first.kill();

        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("the receiver's port");
        let receiver = MockServer::builder().listener(listener).start().await;
        Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&receiver).await;
        let second = Service::start(&db, &args).await;
        let (status, feed) = second.get("/api/events?limit=100", &admin("acme")).await;
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
