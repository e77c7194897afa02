//! Small wrappers over aws-lc-rs (already the TLS and JWT provider): randomness, hashes
//! and keyed hashes, and files that hold secrets.

use std::{io::Write, path::Path};

use aws_lc_rs::{digest, hmac, rand::SecureRandom};

/// `n` random bytes as lowercase hex.
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    // The system RNG failing is not something a service can recover from.
    #[allow(clippy::expect_used)]
    aws_lc_rs::rand::SystemRandom::new().fill(&mut bytes).expect("system random generator failed");
    hex(&bytes)
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a file readable by its owner only.
pub fn write_private_file(path: &Path, contents: &str) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}

/// Reads a secret kept in the data directory, creating it on first use.
pub fn load_or_create_secret(path: &Path) -> anyhow::Result<String> {
    if let Ok(secret) = std::fs::read_to_string(path) {
        return Ok(secret.trim().to_owned());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    let secret = random_hex(32);
    match write_private_file(path, &secret) {
        Ok(()) => Ok(secret),
        // Another process created it first: use theirs.
        Err(_) if path.exists() => Ok(std::fs::read_to_string(path)?.trim().to_owned()),
        Err(e) => Err(e),
    }
}
