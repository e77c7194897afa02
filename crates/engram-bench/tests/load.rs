//! `engram-bench load` end to end with tiny settings, on SQLite and on PostgreSQL: it
//! starts the `engram` binary, seeds, drives every operation through the API and
//! directly, twice (`--runs 2`), and reports each with requests, without errors, and
//! with the server's overhead.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// The PostgreSQL server the suite runs on (scripts/test starts a throwaway one).
fn postgres_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .or_else(|_| std::env::var("DATABASE_URL"))
        .ok()
        .filter(|u| u.starts_with("postgres"))
        .expect("PostgreSQL tests need TEST_DATABASE_URL (scripts/test starts a throwaway server)")
}

/// The server binary `load` starts. It belongs to another package of the workspace, so
/// cargo gives no path to it: it is the `engram` beside this test's own directory, which
/// `cargo test --workspace` builds for the server's tests (or `ENGRAM_BIN`).
fn engram_binary() -> PathBuf {
    let path = std::env::var_os("ENGRAM_BIN").map(PathBuf::from).unwrap_or_else(|| {
        let test = std::env::current_exe().expect("the test's own path");
        test.parent().and_then(|deps| deps.parent()).expect("target/<profile>/deps").join("engram")
    });
    assert!(path.is_file(), "no server at {}: build it with `cargo build --bin engram`", path.display());
    path
}

const OPERATIONS: usize = 8;

/// Runs the load command on a backend (`None`: SQLite) and returns its JSON report.
fn load(database: Option<String>) -> Value {
    let dir = std::env::temp_dir().join(format!("engram-load-test-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let report = dir.join("load.json");
    let mut command = Command::new(env!("CARGO_BIN_EXE_engram-bench"));
    command.args(["load", "--seconds", "0.3", "--concurrency", "2", "--users", "3", "--facts-per-user", "5"]);
    command.args(["--messages", "25", "--pool", "10", "--runs", "2", "--engram"]).arg(engram_binary());
    command.arg("--json").arg(&report);
    if let Some(url) = database {
        command.args(["--database-url", &url]);
    }
    let output = command.output().expect("engram-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "load failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    for label in
        ["append one message", "read the last 20 messages", "memory context, no query", "erase a user", "ovh µs"]
    {
        assert!(stdout.contains(label), "{label} missing from:\n{stdout}");
    }
    let json: Value = serde_json::from_slice(&std::fs::read(&report).expect("the JSON report")).expect("JSON");
    let _ = std::fs::remove_dir_all(&dir);
    json
}

#[test]
fn load_runs_every_operation_on_both_backends() {
    let postgres = std::thread::spawn(|| load(Some(postgres_url())));
    for (backend, report) in [("sqlite", load(None)), ("postgres", postgres.join().expect("no panic"))] {
        assert_eq!(report["backend"], backend);
        assert_eq!(report["runs"], 2);
        assert!(report["http_floor"]["requests"].as_u64().is_some_and(|n| n > 0), "{report}");
        assert_eq!(report["http_floor"]["errors"], 0, "{report}");
        let rows = report["rows"].as_array().expect("rows");
        assert_eq!(rows.len(), OPERATIONS, "{report}");
        for row in rows {
            for side in ["engram", "baseline"] {
                assert!(row[side]["requests"].as_u64().is_some_and(|n| n > 0), "{side} sent nothing: {row}");
                assert_eq!(row[side]["errors"], 0, "{side} failed: {row}");
            }
            assert!(row["ratio"].as_f64().is_some_and(|r| r > 0.0), "{row}");
            // Each run ends and erases pool users of its own (a user erased twice would be
            // an error): at most the pool per run, fewer when the time ran out first (a
            // busy machine).
            if row["operation"] == "erase a user" {
                assert!(row["engram"]["requests"].as_u64().is_some_and(|n| n <= 20), "{row}");
            }
            // The server's CPU is known (this bench started it), so its overhead is too:
            // a number (it may be below zero on a tiny, noisy run, never missing).
            assert!(row["overhead_us_per_request"].as_f64().is_some(), "{row}");
            // The server's peak RSS, read from /proc: some MiB, not zero.
            assert!(row["engram_peak_rss_kib"].as_u64().is_some_and(|kib| kib > 1024), "{row}");
        }
    }
}
