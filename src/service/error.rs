//! Why an operation failed, named by what it means rather than by any protocol: each
//! door renders it its own way (REST's JSON error, an MCP tool error, a panel page), so
//! the service knows nothing of HTTP (docs/decisions/service-error.md).

/// An operation's failure. The messages are what a client is told; an internal cause
/// is kept for the log and never shown.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The input breaks a rule: nothing changed.
    #[error("{0}")]
    Invalid(String),
    /// The input is over a size cap.
    #[error("{0}")]
    TooLarge(String),
    /// The caller lacks a scope, or names an agent or user its token cannot reach.
    #[error("{0}")]
    Forbidden(String),
    /// What the call names does not exist (for this tenant).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The call contradicts what is stored (a duplicate, a cap reached, memory off).
    #[error("{0}")]
    Conflict(String),
    /// An append's `expected_last_seq` was stale; the conversation's last seq is this.
    #[error("expected_last_seq does not match: the conversation's last seq is {0}")]
    StaleSeq(i64),
    /// A conditional write's condition did not hold: nothing changed.
    #[error("{0}")]
    PreconditionFailed(String),
    /// What the call names existed but is gone for good (an event cursor older than the
    /// retention).
    #[error("{0}")]
    Gone(String),
    /// More calls of the tenant at once than a cap allows: retry when one is done.
    #[error("{0}; retry later")]
    TooMany(&'static str),
    /// The database cannot be reached or is busy, or is contended: retry.
    #[error("{0}; retry later")]
    Unavailable(&'static str),
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl ServiceError {
    pub fn invalid(message: impl Into<String>) -> Self {
        ServiceError::Invalid(message.into())
    }

    /// What a log may say of the failure: an internal error's cause chain, why the
    /// service was unavailable, else only its kind (a message may carry what a client sent).
    pub fn for_log(&self) -> String {
        match self {
            ServiceError::Internal(cause) => format!("{cause:#}"),
            ServiceError::Unavailable(why) | ServiceError::TooMany(why) => (*why).to_owned(),
            other => other.kind().to_owned(),
        }
    }

    /// The failure's meaning as a log field: its message may carry what a client sent.
    pub fn kind(&self) -> &'static str {
        match self {
            ServiceError::Invalid(_) => "invalid",
            ServiceError::TooLarge(_) => "too_large",
            ServiceError::Forbidden(_) => "forbidden",
            ServiceError::NotFound(_) => "not_found",
            ServiceError::Conflict(_) => "conflict",
            ServiceError::StaleSeq(_) => "stale_seq",
            ServiceError::PreconditionFailed(_) => "precondition_failed",
            ServiceError::Gone(_) => "gone",
            ServiceError::TooMany(_) => "too_many",
            ServiceError::Unavailable(_) => "unavailable",
            ServiceError::Internal(_) => "internal",
        }
    }
}

impl From<crate::domain::page::InvalidPage> for ServiceError {
    fn from(error: crate::domain::page::InvalidPage) -> Self {
        ServiceError::Invalid(error.0)
    }
}

impl From<crate::auth::Refused> for ServiceError {
    fn from(refused: crate::auth::Refused) -> Self {
        match refused {
            crate::auth::Refused::Forbidden(why) => ServiceError::Forbidden(why),
            crate::auth::Refused::Invalid(why) => ServiceError::Invalid(why),
        }
    }
}

impl From<sqlx::Error> for ServiceError {
    fn from(error: sqlx::Error) -> Self {
        if is_unavailable(&error) {
            return ServiceError::Unavailable("the database is unavailable or busy");
        }
        ServiceError::Internal(anyhow::Error::new(error).context("database query failed"))
    }
}

impl From<anyhow::Error> for ServiceError {
    fn from(error: anyhow::Error) -> Self {
        match error.downcast::<sqlx::Error>() {
            Ok(sql) => sql.into(),
            Err(other) if out_of_descriptors(&other) => {
                ServiceError::Unavailable("the server is out of file descriptors")
            }
            Err(other) => ServiceError::Internal(other),
        }
    }
}

/// Errors that say "not now" rather than "wrong": the database is unreachable, shutting
/// down, out of connections, memory or disk, over its statement or lock timeout, or
/// rolled the transaction back to break a deadlock (PostgreSQL), locked by another writer past the busy timeout, or unable to open its
/// file for want of descriptors or memory (SQLite). A client should retry them.
pub fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::Tls(_) => true,
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            // PostgreSQL: connection exceptions (08…), insufficient resources (53…: disk,
            // memory, too many connections), shutdown and cannot-connect (57P01-57P03),
            // statement timeout (57014), a lock wait past the database's `lock_timeout`
            // (55P03), and a transaction rolled back to break a deadlock or a
            // serialization conflict (40P01, 40001), which a retry completes: deleting a
            // webhook subscription while its delivery is being recorded takes their rows'
            // locks in opposite orders.
            let postgres = code.starts_with("08")
                || code.starts_with("53")
                || code.starts_with("57P")
                || ["57014", "55P03", "40P01", "40001"].contains(&code.as_ref());
            // SQLite, with their extended codes: SQLITE_BUSY (5), SQLITE_LOCKED (6),
            // SQLITE_NOMEM (7), SQLITE_FULL (13) and SQLITE_CANTOPEN (14, "unable to open
            // database file": what a connection opened without a free descriptor gets).
            let sqlite = code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6 | 7 | 13 | 14));
            postgres || sqlite
        }
        _ => false,
    }
}

/// Whether a failure comes from the process or the system running out of open files
/// (EMFILE, ENFILE): resource exhaustion, to retry, not a bug.
fn out_of_descriptors(error: &anyhow::Error) -> bool {
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
            .is_some_and(|code| code == EMFILE || code == ENFILE)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database file that cannot be opened (here: its directory is missing; under load:
    /// no descriptor left) is "unable to open database file", SQLITE_CANTOPEN.
    #[tokio::test]
    async fn a_database_file_that_cannot_be_opened_is_unavailable() {
        let options = sqlx::sqlite::SqliteConnectOptions::new().filename("/nonexistent-engram-dir/engram.db");
        let error = sqlx::ConnectOptions::connect(&options).await.expect_err("cannot open");
        assert!(is_unavailable(&error), "{error}");
        assert!(matches!(ServiceError::from(error), ServiceError::Unavailable(_)));
    }

    #[test]
    fn running_out_of_descriptors_is_unavailable() {
        for code in [23, 24] {
            let error = anyhow::Error::new(std::io::Error::from_raw_os_error(code)).context("opening a file");
            assert!(matches!(ServiceError::from(error), ServiceError::Unavailable(_)), "errno {code}");
        }
        let other = anyhow::Error::new(std::io::Error::from_raw_os_error(2)).context("opening a file");
        assert!(matches!(ServiceError::from(other), ServiceError::Internal(_)), "ENOENT is a bug here");
    }
}
