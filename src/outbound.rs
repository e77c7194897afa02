//! What every call Engram makes to another server shares (LLM providers, embedding
//! servers, the package index the model comes from): failures told by their kind only,
//! secrets kept out of `Debug` output, and the wait a server asks for, capped.
//!
//! Nothing here echoes a URL or a body: reqwest's own messages include the URL, which may
//! carry credentials, and these messages end up in job errors and logs.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};

/// Longest wait honoured from a `Retry-After` header, so that a confused or hostile server
/// cannot park work for days.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// A transport failure by kind.
#[derive(Debug, PartialEq, Eq)]
pub struct Failure {
    /// Retrying cannot help: the request cannot be built (a bad base URL) or redirects loop.
    pub fatal: bool,
    pub reason: &'static str,
}

/// Classifies a transport failure without its message.
pub fn failure(error: &reqwest::Error) -> Failure {
    let (fatal, reason) = if error.is_builder() {
        (true, "could not build the request (check the base URL)")
    } else if error.is_timeout() {
        (false, "request timed out")
    } else if error.is_connect() {
        (false, "could not connect to the server")
    } else if error.is_redirect() {
        (true, "too many redirects")
    } else if error.is_body() || error.is_decode() {
        (false, "connection failed while reading the response")
    } else {
        (false, "request failed")
    };
    Failure { fatal, reason }
}

/// A header value for a secret (an API key), marked sensitive so that no `Debug` output of
/// the request shows it; `None` when it is not a valid header value.
pub fn secret_header(value: &str) -> Option<HeaderValue> {
    let mut header = HeaderValue::from_str(value).ok()?;
    header.set_sensitive(true);
    Some(header)
}

/// `Retry-After` as a number of seconds, capped at [`MAX_RETRY_AFTER`]. The HTTP-date form
/// is not read: providers send seconds, and the caller's own backoff covers a missing value.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers.get(RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_caps_them() {
        let with = |v: &'static str| HeaderMap::from_iter([(RETRY_AFTER, HeaderValue::from_static(v))]);
        assert_eq!(retry_after(&with("7")), Some(Duration::from_secs(7)));
        assert_eq!(retry_after(&with(" 0 ")), Some(Duration::ZERO));
        assert_eq!(retry_after(&with("999999")), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after(&with("Wed, 21 Oct 2026 07:28:00 GMT")), None);
        assert_eq!(retry_after(&with("-3")), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn secret_headers_are_sensitive_and_reject_invalid_values() {
        let header = secret_header("sk-secret").expect("valid key");
        assert!(header.is_sensitive());
        assert!(!format!("{header:?}").contains("sk-secret"));
        assert!(secret_header("sk-secret\n").is_none());
    }

    #[tokio::test]
    async fn a_bad_base_url_is_fatal_and_an_unreachable_server_is_not() {
        let client = reqwest::Client::new();
        let bad = client.get("http://exa mple.invalid/").send().await.expect_err("cannot build");
        assert_eq!(failure(&bad), Failure { fatal: true, reason: "could not build the request (check the base URL)" });
        // A port nothing listens on: refused at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let refused = client.get(format!("http://127.0.0.1:{port}/")).send().await.expect_err("refused");
        assert_eq!(failure(&refused), Failure { fatal: false, reason: "could not connect to the server" });
    }
}
