//! NDJSON import and export (issue 26), on both backends: `POST /api/import` with its
//! bad-line reports and progress row, idempotent re-runs, the `engram import` and
//! `engram export` commands (a 100 000-line import in bounded memory, killed half-way
//! and run again; export → import → export identical, also SQLite → PostgreSQL), and
//! the committed JSON Schema of the format.

use std::{path::Path, time::Duration};

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

on_both_backends!(
    bad_lines_are_reported_and_skipped_while_good_lines_land,
    a_rerun_adds_nothing_and_the_import_is_followed_by_id,
    imported_slot_facts_follow_when_they_were_said,
    export_then_import_then_export_is_identical,
    a_large_import_runs_in_bounded_memory_and_resumes_after_a_kill,
    erasure_removes_the_client_ids,
    extract_queues_the_imported_conversations_the_agents_rules_allow,
    an_escaped_nul_is_a_bad_line_and_the_rest_is_imported,
    every_bad_line_is_listed_page_by_page_through_the_api_and_the_command_line,
    negative_years_are_refused_alike,
    a_killed_import_is_marked_interrupted_at_the_next_start,
);

const FACTS: &str = "/api/agents/concierge/users/ann/facts";

/// A fact line for `concierge` / `ann`.
fn fact(id: &str, text: &str, observed_at: &str) -> Value {
    json!({"type": "fact", "id": id, "agent_id": "concierge", "external_ref": "ann", "fact": text,
           "observed_at": observed_at, "created_at": observed_at})
}

fn ndjson(lines: &[Value]) -> String {
    lines.iter().map(|line| line.to_string() + "\n").collect()
}

/// `POST /api/import` with `body` as NDJSON.
async fn import(app: &TestApp, token: &str, body: impl Into<reqwest::Body>) -> (StatusCode, Value) {
    import_with(app, token, "", body).await
}

/// [`import`] with a query string (`?extract=true`).
async fn import_with(app: &TestApp, token: &str, query: &str, body: impl Into<reqwest::Body>) -> (StatusCode, Value) {
    let response = app
        .client
        .post(format!("{}/api/import{query}", app.base))
        .bearer_auth(token)
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .expect("import request");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The texts of ann's facts, superseded ones included.
async fn fact_texts(app: &TestApp) -> Vec<String> {
    let (status, listed) = app.get(&format!("{FACTS}?limit=200&include_superseded=true"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let mut texts: Vec<String> = texts(&listed["items"]).into_iter().map(str::to_owned).collect();
    texts.sort();
    texts
}

/// `(line, code)` of each report of a list.
fn line_codes(reports: &Value) -> Vec<(u64, &str)> {
    let reports = reports.as_array().expect("a list of reports");
    reports.iter().map(|e| (e["line"].as_u64().unwrap_or(0), e["code"].as_str().unwrap_or(""))).collect()
}

async fn count(db: &TestDb, sql: &'static str) -> i64 {
    let rows: Vec<(i64,)> = db.rows(sql).await;
    rows[0].0
}

async fn bad_lines_are_reported_and_skipped_while_good_lines_land(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--import-max-line-bytes", "2048"]).await;
    // No body at all is a client's mistake, refused before an import is recorded.
    let (status, error) = import(&app, &admin("acme"), "").await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    let (_, imports) = app.get("/api/import", &admin("acme")).await;
    assert_eq!(imports, json!([]), "an empty body recorded an import");
    let conversation = json!({"type": "conversation", "id": "talk-1", "agent_id": "concierge", "external_ref": "ann",
        "created_at": "2024-02-01T09:00:00Z", "ended_at": "2024-02-01T09:05:00Z", "messages": [
            {"role": "user", "content": "I restore old sailing dinghies", "created_at": "2024-02-01T09:00:10Z"},
            {"role": "assistant", "content": "What a craft!", "created_at": "2024-02-01T09:00:20Z"}]});
    let mut extracted = fact("f-3", "Restores old sailing dinghies", "2024-02-01T09:00:10Z");
    extracted["source"] = json!("extracted");
    extracted["conversation_id"] = json!("talk-1");
    let mut other_tenant = fact("f-4", "Keeps a logbook of tides", "2024-01-01T00:00:00Z");
    other_tenant["tenant"] = json!("globex");
    let mut body = String::new();
    body += &ndjson(&[fact("f-1", "Collects brass compasses", "2024-01-05T10:00:00Z")]);
    body += "{\"type\": \"fact\", \"id\": \"f-2\", \"fact\": \n"; // line 2: malformed
    body += &ndjson(&[conversation]); // line 3
    body += &ndjson(&[extracted]); // line 4
    body += "{\"type\":\"fact\",\"id\":\"f-5\",\"agent_id\":\"concierge\",\"external_ref\":\"ann\",\"fact\":\"Has a \u{0} cat\"}\n"; // line 5: NUL
    body += &format!("{}\n", fact("f-6", &"long words ".repeat(300), "2024-01-01T00:00:00Z")); // line 6: over the cap
    body += &ndjson(&[other_tenant]); // line 7
    body += "\n"; // line 8: blank, skipped silently
    body += &ndjson(&[json!({"type": "consent", "id": "c-1", "external_ref": "ann", "ai_consent": false,
        "updated_at": "2024-03-01T00:00:00Z"})]); // line 9
    body += &ndjson(&[fact("f-7", "Sails on Sunday mornings", "2024-01-06T10:00:00Z")]); // line 10, no newline after
    let body = body.trim_end().to_owned();

    let (status, job) = import(&app, &admin("acme"), body).await;
    assert_eq!(status, StatusCode::OK, "{job}");
    assert_eq!(job["status"], "succeeded", "{job}");
    assert!(job["finished_at"].is_string(), "{job}");
    assert_eq!(
        (job["lines_read"].clone(), job["added"].clone(), job["failed"].clone()),
        (json!(10), json!(5), json!(4)),
        "{job}"
    );
    let reports = line_codes(&job["errors"]);
    assert_eq!(reports, [(2, "malformed_json"), (5, "nul_byte"), (6, "line_too_long"), (7, "tenant_mismatch")]);
    let messages: Vec<&str> =
        job["errors"].as_array().into_iter().flatten().filter_map(|e| e["message"].as_str()).collect();
    assert!(messages.iter().all(|m| !m.contains("cat") && !m.contains("tides")), "reports quote no line: {messages:?}");

    assert_eq!(
        fact_texts(&app).await,
        ["Collects brass compasses", "Restores old sailing dinghies", "Sails on Sunday mornings"]
    );
    // The facts keep their original times; the extracted one names its conversation.
    let (_, listed) = app.get(&format!("{FACTS}?limit=10"), &agent("acme")).await;
    let items = listed["items"].as_array().expect("items");
    let compasses = items.iter().find(|f| f["fact"] == "Collects brass compasses").expect("imported fact");
    assert_eq!(compasses["created_at"], "2024-01-05T10:00:00Z");
    assert_eq!(compasses["observed_at"], "2024-01-05T10:00:00Z");
    let dinghies = items.iter().find(|f| f["source"] == "extracted").expect("extracted fact");
    let (status, talk) = app
        .get(&format!("/api/conversations/{}", dinghies["conversation_id"].as_str().unwrap_or("")), &agent("acme"))
        .await;
    assert_eq!(status, StatusCode::OK, "{talk}");
    assert_eq!(
        (talk["status"].clone(), talk["message_count"].clone(), talk["created_at"].clone()),
        (json!("ended"), json!(2), json!("2024-02-01T09:00:00Z"))
    );
    let (_, consent) = app.get("/api/users/ann/consent", &agent("acme")).await;
    assert_eq!(
        (consent["ai_consent"].clone(), consent["updated_at"].clone()),
        (json!(false), json!("2024-03-01T00:00:00Z"))
    );
    // Nothing reached the other tenant.
    let (_, theirs) = app.get(&format!("{FACTS}?limit=10"), &agent("globex")).await;
    assert_eq!(theirs["items"], json!([]));
    // Each record wrote its event.
    let (_, events) = app.get("/api/events?limit=100", &admin("acme")).await;
    let kinds: Vec<&str> =
        events["items"].as_array().into_iter().flatten().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "fact.added").count(), 3, "{kinds:?}");
    assert!(kinds.contains(&"conversation.created") && kinds.contains(&"consent.changed"), "{kinds:?}");
}

async fn a_rerun_adds_nothing_and_the_import_is_followed_by_id(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = ndjson(&[
        fact("a", "Grows chillies on the balcony", "2024-01-01T08:00:00Z"),
        fact("b", "Reads detective novels", "2024-01-02T08:00:00Z"),
        fact("b", "Reads detective novels in French", "2024-01-02T08:00:00Z"),
    ]);
    let (status, first) = import(&app, &admin("acme"), body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(
        (first["added"].clone(), first["duplicates"].clone()),
        (json!(2), json!(1)),
        "a client id twice in one file is written once"
    );
    let (status, again) = import(&app, &admin("acme"), body).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!((again["added"].clone(), again["duplicates"].clone()), (json!(0), json!(3)), "{again}");
    assert_eq!(fact_texts(&app).await, ["Grows chillies on the balcony", "Reads detective novels"]);

    let id = first["id"].as_str().expect("import id");
    let (status, followed) = app.get(&format!("/api/import/{id}"), &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{followed}");
    assert_eq!(
        (followed["lines_read"].clone(), followed["added"].clone(), followed["status"].clone()),
        (json!(3), json!(2), json!("succeeded"))
    );
    assert!(followed["finished_at"].is_string(), "{followed}");
    let (_, listed) = app.get("/api/import", &admin("acme")).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    // Another tenant's import is not found; the route needs the admin scope.
    let (status, error) = app.get(&format!("/api/import/{id}"), &admin("globex")).await;
    assert_error(status, &error, StatusCode::NOT_FOUND, "not_found");
    let (status, error) = import(&app, &agent("acme"), "").await;
    assert_error(status, &error, StatusCode::FORBIDDEN, "forbidden");
}

async fn imported_slot_facts_follow_when_they_were_said(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // The move to Porto is on the first line, though it was said last.
    let body = ndjson(&[
        fact("home-2", "Lives in Porto", "2024-06-01T00:00:00Z"),
        fact("home-1", "Lives in Ghent", "2023-01-01T00:00:00Z"),
    ]);
    let (status, job) = import(&app, &admin("acme"), body).await;
    assert_eq!(status, StatusCode::OK, "{job}");
    let (_, current) = app.get(FACTS, &agent("acme")).await;
    assert_eq!(texts(&current["items"]), ["Lives in Porto"], "{current}");
    let (_, before) = app.get(&format!("{FACTS}?as_of=2023-06-01T00:00:00Z"), &agent("acme")).await;
    assert_eq!(texts(&before["items"]), ["Lives in Ghent"], "{before}");
}

/// Runs `engram <args>` on `db` and returns its stdout, after checking it succeeded.
async fn engram(db: &TestDb, args: &[&str]) -> String {
    let output = cli(db, args).output().await.expect("engram runs");
    assert!(output.status.success(), "engram {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn cli(db: &TestDb, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_engram"));
    command
        .args(args)
        .args(["--database-url", &db.url, "--data-dir", &db.data_dir.display().to_string()])
        .env_remove("DATABASE_URL")
        .kill_on_drop(true);
    command
}

/// A history with every kind of record: consents, conversations (one with a key and
/// tool calls, one open), facts of each source, a slot's timeline and an expiry.
fn history() -> String {
    let mut lines = vec![
        json!({"type": "consent", "id": "consent-ann", "external_ref": "ann", "ai_consent": true, "updated_at": "2024-01-01T00:00:00Z"}),
        json!({"type": "consent", "id": "consent-bo", "external_ref": "bo", "ai_consent": false, "updated_at": "2024-01-02T00:00:00Z"}),
        json!({"type": "conversation", "id": "talk-a", "agent_id": "concierge", "external_ref": "ann", "key": "session-17",
            "title": "Weekend plans", "metadata": {"channel": "sms"}, "created_at": "2024-02-01T09:00:00Z",
            "ended_at": "2024-02-01T10:00:00Z", "messages": [
                {"role": "system", "content": "Be brief.", "created_at": "2024-02-01T09:00:00Z"},
                {"role": "user", "content": [{"type": "text", "text": "Book me a kayak"}], "created_at": "2024-02-01T09:00:05Z"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "call-1", "name": "book", "arguments": {"boat": "kayak"}}],
                 "created_at": "2024-02-01T09:00:06Z"},
                {"role": "tool", "content": "booked", "tool_call_id": "call-1", "created_at": "2024-02-01T09:00:07Z"},
                {"role": "user", "content": "Thanks", "name": "ann", "metadata": {"lang": "en"}, "created_at": "2024-02-01T09:01:00Z"}]}),
        json!({"type": "conversation", "id": "talk-b", "agent_id": "sales", "external_ref": "bo", "memory": false,
            "created_at": "2024-03-01T09:00:00Z", "messages": [
                {"role": "user", "content": "Any discounts on paddles?", "created_at": "2024-03-01T09:00:01Z"}]}),
    ];
    let mut kayak = fact("fact-kayak", "Paddles a kayak at weekends", "2024-02-01T09:00:05Z");
    kayak["source"] = json!("extracted");
    kayak["conversation_id"] = json!("talk-a");
    kayak["tags"] = json!(["sport", "water"]);
    kayak["score"] = json!(0.8);
    let mut agent_fact = fact("fact-tea", "Drinks mint tea", "2024-02-03T00:00:00Z");
    agent_fact["source"] = json!("agent");
    let mut expiring = fact("fact-trip", "Is travelling to Oslo", "2024-02-04T00:00:00Z");
    expiring["expires_at"] = json!("2099-01-01T00:00:00Z");
    lines.extend([
        kayak,
        agent_fact,
        expiring,
        fact("fact-home-new", "Lives in Tallinn", "2024-05-01T00:00:00Z"),
        fact("fact-home-old", "Lives in Riga", "2022-05-01T00:00:00Z"),
    ]);
    ndjson(&lines)
}

/// Imports `file` into `db` with the command line, then exports it back; returns the export.
async fn import_then_export(db: &TestDb, file: &Path) -> String {
    engram(db, &["import", "--tenant", "acme", &file.display().to_string()]).await;
    let out = db.data_dir.join("export.ndjson");
    engram(db, &["export", "--tenant", "acme", &out.display().to_string()]).await;
    std::fs::read_to_string(&out).expect("the export")
}

async fn export_then_import_then_export_is_identical(backend: Backend) {
    // A database with history and live records: the history imported, one fact
    // remembered through the API (its id is its own, not a client's).
    let app = TestApp::spawn(backend).await;
    let source = app.db.data_dir.join("history.ndjson");
    std::fs::write(&source, history()).expect("write the history");
    engram(&app.db, &["import", "--tenant", "acme", &source.display().to_string()]).await;
    let (status, live) =
        app.post(FACTS, &agent("acme"), json!({"fact": "Prefers window seats", "tags": ["travel"]})).await;
    assert_eq!(status, StatusCode::CREATED, "{live}");
    // Another tenant's records stay out of this tenant's export.
    app.post("/api/agents/concierge/users/ann/facts", &agent("globex"), json!({"fact": "Owns a tandem"})).await;
    let exported = app.db.data_dir.join("first.ndjson");
    engram(&app.db, &["export", "--tenant", "acme", &exported.display().to_string()]).await;
    let first = std::fs::read_to_string(&exported).expect("the first export");
    assert_eq!(first.lines().count(), 4 + 5 + 1, "{first}");
    assert!(first.contains(live["id"].as_str().unwrap_or("?")) && !first.contains("tandem"), "{first}");

    let empty = TestDb::fresh(backend).await;
    let second = import_then_export(&empty, &exported).await;
    assert_eq!(second, first);
}

/// SQLite out, PostgreSQL in: the same records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_from_sqlite_imports_into_postgres_identically() {
    let sqlite = TestDb::fresh(Backend::Sqlite).await;
    let source = sqlite.data_dir.join("history.ndjson");
    std::fs::write(&source, history()).expect("write the history");
    let first = import_then_export(&sqlite, &source).await;
    let file = sqlite.data_dir.join("first.ndjson");
    std::fs::write(&file, &first).expect("write the export");
    let postgres = TestDb::fresh(Backend::Postgres).await;
    assert_eq!(import_then_export(&postgres, &file).await, first);
}

/// Peak resident memory of a running process, in KiB (`VmHWM`), if it still runs.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs the command to its end, sampling its peak memory; returns its stdout and peak.
async fn run_sampled(mut command: tokio::process::Command) -> (String, u64) {
    let child =
        command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().expect("spawn");
    let pid = child.id().expect("pid");
    let sampler = tokio::spawn(async move {
        let mut peak = 0;
        while let Some(kib) = peak_rss_kib(pid) {
            peak = peak.max(kib);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        peak
    });
    let output = tokio::time::timeout(Duration::from_secs(1800), child.wait_with_output())
        .await
        .expect("in time")
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    (String::from_utf8_lossy(&output.stdout).into_owned(), sampler.await.expect("sampler"))
}

const LARGE: usize = 100_000;

/// The memory bound of a 100 000-line import: far under what the file would take
/// parsed whole, and near what an import of ten lines takes.
const PEAK_RSS_BOUND_KIB: u64 = 128 * 1024;

async fn a_large_import_runs_in_bounded_memory_and_resumes_after_a_kill(backend: Backend) {
    let db = TestDb::fresh(backend).await;
    let file = db.data_dir.join("large.ndjson");
    {
        use std::io::Write;
        let mut out = std::io::BufWriter::new(std::fs::File::create(&file).expect("create"));
        for i in 0..LARGE {
            // A hundred people, a thousand facts each.
            let line = json!({"type": "fact", "id": format!("n{i}"), "agent_id": "concierge",
                "external_ref": format!("person-{}", i % 100), "fact": format!("Noted item {i} on the packing list"),
                "created_at": "2024-01-01T00:00:00Z"});
            writeln!(out, "{line}").expect("write");
        }
        out.flush().expect("flush");
    }
    // Migrated first, so the progress can be read while the import runs.
    engram(&db, &["migrate"]).await;
    let started = std::time::Instant::now();
    let path = file.display().to_string();
    let args = ["import", "--tenant", "acme", path.as_str()];
    // Killed (SIGKILL) once a tenth has committed, well before the end.
    let mut child =
        cli(&db, &args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().expect("spawn");
    let pid = child.id().expect("pid");
    let (mut first_peak, deadline) = (0, std::time::Instant::now() + Duration::from_secs(600));
    let committed = loop {
        first_peak = first_peak.max(peak_rss_kib(pid).unwrap_or(0));
        let n = count(&db, "SELECT count(*) FROM facts").await;
        if n >= 10_000 {
            break n;
        }
        assert!(std::time::Instant::now() < deadline, "the first run commits batches: {n} facts");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    child.start_kill().expect("kill");
    let killed = child.wait().await.expect("wait");
    assert!(!killed.success(), "the first run was killed, not finished");
    let after_kill = count(&db, "SELECT count(*) FROM facts").await;
    assert!((committed as usize..LARGE).contains(&(after_kill as usize)), "killed half-way: {after_kill} facts");

    let (report, peak) = run_sampled(cli(&db, &args)).await;
    // The summary is the last line (log lines, if any, come before it).
    let summary = report.lines().last().unwrap_or_default();
    let job: Value = serde_json::from_str(summary).unwrap_or_else(|e| panic!("the import's report: {e}: {report}"));
    let elapsed = started.elapsed();
    assert_eq!(job["lines_read"], LARGE, "{job}");
    assert_eq!(job["failed"], 0, "{job}");
    assert_eq!(job["duplicates"], after_kill, "what the killed run committed is found again: {job}");
    assert_eq!(job["added"].as_i64().unwrap_or(0) + after_kill, LARGE as i64, "{job}");
    assert_eq!(count(&db, "SELECT count(*) FROM facts").await, LARGE as i64);
    assert_eq!(count(&db, "SELECT count(DISTINCT normalized) FROM facts").await, LARGE as i64, "every record once");
    assert_eq!(count(&db, "SELECT count(*) FROM import_ids").await, LARGE as i64);
    let peak = peak.max(first_peak);
    println!(
        "{backend:?}: 100 000-line import, killed at {after_kill} and run again: peak RSS {} KiB, {elapsed:.1?}",
        peak
    );
    assert!(peak > 0 && peak < PEAK_RSS_BOUND_KIB, "peak RSS {peak} KiB");
}

async fn erasure_removes_the_client_ids(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut bystander = fact("by-1", "Knits scarves", "2024-01-01T00:00:00Z");
    bystander["external_ref"] = json!("cleo");
    let body = ndjson(&[
        fact("ann-1", "Knits socks", "2024-01-01T00:00:00Z"),
        json!({"type": "consent", "id": "ann-consent", "external_ref": "ann", "ai_consent": true}),
        bystander,
    ]);
    let (status, job) = import(&app, &admin("acme"), body.clone()).await;
    assert_eq!((status, job["added"].clone()), (StatusCode::OK, json!(3)), "{job}");
    assert_eq!(count(&app.db, "SELECT count(*) FROM import_ids WHERE external_ref = 'ann'").await, 2);
    // The person's export says which client ids their records came under, and only theirs.
    let (status, export) = app.get("/api/rgpd/users/ann/ai-data", &token("acme", "rgpd")).await;
    assert_eq!(status, StatusCode::OK, "{export}");
    let ids: Vec<(&str, &str, bool)> = export["imported_ids"]
        .as_array()
        .expect("imported_ids")
        .iter()
        .map(|id| {
            let (kind, client_id) = (id["kind"].as_str().unwrap_or(""), id["client_id"].as_str().unwrap_or(""));
            (kind, client_id, id["record_id"].is_string())
        })
        .collect();
    assert_eq!(ids, [("consent", "ann-consent", false), ("fact", "ann-1", true)], "{export}");
    assert_eq!(
        export["imported_ids"][1]["record_id"], export["facts"][0]["id"],
        "the client id names the person's fact"
    );
    let (status, erased) = app.delete("/api/rgpd/users/ann/ai-data", &token("acme", "rgpd")).await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    assert_eq!(count(&app.db, "SELECT count(*) FROM import_ids WHERE external_ref = 'ann'").await, 0);
    assert_eq!(count(&app.db, "SELECT count(*) FROM import_ids WHERE external_ref = 'cleo'").await, 1);
    // Imported again after the erasure, the person's records are new again.
    let (_, again) = import(&app, &admin("acme"), body).await;
    assert_eq!((again["added"].clone(), again["duplicates"].clone()), (json!(2), json!(1)), "{again}");
}

/// The committed JSON Schema of a line is the one the types give. Regenerate with
/// `UPDATE_OPENAPI=1 cargo test --test api import`.
#[test]
fn import_schema_is_committed_and_current() {
    let schema = engram::domain::import::json_schema().expect("the schema");
    let rendered = serde_json::to_string_pretty(&schema).expect("render") + "\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/import-record.schema.json");
    if std::env::var("UPDATE_OPENAPI").is_ok() {
        std::fs::write(path, &rendered).expect("write the schema");
    }
    let committed =
        std::fs::read_to_string(path).expect("openapi/import-record.schema.json exists (UPDATE_OPENAPI=1 writes it)");
    assert!(
        committed == rendered,
        "openapi/import-record.schema.json is stale: run UPDATE_OPENAPI=1 cargo test --test api import"
    );
    for kind in ["ConversationRecord", "FactRecord", "ConsentRecord", "MessageRecord"] {
        assert!(schema["$defs"].get(kind).is_some() || rendered.contains(kind), "{kind} is in the schema");
    }
    assert!(!rendered.contains("#/components/"), "references point into $defs");
}

/// `extract=true`: an ended conversation is queued for extraction when the live rules
/// allow it (memory on, enough user turns, consent, the conversation's own switch), an
/// open one is extracted whole when it ends; without the flag, imported messages count
/// as extracted.
async fn extract_queues_the_imported_conversations_the_agents_rules_allow(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &[]).await;
    let talk = |id: &str, user: &str, ended: bool, turns: &[&str]| {
        let mut messages = Vec::new();
        for (i, turn) in turns.iter().enumerate() {
            messages.push(json!({"role": "user", "content": turn, "created_at": format!("2024-02-01T09:0{i}:00Z")}));
            messages.push(
                json!({"role": "assistant", "content": "Noted!", "created_at": format!("2024-02-01T09:0{i}:30Z")}),
            );
        }
        let mut line = json!({"type": "conversation", "id": id, "agent_id": "concierge", "external_ref": user,
            "created_at": "2024-02-01T09:00:00Z", "messages": messages});
        if ended {
            line["ended_at"] = json!("2024-02-01T09:10:00Z");
        }
        line
    };
    let three = ["Hi! My name is Ines.", "I live in Porto.", "I repair old clocks in my spare time."];
    let mut opted_out = talk("quiet", "ines", true, &three);
    opted_out["memory"] = json!(false);
    let body = ndjson(&[
        json!({"type": "consent", "id": "bo-consent", "external_ref": "bo", "ai_consent": false}),
        talk("told", "ines", true, &three),
        talk("refused", "bo", true, &three),
        talk("short", "cy", true, &three[..1]),
        opted_out,
        talk("open", "di", false, &three),
    ]);
    let (status, job) = import_with(&app, &admin("acme"), "?extract=true", body).await;
    assert_eq!(status, StatusCode::OK, "{job}");
    assert_eq!((job["added"].clone(), job["queued_for_extraction"].clone()), (json!(6), json!(1)), "{job}");
    // The queued conversation's facts come from its messages, observed when they were said.
    let facts_of = |user: &'static str| {
        let app = &app;
        async move {
            let (_, page) = app.get(&format!("/api/agents/concierge/users/{user}/facts"), &agent("acme")).await;
            page["items"].as_array().cloned().unwrap_or_default()
        }
    };
    let ines = eventually(Duration::from_secs(30), || async {
        let facts = facts_of("ines").await;
        facts.iter().any(|f| f["fact"].as_str().is_some_and(|t| t.contains("Porto"))).then_some(facts)
    })
    .await
    .expect("the imported conversation was extracted");
    let porto = ines.iter().find(|f| f["fact"].as_str().is_some_and(|t| t.contains("Porto"))).expect("fact");
    assert_eq!(porto["observed_at"], "2024-02-01T09:01:00Z", "{porto}");
    let (_, jobs) = app.get("/api/jobs?limit=50", &admin("acme")).await;
    assert_eq!(jobs["items"].as_array().map(Vec::len), Some(1), "only the allowed conversation: {jobs}");
    for user in ["bo", "cy", "di"] {
        assert_eq!(facts_of(user).await, Vec::<Value>::new(), "{user}");
    }
    // The open conversation is extracted whole when it ends.
    let (_, open) = app.get("/api/conversations?external_ref=di", &agent("acme")).await;
    let open_id = open["items"][0]["id"].as_str().expect("di's conversation").to_owned();
    let (status, ended) = app.post(&format!("/api/conversations/{open_id}/end"), &agent("acme"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{ended}");
    let job = job_reaching(&app, &job_id(&ended), &["succeeded"], Duration::from_secs(30)).await;
    assert_eq!(job["conversation_id"], open_id.as_str(), "{job}");
    assert!(facts_of("di").await.iter().any(|f| f["fact"].as_str().is_some_and(|t| t.contains("Porto"))));

    // Without the flag, the same history counts as extracted: its end queues nothing.
    let (_, job) = import_with(&app, &admin("acme"), "", ndjson(&[talk("plain", "ed", false, &three)])).await;
    assert_eq!(job["queued_for_extraction"], 0, "{job}");
    let (_, plain) = app.get("/api/conversations?external_ref=ed", &agent("acme")).await;
    let plain_id = plain["items"][0]["id"].as_str().expect("ed's conversation").to_owned();
    let (_, ended) = app.post(&format!("/api/conversations/{plain_id}/end"), &agent("acme"), json!({})).await;
    assert_eq!(ended["extraction"], json!({"queued": false, "reason": "nothing_new"}), "{ended}");
    // The flag is a boolean.
    let (status, error) = import_with(
        &app,
        &admin("acme"),
        "?extract=maybe",
        ndjson(&[fact("x", "Owns a kayak", "2024-01-01T00:00:00Z")]),
    )
    .await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
}

/// A conversation line for `concierge` / `ann` with `id`, merged with `extra`.
fn conversation(id: &str, extra: Value) -> Value {
    let mut line = json!({"type": "conversation", "id": id, "agent_id": "concierge", "external_ref": "ann",
        "created_at": "2024-02-01T09:00:00Z", "messages": []});
    line.as_object_mut().expect("an object").extend(extra.as_object().cloned().unwrap_or_default());
    line
}

/// `\u0000` escaped in a title, a metadata value and key, a message's content and its
/// nested metadata: each such line is reported, the others land, on both backends; a
/// REST body with one is the documented 400 and writes nothing.
async fn an_escaped_nul_is_a_bad_line_and_the_rest_is_imported(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let message = |extra: Value| {
        let mut m = json!({"role": "user", "content": "hello", "created_at": "2024-02-01T09:00:01Z"});
        m.as_object_mut().expect("an object").extend(extra.as_object().cloned().unwrap_or_default());
        m
    };
    let lines = [
        fact("f-1", "Collects brass compasses", "2024-01-05T10:00:00Z"),
        conversation("t-title", json!({"title": "a\u{0}b"})),
        conversation("t-value", json!({"metadata": {"channel": "s\u{0}ms"}})),
        conversation("t-key", json!({"metadata": {"chan\u{0}nel": "sms"}})),
        conversation("t-content", json!({"messages": [message(json!({"content": "I sail\u{0}"}))]})),
        conversation("t-nested", json!({"messages": [message(json!({"metadata": {"a": {"b": ["\u{0}"]}}}))]})),
        fact("f-2", "Has a \u{0} cat", "2024-01-05T10:00:00Z"),
        conversation("t-good", json!({"title": "Weekend plans"})),
    ];
    let body = ndjson(&lines);
    assert!(body.contains("\\u0000") && !body.contains('\0'), "escaped, not raw: {body}");
    let (status, job) = import(&app, &admin("acme"), body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{job}");
    assert_eq!(
        (job["status"].clone(), job["added"].clone(), job["failed"].clone()),
        (json!("succeeded"), json!(2), json!(6))
    );
    let reports = line_codes(&job["errors"]);
    assert_eq!(reports, (2..=7).map(|line| (line, "nul_byte")).collect::<Vec<_>>());
    assert_eq!(fact_texts(&app).await, ["Collects brass compasses"]);
    let (_, listed) = app.get("/api/conversations", &agent("acme")).await;
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1), "{listed}");
    let (_, again) = import(&app, &admin("acme"), body).await;
    assert_eq!(
        (again["added"].clone(), again["duplicates"].clone(), again["failed"].clone()),
        (json!(0), json!(2), json!(6))
    );

    let refused = json!({"agent_id": "concierge", "external_ref": "bo", "metadata": {"a": {"k\u{0}": 1}}});
    let (status, error) = app.post("/api/conversations", &agent("acme"), refused).await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    let (_, listed) = app.get("/api/conversations", &agent("acme")).await;
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1), "nothing written: {listed}");
}

/// Every report of an import, a page at a time, by line.
async fn all_reports(app: &TestApp, token: &str, id: &str, limit: usize) -> Vec<(u64, String)> {
    let (mut reports, mut cursor) = (Vec::new(), String::new());
    loop {
        let (status, page) = app.get(&format!("/api/import/{id}/errors?limit={limit}{cursor}"), token).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let items = line_codes(&page["items"]);
        assert!(items.len() <= limit, "{page}");
        reports.extend(items.into_iter().map(|(line, code)| (line, code.to_owned())));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return reports,
        }
    }
}

/// A bad line of each kind, by its number in a file where every fifth line is good.
fn hostile_line(n: usize) -> (String, Option<&'static str>) {
    let bad = match n % 5 {
        0 => return (fact(&format!("g{n}"), &format!("Noted item {n}"), "2024-01-01T00:00:00Z").to_string(), None),
        1 => (fact(&format!("b{n}"), "Has a \u{0} cat", "2024-01-01T00:00:00Z").to_string(), "nul_byte"),
        2 => (fact(&format!("b{n}"), "Sails", "-0001-01-01T00:00:00Z").to_string(), "invalid_record"),
        3 if n % 10 == 3 => ("[".repeat(100_000), "malformed_json"),
        3 => ("{\"type\": \"fact\", \"id\": ".to_owned(), "malformed_json"),
        _ => (
            json!({"type": "fact", "id": n, "agent_id": "concierge", "external_ref": "ann", "fact": ["x"]}).to_string(),
            "invalid_record",
        ),
    };
    (bad.0, Some(bad.1))
}

async fn every_bad_line_is_listed_page_by_page_through_the_api_and_the_command_line(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let lines: Vec<(String, Option<&str>)> = (0..300).map(hostile_line).collect();
    let body: String = lines.iter().map(|(line, _)| format!("{line}\n")).collect();
    let expected: Vec<(u64, String)> =
        (1..).zip(&lines).filter_map(|(number, (_, code))| code.map(|code| (number, code.to_owned()))).collect();
    let (status, job) = import(&app, &admin("acme"), body).await;
    assert_eq!(status, StatusCode::OK, "{job}");
    assert_eq!((job["added"].clone(), job["failed"].clone()), (json!(60), json!(240)), "{job}");
    assert_eq!(job["errors"].as_array().map(Vec::len), Some(100), "the job keeps the first 100");
    let id = job["id"].as_str().expect("id");
    assert_eq!(all_reports(&app, &admin("acme"), id, 7).await, expected);
    assert_eq!(all_reports(&app, &admin("acme"), id, 1000).await, expected);
    // Another tenant's import is not found.
    let (status, error) = app.get(&format!("/api/import/{id}/errors"), &admin("globex")).await;
    assert_error(status, &error, StatusCode::NOT_FOUND, "not_found");
    app.assert_invalid_queries(
        &format!("/api/import/{id}/errors"),
        &admin("acme"),
        &["?limit=0", "?limit=1001", "?cursor=x"],
    )
    .await;

    let printed = engram(&app.db, &["import-errors", "--tenant", "acme", id]).await;
    let printed: Value =
        printed.lines().map(|line| serde_json::from_str::<Value>(line).expect("a JSON report")).collect();
    let printed: Vec<(u64, String)> =
        line_codes(&printed).into_iter().map(|(line, code)| (line, code.to_owned())).collect();
    assert_eq!(printed, expected);
}

/// A year before 1 is refused on both backends, where SQLite stored it as text and
/// PostgreSQL as a year BC: in an import line, a fact's times and `as_of`.
async fn negative_years_are_refused_alike(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for time in ["-0001-01-01T00:00:00Z", "0000-06-01T00:00:00Z"] {
        let mut line = fact("f-1", "Sails at dawn", time);
        line["created_at"] = json!("2024-01-01T00:00:00Z");
        let (status, job) =
            import(&app, &admin("acme"), ndjson(&[line, conversation("t", json!({"created_at": time}))])).await;
        assert_eq!(status, StatusCode::OK, "{job}");
        let codes: Vec<&str> =
            job["errors"].as_array().into_iter().flatten().filter_map(|e| e["code"].as_str()).collect();
        assert_eq!((job["added"].clone(), codes), (json!(0), vec!["invalid_record"; 2]), "{time}: {job}");
        let (status, error) =
            app.post(FACTS, &agent("acme"), json!({"fact": "Sails at dawn", "observed_at": time})).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
        let (status, error) = app.get(&format!("{FACTS}?as_of={time}"), &agent("acme")).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    }
    assert!(fact_texts(&app).await.is_empty());
    let (_, listed) = app.get("/api/conversations", &agent("acme")).await;
    assert_eq!(listed["items"], json!([]), "{listed}");
}

/// `engram import` killed (SIGKILL) leaves its row `running`; once it has been silent
/// longer than `ENGRAM_IMPORT_STALE_SECS`, the next start of `engram import` marks it
/// `interrupted`, while a live import's heartbeat keeps it `running`.
async fn a_killed_import_is_marked_interrupted_at_the_next_start(backend: Backend) {
    let db = TestDb::fresh(backend).await;
    let file = db.data_dir.join("many.ndjson");
    let lines: Vec<Value> =
        (0..LARGE).map(|i| fact(&format!("n{i}"), &format!("Noted item {i}"), "2024-01-01T00:00:00Z")).collect();
    std::fs::write(&file, ndjson(&lines)).expect("write");
    engram(&db, &["migrate"]).await;
    let path = file.display().to_string();
    let mut child = cli(&db, &["import", "--tenant", "acme", "--import-stale-secs", "2", &path])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    while count(&db, "SELECT count(*) FROM facts").await < 1000 {
        assert!(std::time::Instant::now() < deadline, "the import commits a batch");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Alive for longer than the stale time, a running import is still running.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let statuses = |db: TestDb| async move {
        let rows: Vec<(String,)> = db.rows("SELECT status FROM imports ORDER BY id").await;
        rows.into_iter().map(|(status,)| status).collect::<Vec<_>>()
    };
    let small = db.data_dir.join("small.ndjson");
    std::fs::write(&small, ndjson(&[fact("s", "Sails at dawn", "2024-01-01T00:00:00Z")])).expect("write");
    let small = small.display().to_string();
    if child.try_wait().expect("wait").is_none() {
        engram(&db, &["import", "--tenant", "acme", "--import-stale-secs", "2", &small]).await;
        assert_eq!(statuses(db.clone()).await.first().map(String::as_str), Some("running"), "alive: not interrupted");
    }
    child.start_kill().expect("kill");
    assert!(!child.wait().await.expect("wait").success(), "killed, not finished");
    tokio::time::sleep(Duration::from_secs(3)).await;
    engram(&db, &["import", "--tenant", "acme", "--import-stale-secs", "2", &small]).await;
    let statuses = statuses(db.clone()).await;
    assert_eq!(statuses.first().map(String::as_str), Some("interrupted"), "{statuses:?}");
    assert!(!statuses.contains(&"running".to_owned()), "{statuses:?}");
    let app = TestApp::start(db, Vec::new()).await;
    let (_, imports) = app.get("/api/import", &admin("acme")).await;
    let killed = imports.as_array().and_then(|list| list.last()).expect("the killed import");
    assert_eq!(killed["status"], "interrupted", "{imports}");
    assert!(killed["finished_at"].is_string(), "{killed}");
}
