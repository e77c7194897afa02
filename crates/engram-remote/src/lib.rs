//! What every call Engram makes to another server shares (LLM providers, embedding
//! servers, the package index the model comes from, webhook receivers): failures told by
//! their kind only, secrets kept out of `Debug` output, the wait a server asks for,
//! capped, and which addresses a tenant's webhook may reach.
//!
//! Nothing here echoes a URL or a body: reqwest's own messages include the URL, which may
//! carry credentials, and these messages end up in job errors and logs.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    time::Duration,
};

use reqwest::{
    dns::{Addrs, Name, Resolve, Resolving},
    header::{HeaderMap, HeaderValue, RETRY_AFTER},
};

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

/// Whether an address is on the public internet: not loopback, private (RFC 1918, unique
/// local), link-local (where cloud metadata services answer, 169.254.169.254), shared
/// (CGNAT), unspecified, multicast, broadcast, documentation or benchmarking ranges, nor an
/// IPv4 address written as IPv6 (mapped, or embedded by NAT64, 6to4 or Teredo) that is
/// not public itself, nor NAT64's local-use prefix. Webhooks go only to such addresses unless
/// `ENGRAM_WEBHOOK_ALLOW_PRIVATE` is set, so a tenant cannot make Engram call the
/// infrastructure it runs in.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped().or_else(|| embedded_ipv4(v6)) {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            // NAT64's local-use prefix (`64:ff9b:1::/48`) embeds its IPv4 address where the
            // local translator's prefix length says: not globally reachable, so refused whole.
            !(v6.is_loopback()
                || v6.segments()[..3] == [0x64, 0xff9b, 1]
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || (first == 0x2001 && v6.segments()[1] == 0x0db8)
                || v6.segments()[..6] == [0, 0, 0, 0, 0, 0])
        }
    }
}

/// The IPv4 address a translation or tunnel prefix carries, which is where a packet to
/// the IPv6 address ends up: NAT64's well-known prefix (`64:ff9b::/96`, in the last 32
/// bits), 6to4 (`2002::/16`, in the 32 bits after the prefix) and Teredo (`2001::/32`, the
/// client's address in the last 32 bits, inverted).
fn embedded_ipv4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let last = (u32::from(s[6]) << 16) | u32::from(s[7]);
    match s {
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(Ipv4Addr::from(last)),
        [0x2002, high, low, ..] => Some(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low))),
        [0x2001, 0, ..] => Some(Ipv4Addr::from(!last)),
        _ => None,
    }
}

/// Why a destination is refused, said without the URL.
pub const NOT_PUBLIC: &str = "the address is loopback, private, link-local or otherwise not public";

/// A DNS resolver that answers only public addresses (see [`is_public`]): the check is on
/// the address the connection will use, so a name that resolves to a private address —
/// at creation or only later (DNS rebinding) — is never connected to.
#[derive(Debug, Clone, Copy)]
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let public: Vec<SocketAddr> = found.filter(|addr| is_public(addr.ip())).collect();
            if public.is_empty() {
                return Err(NOT_PUBLIC.into());
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// Checks a destination before it is stored: an address written in the URL must be
/// public, and a name must resolve (within `timeout`) to public addresses only.
pub async fn check_public(url: &reqwest::Url, timeout: Duration) -> Result<(), &'static str> {
    let Some(name) = url.host_str() else { return Err("the URL has no host") };
    match host_ip(url) {
        Some(ip) => is_public(ip).then_some(()).ok_or(NOT_PUBLIC),
        None => {
            let lookup = tokio::net::lookup_host((name, 0));
            let found = tokio::time::timeout(timeout, lookup)
                .await
                .map_err(|_| "the host name did not resolve in time")?
                .map_err(|_| "the host name does not resolve")?;
            let addrs: Vec<SocketAddr> = found.collect();
            if addrs.is_empty() || !addrs.iter().all(|addr| is_public(addr.ip())) {
                return Err(NOT_PUBLIC);
            }
            Ok(())
        }
    }
}

/// Whether a URL names its host by an address that is not public (reqwest does not ask
/// the resolver for an address written in the URL, so [`PublicOnly`] cannot refuse it).
pub fn literal_not_public(url: &reqwest::Url) -> bool {
    host_ip(url).is_some_and(|ip| !is_public(ip))
}

/// The address a URL names its host by, if it is written as one (`[…]` for IPv6).
fn host_ip(url: &reqwest::Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host).parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "2001:db8::1",
            "198.18.0.1",
            "240.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn nat64_addresses_are_judged_by_their_ipv4_address() {
        for private in ["64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::10.0.0.1", "64:ff9b::c0a8:101"] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        assert!(is_public("64:ff9b::808:808".parse().unwrap()));
        // The local-use prefix, whatever it embeds.
        for local in ["64:ff9b:1::c0a8:101", "64:ff9b:1:ab::5db8:d822", "64:ff9b:1::808:808"] {
            assert!(!is_public(local.parse().unwrap()), "{local}");
        }
    }

    #[test]
    fn sixtofour_addresses_are_judged_by_their_ipv4_address() {
        // 2002:AABB:CCDD::/48 carries AA.BB.CC.DD.
        for private in ["2002:7f00:1::1", "2002:a9fe:a9fe::", "2002:c0a8:0101:1::1", "2002:0a00:0001::"] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        assert!(is_public("2002:0808:0808::1".parse().unwrap()));
    }

    #[test]
    fn teredo_addresses_are_judged_by_their_client_address() {
        // The client's address is the last 32 bits inverted: !0x7f000001 = 0x80fffffe.
        for private in ["2001:0:4136:e378:8000:63bf:80ff:fffe", "2001::f5ff:fffe", "2001::5601:5656"] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        // 8.8.8.8 inverted.
        assert!(is_public("2001:0:4136:e378:8000:63bf:f7f7:f7f7".parse().unwrap()));
    }

    #[tokio::test]
    async fn destinations_are_checked_by_their_resolved_address() {
        let check = |url: &str| {
            let url = reqwest::Url::parse(url).unwrap();
            async move { check_public(&url, Duration::from_secs(2)).await }
        };
        assert_eq!(check("http://169.254.169.254/latest/meta-data").await, Err(NOT_PUBLIC));
        assert_eq!(check("http://127.0.0.1:9000/hook").await, Err(NOT_PUBLIC));
        assert_eq!(check("http://[::1]/hook").await, Err(NOT_PUBLIC));
        assert_eq!(check("http://localhost/hook").await, Err(NOT_PUBLIC), "a name is judged by its address");
        assert_eq!(check("http://8.8.8.8/hook").await, Ok(()));
        assert!(literal_not_public(&reqwest::Url::parse("http://10.0.0.1/").unwrap()));
        assert!(!literal_not_public(&reqwest::Url::parse("http://example.com/").unwrap()));
        let resolved = PublicOnly.resolve("localhost".parse().unwrap()).await;
        assert!(resolved.is_err(), "the resolver answers no private address");
    }

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
