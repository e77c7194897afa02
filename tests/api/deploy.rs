//! The deploy files as an operator gets them: the Dockerfile, the compose file and every
//! Kubernetes manifest are parsed and held to what the service needs (probes, resources,
//! non-root, shutdown grace, required secrets); and `engram healthcheck`, the image's
//! HEALTHCHECK, is run against a live server, a failing one and a closed port.

use std::{path::PathBuf, process::Output, time::Duration};

use crate::common::*;
use clap::{Args, Command};
use engram::config::ServeConfig;
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::path};
use yaml_rust2::{Yaml, YamlLoader};

fn repo_file(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(repo_file(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

#[track_caller]
fn yaml(relative: &str) -> Vec<Yaml> {
    YamlLoader::load_from_str(&read(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The settings of `engram serve` (a superset of every other command's), as clap declares them.
fn serve_settings() -> Command {
    ServeConfig::augment_args(Command::new("serve"))
}

/// `ENGRAM_SHUTDOWN_GRACE_SECS`'s default, read from the settings themselves.
fn default_shutdown_grace_secs() -> i64 {
    let serve = serve_settings();
    let arg = serve
        .get_arguments()
        .find(|arg| arg.get_env().is_some_and(|env| env == "ENGRAM_SHUTDOWN_GRACE_SECS"))
        .expect("the setting exists");
    let default = arg.get_default_values().first().and_then(|v| v.to_str()).expect("a default");
    default.parse().expect("a number")
}

/// The Dockerfile's instructions: continuation lines joined, comments dropped.
fn dockerfile_instructions() -> Vec<(String, String)> {
    let text = read("Dockerfile");
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with('#') && !l.is_empty()) {
        current.push_str(line.trim_end_matches('\\'));
        current.push(' ');
        if !line.ends_with('\\') {
            let (keyword, rest) = current.trim().split_once(' ').unwrap_or((current.trim(), ""));
            instructions.push((keyword.to_uppercase(), rest.trim().to_owned()));
            current.clear();
        }
    }
    instructions
}

/// The words of a shell or exec-form command: `CMD ["engram", "healthcheck"]` and
/// `CMD engram healthcheck` both give `engram`, `healthcheck`.
fn words(command: &str) -> Vec<String> {
    command
        .split(|c: char| c.is_whitespace() || "[],\"".contains(c))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

fn runs_engram_healthcheck(command: &[String]) -> bool {
    command.windows(2).any(|w| w[0].ends_with("engram") && w[1] == "healthcheck")
}

#[test]
fn dockerfile_builds_dependencies_first_checks_health_and_runs_as_non_root() {
    let instructions = dockerfile_instructions();
    let last_from = instructions.iter().rposition(|(k, _)| k == "FROM").expect("a FROM");
    let (build, runtime) = instructions.split_at(last_from);

    // Dependencies in their own layer: a cargo build from the manifests alone, before
    // the sources are copied, so a source edit reuses it.
    let first_build = build.iter().position(|(k, v)| k == "RUN" && v.contains("cargo build"));
    let sources = build.iter().position(|(k, v)| k == "COPY" && v.split_whitespace().any(|w| w == "src"));
    let manifests = build.iter().position(|(k, v)| k == "COPY" && v.contains("Cargo.lock"));
    assert!(
        matches!((manifests, first_build, sources), (Some(m), Some(b), Some(s)) if m < b && b < s),
        "no dependency layer: manifests {manifests:?}, first cargo build {first_build:?}, sources {sources:?}"
    );

    let healthcheck = runtime.iter().find(|(k, _)| k == "HEALTHCHECK").expect("a HEALTHCHECK in the image");
    let command = healthcheck.1.split_once("CMD").map(|(_, c)| words(c)).unwrap_or_default();
    assert!(runs_engram_healthcheck(&command), "HEALTHCHECK runs {command:?}");
    for (keyword, value) in &instructions {
        let used = words(value);
        assert!(!used.iter().any(|w| w == "curl" || w == "wget"), "{keyword} {value}: the image needs no curl");
    }

    let user = runtime.iter().rev().find(|(k, _)| k == "USER").map(|(_, v)| v.as_str()).expect("a USER");
    let uid: u32 = user
        .split(':')
        .next()
        .and_then(|u| u.parse().ok())
        .unwrap_or_else(|| panic!("USER {user} is not numeric: Kubernetes' runAsNonRoot cannot verify a name"));
    assert_ne!(uid, 0, "the image runs as root");
    let entrypoint = runtime.iter().rposition(|(k, _)| k == "ENTRYPOINT" || k == "CMD").expect("an entrypoint");
    let user_at = runtime.iter().rposition(|(k, _)| k == "USER").expect("a USER");
    assert!(user_at < entrypoint, "USER comes after the entrypoint");
}

/// Compose fills `${VAR:-}` with an empty string, which Engram refuses or ignores; a
/// required setting must be `${VAR:?message}` so compose itself stops without it.
#[test]
fn compose_requires_the_secrets_checks_health_and_waits_for_jobs() {
    let docs = yaml("deploy/docker-compose.yml");
    let engram = &docs[0]["services"]["engram"];
    let environment = engram["environment"].as_hash().expect("environment as a map");
    for required in ["ENGRAM_JWT_SECRET", "ENGRAM_RECEIPT_KEY"] {
        let value = environment.get(&Yaml::String(required.into())).and_then(Yaml::as_str).unwrap_or_default();
        let expected = format!("${{{required}:?");
        assert!(value.starts_with(&expected) && value.ends_with('}'), "{required}: {value:?} is not required");
    }
    for (service, definition) in docs[0]["services"].as_hash().expect("services") {
        let Some(environment) = definition["environment"].as_hash() else { continue };
        for (name, value) in environment {
            let value = value.as_str().unwrap_or_default();
            assert!(!value.contains(":-}") && !value.contains("-}"), "{service:?} {name:?}: empty default {value:?}");
        }
    }

    let test: Vec<String> = engram["healthcheck"]["test"]
        .as_vec()
        .expect("a healthcheck")
        .iter()
        .filter_map(Yaml::as_str)
        .map(str::to_owned)
        .collect();
    assert!(runs_engram_healthcheck(&test), "compose healthcheck runs {test:?}");

    let grace = engram["stop_grace_period"].as_str().and_then(|g| g.strip_suffix('s')).and_then(|g| g.parse().ok());
    assert!(
        grace.is_some_and(|g: i64| g > default_shutdown_grace_secs()),
        "stop_grace_period {grace:?} must exceed ENGRAM_SHUTDOWN_GRACE_SECS"
    );
}

/// A deploy file that sets a variable no setting reads (a typo, a renamed setting) fails
/// silently at run time: each one must be a setting's. And a secret (a setting whose value
/// `--help` hides, or a password) must never be written into the file: a compose value is
/// passed through, or required (`${VAR:?…}`, whole or as the credential of a URL).
#[test]
fn deploy_files_set_only_real_settings_and_no_secret_values() {
    let settings: Vec<(String, bool)> = serve_settings()
        .get_arguments()
        .filter_map(|arg| Some((arg.get_env()?.to_str()?.to_owned(), arg.is_hide_env_values_set())))
        .collect();
    let setting = |name: &str| settings.iter().find(|(env, _)| env == name).map(|(_, secret)| *secret);
    let is_secret_name = |name: &str| ["PASSWORD", "SECRET", "KEY"].iter().any(|word| name.contains(word));

    let docs = yaml("deploy/docker-compose.yml");
    for (service, definition) in docs[0]["services"].as_hash().expect("services") {
        let runs_engram = !definition["build"].is_badvalue();
        for (name, value) in definition["environment"].as_hash().into_iter().flatten() {
            let name = name.as_str().expect("a variable name");
            let secret = if runs_engram {
                setting(name).unwrap_or_else(|| panic!("compose {service:?} sets {name}, which no setting reads"))
            } else {
                false
            };
            let Some(value) = value.as_str() else { continue };
            if secret || is_secret_name(name) {
                assert!(
                    value.contains(":?") && !value.contains(":-"),
                    "compose {service:?} {name}: a secret written in the file ({value:?}), not required"
                );
            }
        }
    }

    let mut manifests = 0;
    for (pod, template) in pod_templates() {
        for container in template["containers"].as_vec().expect("containers") {
            for var in container["env"].as_vec().into_iter().flatten() {
                let name = var["name"].as_str().expect("a variable name");
                let secret = setting(name).unwrap_or_else(|| panic!("{pod} sets {name}, which no setting reads"));
                if secret || is_secret_name(name) {
                    assert!(var["value"].is_badvalue(), "{pod} {name}: a secret written in the manifest");
                }
                manifests += 1;
            }
        }
    }
    assert!(manifests > 0, "no variables found in the manifests");

    for (keyword, value) in dockerfile_instructions() {
        if keyword == "ENV" {
            for name in value.split_whitespace().filter_map(|pair| pair.split_once('=')).map(|(name, _)| name) {
                assert!(setting(name).is_some(), "the Dockerfile sets {name}, which no setting reads");
            }
        }
    }
}

/// Every Kubernetes manifest: each document with a pod template.
fn pod_templates() -> Vec<(String, Yaml)> {
    let dir = repo_file("deploy/kubernetes");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("deploy/kubernetes")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in {}", dir.display());
    let mut templates = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("manifest");
        for doc in YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display())) {
            let spec = &doc["spec"]["template"]["spec"];
            if !spec.is_badvalue() {
                let name = format!(
                    "{} {}",
                    doc["kind"].as_str().unwrap_or("?"),
                    doc["metadata"]["name"].as_str().unwrap_or("?")
                );
                templates.push((name, spec.clone()));
            }
        }
    }
    templates
}

/// The environment variable `name` of `container`, if declared.
fn env_var<'a>(container: &'a Yaml, name: &str) -> Option<&'a Yaml> {
    container["env"].as_vec()?.iter().find(|var| var["name"].as_str() == Some(name))
}

#[test]
fn kubernetes_pods_are_non_root_bounded_and_get_their_secrets() {
    let templates = pod_templates();
    assert!(templates.iter().any(|(name, _)| name.starts_with("Deployment")), "no Deployment");
    for (name, pod) in &templates {
        for container in pod["containers"].as_vec().unwrap_or_else(|| panic!("{name}: containers")) {
            let security = &container["securityContext"];
            let non_root = security["runAsNonRoot"].as_bool().or(pod["securityContext"]["runAsNonRoot"].as_bool());
            assert_eq!(non_root, Some(true), "{name}: runAsNonRoot");
            assert_eq!(security["allowPrivilegeEscalation"].as_bool(), Some(false), "{name}: privilege escalation");
            assert_eq!(security["readOnlyRootFilesystem"].as_bool(), Some(true), "{name}: writable root fs");
            let resources = &container["resources"];
            for (kind, key) in [("requests", "cpu"), ("requests", "memory"), ("limits", "memory")] {
                assert!(resources[kind][key].as_str().is_some(), "{name}: no resources.{kind}.{key}");
            }
            for var in container["env"].as_vec().into_iter().flatten() {
                assert_ne!(var["value"].as_str(), Some(""), "{name}: {:?} is empty", var["name"]);
            }
            let args: Vec<&str> = container["args"].as_vec().into_iter().flatten().filter_map(Yaml::as_str).collect();
            let mut required = vec!["DATABASE_URL"];
            if args.contains(&"serve") {
                required.extend(["ENGRAM_JWT_SECRET", "ENGRAM_RECEIPT_KEY"]);
            }
            for variable in required {
                let reference = &env_var(container, variable)
                    .unwrap_or_else(|| panic!("{name}: {variable} is not set"))["valueFrom"]["secretKeyRef"];
                assert!(reference["name"].as_str().is_some(), "{name}: {variable} does not come from a Secret");
                assert_ne!(reference["optional"].as_bool(), Some(true), "{name}: {variable} is optional");
            }
        }
    }
}

#[test]
fn kubernetes_servers_are_probed_and_outlive_the_shutdown_grace() {
    for (name, pod) in pod_templates() {
        for container in pod["containers"].as_vec().expect("containers") {
            if !container["args"].as_vec().into_iter().flatten().any(|a| a.as_str() == Some("serve")) {
                continue;
            }
            let port = container["ports"][0]["containerPort"].as_i64();
            for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
                let get = &container[probe]["httpGet"];
                assert_eq!(get["path"].as_str(), Some(path), "{name}: {probe}");
                assert_eq!(get["port"].as_i64(), port, "{name}: {probe} port");
            }
            let grace = env_var(container, "ENGRAM_SHUTDOWN_GRACE_SECS")
                .and_then(|var| var["value"].as_str()?.parse().ok())
                .unwrap_or_else(default_shutdown_grace_secs);
            let termination = pod["terminationGracePeriodSeconds"].as_i64().unwrap_or(30);
            assert!(
                termination > grace,
                "{name}: terminationGracePeriodSeconds {termination} must exceed ENGRAM_SHUTDOWN_GRACE_SECS {grace}"
            );
        }
    }
}

async fn healthcheck(bind: &str) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_engram"))
        .args(["healthcheck", "--timeout-secs", "2"])
        .env_clear()
        .env("ENGRAM_BIND", bind)
        .output()
        .await
        .expect("engram healthcheck runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthcheck_passes_on_a_ready_server_from_its_bind_address() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let port = app.base.rsplit(':').next().expect("port");
    // The image binds 0.0.0.0: the probe goes to loopback on the same port.
    for bind in [format!("0.0.0.0:{port}"), format!("127.0.0.1:{port}")] {
        let output = healthcheck(&bind).await;
        assert_eq!(output.status.code(), Some(0), "{bind}: {}", String::from_utf8_lossy(&output.stderr));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthcheck_fails_on_a_closed_port_and_on_a_server_not_ready() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr");
    let output = healthcheck(&closed.to_string()).await;
    assert_eq!(output.status.code(), Some(1), "closed port");

    let not_ready = MockServer::start().await;
    Mock::given(path("/readyz")).respond_with(ResponseTemplate::new(503)).mount(&not_ready).await;
    let output = healthcheck(&not_ready.address().to_string()).await;
    assert_eq!(output.status.code(), Some(1), "503 counts as unhealthy");
    assert!(String::from_utf8_lossy(&output.stderr).contains("503"));

    let silent = MockServer::start().await;
    Mock::given(path("/readyz"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(10)))
        .mount(&silent)
        .await;
    let started = std::time::Instant::now();
    let output = healthcheck(&silent.address().to_string()).await;
    assert_eq!(output.status.code(), Some(1), "a silent server counts as unhealthy");
    assert!(started.elapsed() < Duration::from_secs(8), "the timeout was not applied");
}
