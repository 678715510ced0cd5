//! How a failed statement is handled: each PostgreSQL error classified (a conflict to run
//! again, a broken connection to replace, a server not serving, a bug) and described.

use crate::StoreError;

/// Why one attempt failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Nothing was committed and running the call again may succeed: a deadlock, or a
    /// connection that turned out dead (`broken`: do not reuse it).
    Retry { error: StoreError, broken: bool },
    /// The answer.
    Fail(StoreError),
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Fail(e)
    }
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        let message = describe(&e);
        match classify(&e) {
            Class::Conflict => Failure::Retry { error: StoreError::Unavailable(message), broken: false },
            Class::Broken => Failure::Retry { error: StoreError::Unavailable(message), broken: true },
            Class::Unavailable => Failure::Fail(StoreError::Unavailable(message)),
            Class::Internal => Failure::Fail(StoreError::Internal(message)),
        }
    }
}

/// How a failed statement is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Deadlock or serialization failure: the transaction was rolled back; run it again.
    Conflict,
    /// The connection is gone (or the server ended the session): nothing after the last
    /// commit happened; another connection may work.
    Broken,
    /// Reachable but not serving: overloaded, shutting down, timed out, refusing logins.
    Unavailable,
    /// A bug, bad data or a schema mismatch.
    Internal,
}

fn classify(e: &tokio_postgres::Error) -> Class {
    if let Some(code) = e.code() {
        let code = code.code();
        return match code {
            // serialization_failure, deadlock_detected
            "40001" | "40P01" => Class::Conflict,
            // admin_shutdown, crash_shutdown, idle_in_transaction_session_timeout,
            // idle_session_timeout: the server ended this session.
            "57P01" | "57P02" | "25P03" | "57P05" => Class::Broken,
            // connection_exception
            _ if code.starts_with("08") => Class::Broken,
            // query_canceled (statement_timeout), cannot_connect_now, database_dropped,
            // lock_not_available, insufficient_resources (too many connections, disk full,
            // out of memory), invalid_authorization (a login the server refuses),
            // read_only_sql_transaction (a standby after a failover)
            "57014" | "57P03" | "57P04" | "55P03" | "25006" => Class::Unavailable,
            _ if code.starts_with("53") || code.starts_with("28") => Class::Unavailable,
            _ => Class::Internal,
        };
    }
    if e.is_closed() || source_is_io(e) {
        return Class::Broken;
    }
    // tokio-postgres exposes no error kind; its messages for these kinds are fixed strings.
    let text = e.to_string();
    let unreachable = ["error connecting to server", "timeout waiting for server", "authentication error"];
    if unreachable.iter().any(|prefix| text.starts_with(prefix)) {
        return Class::Unavailable;
    }
    Class::Internal
}

fn source_is_io(e: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// The server's message and SQLSTATE, or the client error with its cause.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let text = match db.detail() {
            Some(detail) => format!("{} ({}): {detail}", db.message(), db.code().code()),
            None => format!("{} ({})", db.message(), db.code().code()),
        };
        return match pooler_hint(db) {
            Some(hint) => format!("{text} — {hint}"),
            None => text,
        };
    }
    match std::error::Error::source(e) {
        Some(source) => format!("{e}: {source}"),
        None => e.to_string(),
    }
}

/// What an error that only a connection pooler causes means, and what Slipway needs instead.
fn pooler_hint(db: &tokio_postgres::error::DbError) -> Option<String> {
    const NEEDS: &str = "Slipway needs a direct connection or session pooling (pgbouncer: pool_mode = session, \
                         with [store] pooler = \"session\"); transaction pooling is not supported";
    if db.message().starts_with("unsupported startup parameter") {
        return Some(format!(
            "a connection pooler refuses the session settings Slipway sends when connecting: {NEEDS}"
        ));
    }
    // invalid_sql_statement_name: a prepared statement gone from the session, as when a
    // pooler in transaction mode runs the next statement on another server connection.
    (db.code().code() == "26000").then(|| format!("a prepared statement left the session: {NEEDS}"))
}

/// A `tokio_postgres` error as the trait reports it.
pub(crate) fn pg_error(e: &tokio_postgres::Error) -> StoreError {
    match classify(e) {
        Class::Internal => StoreError::Internal(describe(e)),
        _ => StoreError::Unavailable(describe(e)),
    }
}
