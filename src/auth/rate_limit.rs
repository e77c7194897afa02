//! Per-tenant request rate limit: a token bucket per tenant, in this process (with N
//! replicas a tenant gets N times the rate). One noisy tenant cannot starve the others.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

pub struct RateLimiter {
    per_sec: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    refreshed: Instant,
}

impl RateLimiter {
    /// `None` when `per_sec` is 0 (no limit).
    pub fn new(per_sec: u32, burst: u32) -> Option<RateLimiter> {
        (per_sec > 0).then(|| RateLimiter {
            per_sec: f64::from(per_sec),
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        })
    }

    /// Takes one token from the tenant's bucket, or says how long until one is back.
    pub fn check(&self, tenant: &str) -> Result<(), Duration> {
        let now = Instant::now();
        // A poisoned lock only means another request panicked mid-update: the map is
        // still usable.
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let bucket = buckets.entry(tenant.to_owned()).or_insert(Bucket { tokens: self.burst, refreshed: now });
        let elapsed = now.duration_since(bucket.refreshed).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.per_sec).min(self.burst);
        bucket.refreshed = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / self.per_sec))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_the_burst_then_refuses_per_tenant() {
        let limiter = RateLimiter::new(1, 3).expect("a limit");
        for _ in 0..3 {
            assert!(limiter.check("acme").is_ok());
        }
        let wait = limiter.check("acme").expect_err("over the burst");
        assert!(wait > Duration::from_millis(900) && wait <= Duration::from_secs(1), "{wait:?}");
        assert!(limiter.check("globex").is_ok(), "tenants have their own bucket");
    }

    #[test]
    fn zero_rate_means_no_limiter() {
        assert!(RateLimiter::new(0, 10).is_none());
    }
}
