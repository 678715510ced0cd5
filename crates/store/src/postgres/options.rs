//! The PostgreSQL engine's options: where the database is, the pool, the timeouts, TLS and
//! the pooler in front of it. Their `Debug` never shows the URL's password.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::schema::redact;
use super::tls::SslMode;

#[derive(Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// `postgres://user[:password]@host[:port]/database[?options]` (or the key=value form).
    pub url: String,
    /// Tables live in this schema (created if missing) instead of the connection's default
    /// search path: one database can hold several independent stores (tests do this).
    /// Lowercase letters, digits and `_`, starting with a letter or `_`.
    pub schema: Option<String>,
    /// Most connections held open (and so most concurrent transactions).
    pub pool_size: usize,
    /// Server-side limit on every statement, lock waits included; also how long a call waits
    /// for a free pooled connection. Zero disables both.
    pub statement_timeout: Duration,
    /// How long an operation stays readable after its last write.
    pub operation_ttl: Duration,
    /// How long an event stays in the feed.
    pub event_retention: Duration,
    /// How long an activity-log entry is kept.
    pub activity_retention: Duration,
    /// Limit on establishing one connection; also bounds [`Store::ping`].
    pub connect_timeout: Duration,
    /// TLS to the server; `None`: the URL's `sslmode`, else [`SslMode::Prefer`].
    pub ssl_mode: Option<SslMode>,
    /// PEM root certificates the server's must chain to (`verify-full` only); `None`: the
    /// URL's `sslrootcert`, else the webpki (Mozilla) roots.
    pub ssl_root_cert: Option<PathBuf>,
    /// What stands between Slipway and the server.
    pub pooler: Pooler,
}

/// A connection pooler in front of PostgreSQL (pgbouncer, pgcat, …), as far as the store must
/// know: where its session settings can go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pooler {
    /// None: the settings travel in the startup packet (`options`), so a reconnect has them
    /// before its first statement.
    #[default]
    None,
    /// Session pooling: a pooler that refuses the startup packet's `options` (pgbouncer) but
    /// gives each client connection one server session for its whole life. The settings are
    /// `SET` right after connecting. Transaction pooling is not supported: the store keeps
    /// prepared statements and settings on its sessions.
    Session,
}

impl PostgresOptions {
    pub const DEFAULT_POOL_SIZE: usize = 16;
    pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

    pub fn new(url: impl Into<String>) -> Self {
        PostgresOptions {
            url: url.into(),
            schema: None,
            pool_size: Self::DEFAULT_POOL_SIZE,
            statement_timeout: Self::DEFAULT_STATEMENT_TIMEOUT,
            operation_ttl: crate::DEFAULT_OPERATION_TTL,
            event_retention: crate::DEFAULT_EVENT_RETENTION,
            activity_retention: crate::DEFAULT_ACTIVITY_RETENTION,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            ssl_mode: None,
            ssl_root_cert: None,
            pooler: Pooler::None,
        }
    }

    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }
}

/// The URL's password never reaches logs.
impl fmt::Debug for PostgresOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresOptions")
            .field("url", &redact(&self.url))
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("statement_timeout", &self.statement_timeout)
            .field("operation_ttl", &self.operation_ttl)
            .field("event_retention", &self.event_retention)
            .field("activity_retention", &self.activity_retention)
            .field("connect_timeout", &self.connect_timeout)
            .field("ssl_mode", &self.ssl_mode)
            .field("ssl_root_cert", &self.ssl_root_cert)
            .field("pooler", &self.pooler)
            .finish()
    }
}
