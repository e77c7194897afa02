//! The reads waiting for a tenant's next event (long polls), by tenant: a commit wakes
//! the waiters of its own tenants only, and a tenant's waiters are counted, so that one
//! tenant cannot hold every descriptor of the process in waiting reads.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
};

use tokio::sync::Notify;

/// The tenants that have reads waiting, each with its signal and how many wait on it.
#[derive(Debug, Default)]
pub struct EventWaiters {
    tenants: Mutex<HashMap<String, Waiters>>,
    /// Reads waiting, of every tenant.
    total: AtomicUsize,
}

#[derive(Debug)]
struct Waiters {
    signal: Arc<Notify>,
    count: usize,
}

/// One waiting read, counted against its tenant until dropped.
#[derive(Debug)]
pub struct Waiting {
    waiters: Arc<EventWaiters>,
    tenant: String,
    signal: Arc<Notify>,
}

impl Waiting {
    /// Signalled after each commit of this process that wrote events of the tenant.
    pub fn signal(&self) -> &Notify {
        &self.signal
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.waiters.total.fetch_sub(1, Ordering::Relaxed);
        let mut tenants = self.waiters.tenants.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(waiters) = tenants.get_mut(&self.tenant) {
            waiters.count -= 1;
            if waiters.count == 0 {
                tenants.remove(&self.tenant);
            }
        }
    }
}

impl EventWaiters {
    /// Counts a read of `tenant` as waiting; `None` when `most` of its reads wait already.
    pub fn join(self: &Arc<Self>, tenant: &str, most: usize) -> Option<Waiting> {
        let mut tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
        let waiters = tenants.entry(tenant.to_owned()).or_insert_with(|| Waiters { signal: Arc::default(), count: 0 });
        if waiters.count >= most {
            return None;
        }
        waiters.count += 1;
        self.total.fetch_add(1, Ordering::Relaxed);
        let signal = waiters.signal.clone();
        Some(Waiting { waiters: self.clone(), tenant: tenant.to_owned(), signal })
    }

    /// How many reads wait now, of every tenant.
    pub fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// Wakes the reads of `tenant` waiting now.
    pub fn wake(&self, tenant: &str) {
        let signal = self.tenants.lock().unwrap_or_else(PoisonError::into_inner).get(tenant).map(|w| w.signal.clone());
        if let Some(signal) = signal {
            signal.notify_waiters();
        }
    }

    #[cfg(test)]
    fn tenants(&self) -> usize {
        self.tenants.lock().expect("lock").len()
    }
}

#[cfg(test)]
mod tests {
    use std::{future::Future, pin::pin, task::Poll};

    use super::*;

    /// Whether a `Notified` was signalled, without waiting for it.
    fn signalled(notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>) -> bool {
        let waker = std::task::Waker::noop();
        notified.poll(&mut std::task::Context::from_waker(waker)) == Poll::Ready(())
    }

    #[test]
    fn a_commit_wakes_the_waiters_of_its_tenant_only() {
        let waiters = Arc::new(EventWaiters::default());
        let (a, b) = (waiters.join("acme", 10).expect("a"), waiters.join("globex", 10).expect("b"));
        let mut a_woken = pin!(a.signal().notified());
        let mut b_woken = pin!(b.signal().notified());
        a_woken.as_mut().enable();
        b_woken.as_mut().enable();
        waiters.wake("globex");
        assert!(signalled(b_woken.as_mut()), "B's waiter is woken by B's commit");
        assert!(!signalled(a_woken.as_mut()), "A's waiter sleeps through B's commit");
        waiters.wake("initech");
        assert!(!signalled(a_woken.as_mut()), "nor a tenant nobody waits for");
        waiters.wake("acme");
        assert!(signalled(a_woken.as_mut()));
    }

    #[test]
    fn a_tenants_waiters_are_capped_and_forgotten_when_gone() {
        let waiters = Arc::new(EventWaiters::default());
        let first = waiters.join("acme", 2).expect("first");
        let second = waiters.join("acme", 2).expect("second");
        assert!(waiters.join("acme", 2).is_none(), "a third is over the cap");
        let other = waiters.join("globex", 2).expect("another tenant has its own cap");
        drop(first);
        let third = waiters.join("acme", 2).expect("a place came free");
        assert_eq!(waiters.total(), 3);
        drop((second, third, other));
        assert_eq!(waiters.total(), 0);
        assert_eq!(waiters.tenants(), 0, "nothing is kept for tenants that no longer wait");
    }
}
