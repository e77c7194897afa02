//! Small wrappers over aws-lc-rs (already the TLS and JWT provider): randomness, hashes
//! and keyed hashes, and files that hold secrets.

use std::{
    io::{ErrorKind, Write},
    path::Path,
};

use aws_lc_rs::{digest, hmac, rand::SecureRandom};

/// `n` random bytes as lowercase hex.
pub fn random_hex(n: usize) -> String {
    hex(&random_bytes(n))
}

/// A random number in `0..bound` (for jitter; not for secrets).
pub fn random_below(bound: u64) -> u64 {
    let mut bytes = [0u8; 8];
    if aws_lc_rs::rand::SystemRandom::new().fill(&mut bytes).is_err() || bound == 0 {
        return 0;
    }
    u64::from_le_bytes(bytes) % bound
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

pub fn hmac_sha256_hex(key: &[u8], data: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    hex(hmac::sign(&key, data).as_ref())
}

/// HMAC-SHA256 of `data` under `key`, raw.
pub fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    hmac::sign(&key, data).as_ref().to_vec()
}

/// `n` random bytes (for secrets).
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; n];
    // The system RNG failing is not something a service can recover from.
    #[allow(clippy::expect_used)]
    aws_lc_rs::rand::SystemRandom::new().fill(&mut bytes).expect("system random generator failed");
    bytes
}

/// Lower-case hexadecimal, as hashes are written and pinned.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a secret kept in the data directory (the development JWT secret, the receipt
/// key), creating it on first use.
///
/// A file shorter than `min_len` is refused, not regenerated: it can only come from a
/// write interrupted before writes were atomic, or from someone else, and a new secret
/// would silently void every token or receipt issued with the old one. The message says
/// to delete the file, which makes that choice the operator's.
pub fn load_or_create_secret(path: &Path, min_len: usize) -> anyhow::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(contents) => return checked_secret(path, &contents, min_len),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    }
    // Hex doubles the length, so `min_len` random bytes always pass the check.
    let secret = random_hex(min_len.max(32));
    match create_private_file_atomically(path, secret.as_bytes()) {
        Ok(()) => Ok(secret),
        // Another process created it first: use theirs, which is complete (atomic).
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            let contents =
                std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            checked_secret(path, &contents, min_len)
        }
        Err(e) => Err(anyhow::anyhow!("cannot create {}: {e}", path.display())),
    }
}

fn checked_secret(path: &Path, contents: &str, min_len: usize) -> anyhow::Result<String> {
    let secret = contents.trim();
    anyhow::ensure!(
        secret.len() >= min_len,
        "{} holds {} bytes, fewer than the {min_len} a secret needs, so it is not used; delete it to \
         generate a new one (tokens or receipts made with the old one will no longer match)",
        path.display(),
        secret.len()
    );
    Ok(secret.to_owned())
}

/// Creates `path` (mode 0600) holding `contents`, all or nothing: the bytes go to a temp
/// file in the same directory, are synced, and the temp file is then hard-linked to its
/// name. Unlike `rename`, a link never replaces an existing file, so two processes
/// creating the same secret agree on one (the loser gets `AlreadyExists`); a crash leaves
/// either no file or a complete one, never an empty one, plus at worst a stray temp file.
fn create_private_file_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.tmp", random_hex(8)));
    let linked = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::hard_link(&temp, path)
    })();
    let _ = std::fs::remove_file(&temp);
    linked?;
    // The new name is durable only once its directory is synced.
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn temp_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("engram-crypto-{}", random_hex(8)));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn a_new_secret_is_long_private_kept_and_leaves_no_temp_file() {
        let dir = temp_dir();
        let path = dir.join("receipt-key");
        let secret = load_or_create_secret(&path, 32).expect("created");
        assert_eq!(secret.len(), 64);
        assert_eq!(load_or_create_secret(&path, 32).expect("read back"), secret);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("metadata").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let names: Vec<_> = std::fs::read_dir(&dir).expect("dir").map(|e| e.expect("entry").file_name()).collect();
        assert_eq!(names, ["receipt-key"]);
    }

    /// An empty file is what a crash between create and write left before writes were
    /// atomic; a short one is not ours. Either would sign with a guessable key.
    #[test]
    fn an_empty_or_short_secret_file_is_refused_and_left_alone() {
        let dir = temp_dir();
        for contents in ["", "\n", "0123456789abcdef0123456789abcde\n"] {
            let path = dir.join("jwt-secret");
            std::fs::write(&path, contents).expect("write");
            let error = load_or_create_secret(&path, 32).expect_err("short file refused").to_string();
            assert!(error.contains("jwt-secret") && error.contains("delete it"), "{error}");
            assert_eq!(std::fs::read_to_string(&path).expect("still there"), contents, "the file was replaced");
        }
    }

    /// Many processes starting at once on one data directory end up with one secret.
    #[test]
    fn concurrent_creators_agree_on_one_secret() {
        let path = temp_dir().join("jwt-secret");
        let secrets: Vec<String> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8).map(|_| scope.spawn(|| load_or_create_secret(&path, 32))).collect();
            handles.into_iter().map(|h| h.join().expect("thread").expect("secret")).collect()
        });
        let on_disk = std::fs::read_to_string(&path).expect("file");
        assert!(secrets.iter().all(|s| *s == on_disk), "{secrets:?} vs {on_disk}");
    }
}
