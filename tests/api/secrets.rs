//! Failing closed on secrets: empty or short secrets, empty settings and damaged secret
//! files stop `App::build` and the `engram` process with a message naming the variable or
//! file; development mode beyond loopback is said at error level.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use crate::common::*;
use clap::Parser;
use engram::{app::App, config::ServeConfig};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: ServeConfig,
}

/// Flags to replace (`None` drops the flag) and the variable the refusal must name.
type BuildCase<'a> = (&'a [(&'a str, Option<&'a str>)], &'a str);
/// A command's arguments, its environment, and the variable the refusal must name.
type ProcessCase<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);

const RECEIPT_KEY: &str = "receipt-key-receipt-key-receipt-key!";

/// `App::build`'s error for a fresh SQLite data directory with `overrides` replacing or
/// adding to a valid set of flags (`None` drops the flag).
async fn build_error(data_dir: &Path, overrides: &[(&str, Option<&str>)]) -> String {
    let url = format!("sqlite://{}/engram.db", data_dir.display());
    let data_dir = data_dir.display().to_string();
    let mut flags = vec![
        ("--database-url", Some(url.as_str())),
        ("--data-dir", Some(data_dir.as_str())),
        ("--bind", Some("127.0.0.1:0")),
        ("--jwt-secret", Some(SECRET)),
        ("--receipt-key", Some(RECEIPT_KEY)),
    ];
    for (flag, value) in overrides {
        flags.retain(|(f, _)| f != flag);
        flags.push((flag, *value));
    }
    let args = std::iter::once("engram".to_string())
        .chain(flags.iter().filter_map(|(flag, value)| value.map(|v| format!("{flag}={v}"))));
    let config = Args::try_parse_from(args).expect("flags parse").config;
    match App::build(config).await {
        Ok(_) => panic!("App::build accepted {overrides:?}"),
        Err(e) => format!("{e:#}"),
    }
}

fn fresh_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("engram-secrets-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).expect("data dir");
    dir
}

#[tokio::test]
async fn app_build_refuses_empty_or_short_secrets_and_empty_settings() {
    let cases: &[BuildCase] = &[
        (&[("--receipt-key", Some(""))], "ENGRAM_RECEIPT_KEY"),
        (&[("--receipt-key", Some("only-31-bytes-of-receipt-key-xx"))], "ENGRAM_RECEIPT_KEY"),
        (&[("--jwt-secret", Some(""))], "ENGRAM_JWT_SECRET"),
        (&[("--jwt-secret", Some("only-31-bytes-of-jwt-secret-xxx"))], "ENGRAM_JWT_SECRET"),
        (&[("--database-url", Some(""))], "DATABASE_URL"),
        (&[("--jwt-issuer", Some(""))], "ENGRAM_JWT_ISSUER"),
        (&[("--jwt-audience", Some(""))], "ENGRAM_JWT_AUDIENCE"),
        (&[("--llm-api-key", Some(""))], "ENGRAM_LLM_API_KEY"),
        // Empty means unset here, so the LLM extractor still lacks its model.
        (&[("--extractor", Some("openai")), ("--llm-model", Some(""))], "ENGRAM_LLM_MODEL"),
    ];
    for (overrides, variable) in cases {
        let dir = fresh_dir();
        let error = build_error(&dir, overrides).await;
        assert!(error.contains(variable), "{overrides:?}: {error}");
        assert!(!dir.join("engram.db").exists(), "{overrides:?}: the database was opened before the check");
    }
}

#[tokio::test]
async fn app_build_refuses_short_generated_secret_files() {
    for (file, drop_flag) in [("jwt-secret", "--jwt-secret"), ("receipt-key", "--receipt-key")] {
        for contents in ["", "0123456789abcdef\n"] {
            let dir = fresh_dir();
            std::fs::write(dir.join(file), contents).expect("damaged file");
            let error = build_error(&dir, &[(drop_flag, None)]).await;
            assert!(error.contains(file) && error.contains("delete it"), "{file} {contents:?}: {error}");
            assert_eq!(std::fs::read_to_string(dir.join(file)).expect("kept"), contents, "{file} was replaced");
        }
    }
}

/// `engram` with a clean environment plus `env`, in a fresh directory.
fn engram(args: &[&str], env: &[(&str, &str)]) -> Command {
    let dir = fresh_dir();
    let mut command = Command::new(env!("CARGO_BIN_EXE_engram"));
    command.args(args).env_clear().env("ENGRAM_DATA_DIR", &dir).current_dir(&dir).envs(env.iter().copied());
    command
}

#[test]
fn every_command_refuses_empty_or_short_secrets_by_name() {
    let cases: &[ProcessCase] = &[
        (&["serve"], &[("ENGRAM_RECEIPT_KEY", ""), ("ENGRAM_JWT_SECRET", SECRET)], "ENGRAM_RECEIPT_KEY"),
        (&["serve"], &[("ENGRAM_RECEIPT_KEY", "short"), ("ENGRAM_JWT_SECRET", SECRET)], "ENGRAM_RECEIPT_KEY"),
        (&["serve"], &[("ENGRAM_JWT_SECRET", "")], "ENGRAM_JWT_SECRET"),
        (&["token", "--tenant", "acme"], &[("ENGRAM_JWT_SECRET", "short")], "ENGRAM_JWT_SECRET"),
        // Without the rule, `migrate` would quietly migrate a SQLite file in the data dir.
        (&["migrate"], &[("DATABASE_URL", "")], "DATABASE_URL"),
    ];
    for (args, env, variable) in cases {
        let output = exit_within(engram(args, env).env("ENGRAM_BIND", "127.0.0.1:0"), Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains(variable), "{args:?} {env:?}: {stderr}");
        assert!(output.stdout.is_empty() || !String::from_utf8_lossy(&output.stdout).contains("listening"));
    }
}

/// The output of `command`, which must exit by itself within `limit` (a server that
/// accepted a bad setting would run forever: it is killed and the test fails).
fn exit_within(command: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("engram starts");
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("output");
            panic!("still running after {limit:?}: {}", String::from_utf8_lossy(&output.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// The level of the development-mode line `engram serve` logs when bound to `bind`.
fn development_mode_level(bind: &str) -> String {
    let mut child = engram(&["serve"], &[("ENGRAM_BIND", bind), ("ENGRAM_LOG_FORMAT", "json"), ("RUST_LOG", "info")])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("engram starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut level = None;
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(30)) {
        let log: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if log["message"].as_str().is_some_and(|m| m.contains("development mode")) {
            level = log["level"].as_str().map(str::to_owned);
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    level.expect("a development-mode line")
}

#[test]
fn development_mode_beyond_loopback_is_an_error_line() {
    assert_eq!(development_mode_level("0.0.0.0:0"), "ERROR");
    assert_eq!(development_mode_level("127.0.0.1:0"), "WARN");
}
