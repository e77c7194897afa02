//! A full scenario with the service's logs captured: the external ref and the person's
//! words never appear at info level or above (route templates instead of raw paths, tool
//! names instead of tool arguments).
//!
//! The log subscriber is global to a process, and every integration test shares this
//! binary's process, so the scenario runs in a child process: this same binary, asked to
//! run this one test. The capture then holds all that this scenario's apps log, from
//! every thread, and nothing from other tests, as when the test had a binary of its own.

use std::{
    io::Write,
    sync::{Arc, Mutex},
    time::Duration,
};

use crate::common::*;
use engram::{config::LogFormat, telemetry};
use serde_json::json;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const REF: &str = "citizen-7f3a@example.org";
const WORDS: &str = "Wunderbaum";

/// Set in the child process that runs the scenario.
const IN_CHILD: &str = "ENGRAM_TEST_LOGS_CHILD";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_hold_no_personal_data() {
    if std::env::var_os(IN_CHILD).is_some() {
        return scenario().await;
    }
    // libtest names a test by its module path without the crate name.
    let module = module_path!().split_once("::").map_or("", |(_, path)| path);
    let name = format!("{module}::logs_hold_no_personal_data");
    let child = tokio::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([name.as_str(), "--exact", "--test-threads", "1"])
        .env(IN_CHILD, "1")
        .output()
        .await
        .expect("the test binary runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&child.stdout), String::from_utf8_lossy(&child.stderr));
    assert!(child.status.success(), "the scenario failed in its own process:\n{stdout}\n{stderr}");
    assert!(stdout.contains("test result: ok. 1 passed"), "the child did not run {name}:\n{stdout}\n{stderr}");
}

async fn scenario() {
    let captured = Captured::default();
    let writer = captured.clone();
    telemetry::init_logs_to(LogFormat::Json, move || writer.clone());

    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = TestApp::spawn_with_memory(backend, &["--job-poll-ms", "50"]).await;
        // Three messages make a long thread here: a summary job folds the first two.
        let summaries = json!({"summarize_after_messages": 2, "summary_window": 1});
        app.put("/api/agents-config/concierge", &admin("acme"), summaries).await;
        let token = agent("acme");
        let user = enc(REF);
        app.put(&format!("/api/users/{user}/consent"), &token, json!({"ai_consent": true})).await;
        let (_, conversation) = app
            .post("/api/conversations", &token, json!({"agent_id": "concierge", "external_ref": REF, "title": WORDS}))
            .await;
        let id = conversation["id"].as_str().expect("conversation").to_string();
        let messages: Vec<_> =
            [format!("My name is {WORDS}."), format!("I live in {WORDS}stadt."), format!("I love {WORDS} cake.")]
                .into_iter()
                .map(|text| json!({"role": "user", "content": text}))
                .collect();
        app.post(&format!("/api/conversations/{id}/messages"), &token, json!({"messages": messages})).await;
        // A rejected message too: errors must not echo content into the logs either.
        app.post(
            &format!("/api/conversations/{id}/messages"),
            &token,
            json!({"messages": [{"role": "robot", "content": WORDS}]}),
        )
        .await;
        let (_, ended) = app.post(&format!("/api/conversations/{id}/end"), &token, json!({})).await;
        let job_id = ended["extraction"]["job_id"].as_str().expect("job queued").to_string();
        let done = eventually(Duration::from_secs(20), || async {
            let (_, job) = app.get(&format!("/api/jobs/{job_id}"), &admin("acme")).await;
            (job["status"] == "succeeded").then_some(())
        })
        .await;
        assert!(done.is_some(), "extraction finished");
        let summarised = eventually(Duration::from_secs(20), || async {
            let (_, context) = app.get(&format!("/api/conversations/{id}/context"), &token).await;
            (context["summary_through_seq"] == 2).then_some(())
        })
        .await;
        assert!(summarised.is_some(), "the summary was stored");
        let base = format!("/api/agents/concierge/users/{user}");
        app.post(&format!("{base}/facts"), &token, json!({"fact": format!("Owns a {WORDS}")})).await;
        app.get(&format!("{base}/facts/search?q={WORDS}"), &token).await;
        app.get(&format!("{base}/memory-context?query={WORDS}"), &token).await;
        // The tools, over plain HTTP and over MCP: their names are logged, their arguments not.
        let arguments = json!({"agent_id": "concierge", "external_ref": REF, "fact": format!("Rides a {WORDS}")});
        app.post("/api/tools/call", &token, json!({"name": "remember", "arguments": arguments})).await;
        let client = crate::mcp::connect(&app, &token).await;
        let arguments = json!({"agent_id": "concierge", "external_ref": REF, "query": WORDS});
        crate::mcp::call(&client, "recall", arguments).await;
        let arguments = json!({"agent_id": "concierge", "external_ref": REF, "id": WORDS});
        crate::mcp::call(&client, "forget", arguments).await;
        // Messages the MCP server cannot take: the SDK must not log what they carry.
        for message in [
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": WORDS, "arguments": WORDS}}),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": WORDS}}),
        ] {
            app.client
                .post(format!("{}/mcp", app.base))
                .bearer_auth(&token)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-11-25")
                .json(&message)
                .send()
                .await
                .expect("sent");
        }
        app.get(&format!("/api/rgpd/users/{user}/ai-data"), &admin("acme")).await;
        app.delete(&format!("/api/rgpd/users/{user}/ai-data"), &admin("acme")).await;
        app.get(&format!("/api/users/{}x/consent", "%00"), &token).await;
    }

    let logs = String::from_utf8(captured.0.lock().expect("logs").clone()).expect("utf-8 logs");
    assert!(logs.contains("request completed"), "logs were captured");
    let completed: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["message"] == "request completed")
        .collect();
    assert!(
        completed.iter().any(|line| line["span"]["status"] == 200
            && line["span"]["latency_ms"].as_f64().is_some_and(|ms| ms > 0.0)
            && line["span"]["tenant"] == "acme"
            && line["span"]["route"].as_str().is_some_and(|route| route.starts_with("/api/"))),
        "a request's line has its status, latency, tenant and route: {completed:?}"
    );
    assert!(logs.contains("summary succeeded"), "the summary job ran and logged");
    assert!(logs.contains("/api/agents/{agent_id}/users/{external_ref}/facts"), "route templates are logged");
    for tool in ["remember", "recall", "forget"] {
        assert!(logs.contains(&format!("\"tool\":\"{tool}\"")), "tool calls are logged by name: {tool}");
    }
    for secret in [REF, "citizen-7f3a", "example.org", WORDS, &enc(REF)] {
        assert!(!logs.contains(secret), "the logs contain {secret:?}");
    }
}
