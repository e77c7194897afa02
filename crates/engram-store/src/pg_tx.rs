//! PostgreSQL transactions as plain statements on a pooled connection.
//!
//! sqlx's transaction begins with a round trip of its own, and a change that serialises
//! the writers of one owner (remember, an extraction's facts) took another for the
//! owner's advisory lock. Here both go in one simple-query message, `BEGIN; SELECT
//! pg_advisory_xact_lock(<key>)`, whose key is a number computed here
//! ([`owner_key`]), so no text is spliced into SQL. (sqlx's `begin_with` sends such a
//! message too, but when its second statement fails — a lock wait past
//! `statement_timeout` — it hands the connection back to the pool inside the aborted
//! transaction, where every later statement fails.)
//!
//! A transaction dropped before its commit (an error, a cancelled request, a failed
//! begin) is rolled back by a task spawned at the drop before its connection goes back
//! to the pool; a connection that cannot roll back is closed instead. (A failed lock
//! wait is a clean error: a request waiting past the request limit is cancelled and
//! answered 503, and a database-wide `lock_timeout` ends the wait with
//! `lock_not_available`, also a 503.)

use std::ops::{Deref, DerefMut};

use aws_lc_rs::digest;
use sqlx::{AssertSqlSafe, PgConnection, PgPool, Postgres, pool::PoolConnection};

use super::Result;
use crate::domain::owner::Owner;

/// An open transaction on a pooled connection.
pub struct PgTx {
    /// `None` only while being dropped.
    conn: Option<PoolConnection<Postgres>>,
    /// Begun (or being begun) and neither committed nor rolled back.
    open: bool,
    /// The owner whose advisory lock the transaction holds, by [`owner_key`].
    locked: Option<i64>,
}

impl PgTx {
    /// Takes a connection and begins with `begin` (`BEGIN …`), then, with `owner`, takes
    /// the owner's lock in the same round trip.
    pub(super) async fn begin(pool: &PgPool, begin: &str, owner: Option<Owner<'_>>) -> Result<PgTx> {
        let conn = pool.acquire().await?;
        // Open before the message is sent: a begin cancelled or failed half-way is rolled
        // back by the drop.
        let mut tx = PgTx { conn: Some(conn), open: true, locked: owner.map(owner_key) };
        let sql = match tx.locked {
            Some(key) => format!("{begin}; SELECT pg_advisory_xact_lock({key})"),
            None => begin.to_owned(),
        };
        sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut *tx).await?;
        Ok(tx)
    }

    pub(super) async fn commit(mut self) -> Result<()> {
        sqlx::raw_sql("COMMIT").execute(&mut *self).await?;
        self.open = false;
        Ok(())
    }

    /// Takes the owner's advisory lock unless the transaction holds it already.
    pub(super) async fn lock_owner(&mut self, owner: Owner<'_>) -> Result<()> {
        let key = owner_key(owner);
        if self.locked != Some(key) {
            sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(key).execute(&mut **self).await?;
            self.locked = Some(key);
        }
        Ok(())
    }
}

/// The advisory lock key of one owner (tenant, agent, user): the first 8 bytes of the
/// SHA-256 of the three, each preceded by its length (4 bytes, big-endian) so that no
/// two owners meet, read as a big-endian integer. Two owners sharing a key (one chance
/// in 2^64 per pair) would only wait for each other. `docs/deployment.md` gives the same
/// in SQL, to find who holds an owner's lock in `pg_locks`.
pub(super) fn owner_key(owner: Owner<'_>) -> i64 {
    let mut bytes = Vec::with_capacity(64);
    for part in [owner.tenant().as_str(), owner.agent().as_str(), owner.user().as_str()] {
        bytes.extend_from_slice(&(part.len() as u32).to_be_bytes());
        bytes.extend_from_slice(part.as_bytes());
    }
    let hash = digest::digest(&digest::SHA256, &bytes);
    let mut key = [0; 8];
    key.copy_from_slice(&hash.as_ref()[..8]);
    i64::from_be_bytes(key)
}

impl Drop for PgTx {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let Some(mut conn) = self.conn.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    // A statement cancelled in flight hands its own error to the next one
                    // (sqlx reads its answer first): the first try may fail for it.
                    for tries_left in [1, 0] {
                        match sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await {
                            Ok(_) => return,
                            Err(error) if tries_left == 0 => {
                                tracing::warn!(%error, "rolling back an abandoned PostgreSQL transaction failed");
                            }
                            Err(_) => {}
                        }
                    }
                    let _ = conn.close().await;
                });
            }
            // No runtime to roll back on: closing the socket makes the server roll back.
            Err(_) => drop(conn.detach()),
        }
    }
}

// `conn` is taken only by the drop, after which nothing derefs.
#[allow(clippy::expect_used)]
impl Deref for PgTx {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        self.conn.as_ref().expect("a transaction holds its connection until dropped")
    }
}

#[allow(clippy::expect_used)]
impl DerefMut for PgTx {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.conn.as_mut().expect("a transaction holds its connection until dropped")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::{AgentId, ExternalRef, TenantId};

    fn key(tenant: &str, agent: &str, user: &str) -> i64 {
        let (tenant, agent, user) = (
            TenantId::parse(tenant.into()).expect("tenant"),
            AgentId::parse(agent.into()).expect("agent"),
            ExternalRef::parse(user.into()).expect("user"),
        );
        owner_key(Owner::new(&tenant, &agent, &user))
    }

    #[test]
    fn owner_keys_are_stable_and_apart() {
        assert_eq!(key("acme", "concierge", "ann"), key("acme", "concierge", "ann"));
        // The lengths keep the boundaries: moving a character across one is another owner.
        assert_ne!(key("acme", "concierge", "ann"), key("acm", "econcierge", "ann"));
        assert_ne!(key("acme", "concierge", "ann"), key("acme", "concierg", "eann"));
        assert_ne!(key("acme", "concierge", "ann"), key("acme", "concierge", "anne"));
    }
}
