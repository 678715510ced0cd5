//! Connection settings (the URL, its password kept out of messages by [`redact`]) and the
//! embedded migrations.

use std::time::{Duration, SystemTime};

use slipway_domain::Timestamp;
use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config};

use super::tls::Transport;
use super::{Pooler, PostgresOptions, describe, pg_error};
use crate::StoreError;

/// Applied in order, each exactly once, recorded in `schema_migrations`. Append only: a
/// migration that has shipped is never edited.
///
/// The tables mirror SQLite's column for column. Differences, each for a reason:
/// * text compared or sorted by the store is `COLLATE "C"` — byte order, as SQLite's BINARY
///   and Rust's `Ord` (a locale collation would page listings in another order);
/// * `seq` stands in for SQLite's implicit rowid (insertion order breaks ties: claims of
///   resources due at the same instant, the order of a resource's operations);
/// * bodies are `TEXT`, exactly the JSON serde wrote (`JSONB` would re-encode it on every
///   write and hand back a different text).
const MIGRATIONS: &[&str] = &[
    // 1. Everything. Resource and operation bodies are the serde JSON of the domain types;
    // the other columns exist to be indexed and are always derived from the body's record
    // (lease and schedule live only in columns: claims change them without a body rewrite).
    r#"
    CREATE TABLE resources (
        key            TEXT COLLATE "C" PRIMARY KEY,
        subscription   TEXT COLLATE "C" NOT NULL,
        resource_group TEXT COLLATE "C" NOT NULL,
        type_key       TEXT COLLATE "C" NOT NULL,
        next_due       BIGINT,
        intent         BOOLEAN NOT NULL DEFAULT FALSE,
        lease_owner    TEXT COLLATE "C",
        lease_until    BIGINT,
        lease_epoch    BIGINT NOT NULL DEFAULT 0,
        generation     BIGINT NOT NULL,
        body           TEXT NOT NULL,
        seq            BIGINT GENERATED ALWAYS AS IDENTITY
    );
    CREATE INDEX resources_by_group ON resources (type_key, subscription, resource_group, key);
    CREATE INDEX resources_by_subscription ON resources (type_key, subscription, key);
    CREATE INDEX resources_due ON resources (intent, next_due, seq) WHERE next_due IS NOT NULL;
    CREATE INDEX resources_by_lease_owner ON resources (lease_owner) WHERE lease_owner IS NOT NULL;

    CREATE TABLE operations (
        subscription TEXT COLLATE "C" NOT NULL,
        id           TEXT COLLATE "C" NOT NULL,
        resource_key TEXT COLLATE "C" NOT NULL,
        status       TEXT NOT NULL,
        terminal     BOOLEAN NOT NULL,
        expires_at   BIGINT NOT NULL,
        body         TEXT NOT NULL,
        seq          BIGINT GENERATED ALWAYS AS IDENTITY,
        PRIMARY KEY (subscription, id)
    );
    CREATE INDEX operations_active ON operations (resource_key, seq) WHERE NOT terminal;
    CREATE INDEX operations_expiry ON operations (expires_at) WHERE terminal;

    CREATE TABLE outbox (
        id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        subscription    TEXT NOT NULL,
        operation_id    TEXT NOT NULL,
        uri             TEXT NOT NULL,
        attempts        BIGINT NOT NULL DEFAULT 0,
        next_attempt_at BIGINT NOT NULL,
        created_at      BIGINT NOT NULL,
        state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'dead')),
        last_error      TEXT
    );
    CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE state = 'pending';
    "#,
    // 2. Registry entries (`crate::entries`): small platform records that are not resources,
    // by kind tag and exact id; `partition` is the subscription they belong to ('' for
    // platform-wide ones); `version` is the optimistic-concurrency counter, 1 at insert.
    r#"
    CREATE TABLE entries (
        kind       TEXT COLLATE "C" NOT NULL,
        id         TEXT COLLATE "C" NOT NULL,
        partition  TEXT COLLATE "C" NOT NULL,
        body       TEXT NOT NULL,
        version    BIGINT NOT NULL CHECK (version >= 1),
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (kind, id)
    );
    CREATE INDEX entries_by_partition ON entries (kind, partition, id);
    "#,
    // 3. References between resources (`slipway_domain::reference`): one row per referrer
    // and referenced resource, by lowercased key; written with the referrer's row.
    r#"
    CREATE TABLE resource_references (
        to_key   TEXT COLLATE "C" NOT NULL,
        from_key TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (to_key, from_key)
    );
    CREATE INDEX resource_references_by_referrer ON resource_references (from_key);
    "#,
    // 4. When a resource can next be claimed, as SQLite's migration 4: a resource held under
    // a lease and not asked for by a client is nobody else's before its lease runs out.
    // Indexed, a claim reads only the rows it may take instead of stepping over (and
    // fetching) every held resource. Adding a stored column rewrites the table once.
    r#"
    ALTER TABLE resources ADD COLUMN claimable_at BIGINT GENERATED ALWAYS AS (
        CASE WHEN NOT intent AND lease_owner IS NOT NULL AND lease_until > next_due
             THEN lease_until ELSE next_due END
    ) STORED;
    CREATE INDEX resources_claimable ON resources (intent, claimable_at, seq) WHERE next_due IS NOT NULL;
    DROP INDEX resources_due;
    "#,
    // 5. The event feed, as SQLite's migration 5. A change numbers its events by updating its
    // subscription's `event_cursors` row, whose lock it holds until it commits: a
    // subscription's positions are dense and follow commit order across replicas.
    r#"
    CREATE TABLE event_cursors (
        subscription TEXT PRIMARY KEY,
        last_seq     BIGINT NOT NULL
    );
    CREATE TABLE events (
        subscription TEXT NOT NULL,
        seq          BIGINT NOT NULL,
        resource_key TEXT NOT NULL,
        kind         TEXT NOT NULL,
        at           BIGINT NOT NULL,
        expires_at   BIGINT NOT NULL,
        body         TEXT NOT NULL,
        PRIMARY KEY (subscription, seq)
    );
    CREATE INDEX events_expiry ON events (expires_at);
    "#,
    // 6. The drift lane, as SQLite's migration 6 (a nullable column: no table rewrite).
    r#"
    ALTER TABLE resources ADD COLUMN drift_due BIGINT;
    CREATE INDEX resources_drift_due ON resources (drift_due, seq) WHERE drift_due IS NOT NULL;
    "#,
    // 7. Quota usage, as SQLite's migration 7.
    r#"
    CREATE TABLE usage (
        subscription   TEXT NOT NULL,
        meter          TEXT NOT NULL,
        resource_group TEXT NOT NULL,
        value          BIGINT NOT NULL,
        PRIMARY KEY (subscription, meter, resource_group)
    );
    "#,
    // 8. The activity log, as SQLite's migration 8.
    r#"
    CREATE TABLE activity (
        id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        subscription   TEXT COLLATE "C" NOT NULL,
        at             BIGINT NOT NULL,
        target_key     TEXT COLLATE "C" NOT NULL,
        resource_group TEXT COLLATE "C" NOT NULL,
        correlation_id TEXT COLLATE "C" NOT NULL,
        caller         TEXT COLLATE "C" NOT NULL,
        status         TEXT COLLATE "C" NOT NULL,
        expires_at     BIGINT NOT NULL,
        body           TEXT NOT NULL
    );
    CREATE INDEX activity_by_subscription ON activity (subscription, id);
    CREATE INDEX activity_expiry ON activity (expires_at);
    CREATE INDEX activity_by_time ON activity (at);
    "#,
];

/// The first key of the session-level advisory lock migrations run under (`'SLPW'`); the
/// second is a hash of the schema, so stores in different schemas migrate independently.
/// The two-key form lives in another lock space than the one-key locks changes take.
const MIGRATION_LOCK: i32 = 0x534C_5057;

/// A migration may rebuild an index on a big table: far longer than any statement the store
/// runs later, and replicas that start meanwhile wait for it on the lock.
const MIGRATION_STATEMENT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The URL turned into connection configurations.
pub(super) struct Settings {
    /// For pooled connections: statement timeout and search path set at connection start.
    pub(super) pool_config: Config,
    /// For the one migration connection.
    migrate_config: Config,
    /// Behind a session pooler: the settings, `SET` on every new connection of the pool (and
    /// `migrate_sql` on the migration connection) since the startup packet cannot carry them.
    pub(super) session_sql: Option<String>,
    migrate_sql: Option<String>,
    schema: Option<String>,
    /// `host:port/database`, for messages.
    pub(super) target: String,
    /// TLS mode and connector, for every connection.
    pub(super) transport: Transport,
}

impl Settings {
    pub(super) fn new(options: &PostgresOptions) -> Result<Settings, StoreError> {
        let (url, transport) = Transport::new(options)?;
        let mut config: Config = url.parse().map_err(|e| {
            StoreError::Internal(format!("invalid PostgreSQL URL {}: {}", redact(&options.url), describe(&e)))
        })?;
        config.ssl_mode(transport.mode.wire());
        if let Some(schema) = &options.schema
            && !valid_schema_name(schema)
        {
            return Err(StoreError::Internal(format!(
                "invalid PostgreSQL schema name {schema:?}: use lowercase letters, digits and _ (at most 63)"
            )));
        }
        config.connect_timeout(options.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("slipway");
        }
        let base = config.get_options().unwrap_or_default().to_string();
        let schema = options.schema.as_deref();
        let pool_settings = session_settings(options.statement_timeout, schema);
        let migrate_settings = session_settings(MIGRATION_STATEMENT_TIMEOUT, schema);
        let mut pool_config = config.clone();
        let mut migrate_config = config.clone();
        let (session_sql, migrate_sql) = match options.pooler {
            Pooler::None => {
                pool_config.options(startup_options(&base, &pool_settings));
                migrate_config.options(startup_options(&base, &migrate_settings));
                (None, None)
            }
            Pooler::Session => (Some(set_statements(&pool_settings)), Some(set_statements(&migrate_settings))),
        };
        Ok(Settings {
            pool_config,
            migrate_config,
            session_sql,
            migrate_sql,
            schema: options.schema.clone(),
            target: target(&config),
            transport,
        })
    }
}

fn valid_schema_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 63
        && !name.starts_with("pg_")
}

/// The session settings every connection needs, as `(name, value)`.
fn session_settings(statement_timeout: Duration, schema: Option<&str>) -> Vec<(&'static str, String)> {
    let ms = millis(statement_timeout);
    let mut settings = vec![
        ("statement_timeout", ms.to_string()),
        // A session that stalls inside a transaction (a frozen replica) would hold its locks
        // forever; the server ends it instead. Twice the statement timeout leaves room for
        // the change function between statements.
        ("idle_in_transaction_session_timeout", ms.saturating_mul(2).to_string()),
    ];
    if let Some(schema) = schema {
        settings.push(("search_path", schema.to_string()));
    }
    settings
}

/// The settings for the startup packet, so every connection — the pool's reconnects
/// included — has them before its first statement. Settings given in the URL come first;
/// ours win where both set the same one.
fn startup_options(base: &str, settings: &[(&str, String)]) -> String {
    let mut options = base.trim().to_string();
    for (name, value) in settings {
        if !options.is_empty() {
            options.push(' ');
        }
        options.push_str(&format!("-c {name}={value}"));
    }
    options
}

/// The settings as statements, for a connection whose startup packet could not carry them.
/// Values are numbers or a validated schema name: safe to quote.
fn set_statements(settings: &[(&str, String)]) -> String {
    settings.iter().map(|(name, value)| format!("SET {name} = '{value}'")).collect::<Vec<_>>().join("; ")
}

/// Milliseconds for a server setting; 0 disables it, so a nonzero duration is at least 1.
fn millis(d: Duration) -> u64 {
    if d.is_zero() { 0 } else { u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1) }
}

fn target(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().or(config.get_user()).unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

/// The URL with any password replaced by `***`.
pub fn redact(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        if let Some((userinfo, host)) = authority.rsplit_once('@')
            && let Some((user, _)) = userinfo.split_once(':')
        {
            return redact_password_param(&format!("{scheme}://{user}:***@{host}{tail}"));
        }
        return redact_password_param(url);
    }
    redact_password_param(url)
}

/// `password=…` in a query string or a key=value connection string.
fn redact_password_param(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("password=") {
        let starts_word = at == 0 || matches!(rest.as_bytes()[at - 1], b'?' | b'&' | b' ');
        let value_start = at + "password=".len();
        out.push_str(&rest[..value_start]);
        rest = &rest[value_start..];
        if starts_word {
            let end = rest.find(['&', ' ']).unwrap_or(rest.len());
            out.push_str("***");
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

/// Creates the schema if asked to and applies pending migrations, holding a session-level
/// advisory lock so replicas starting together migrate once: the others wait, then find
/// nothing left to do. The lock goes with the connection, which is closed at the end.
pub(super) async fn migrate(settings: &Settings) -> Result<(), StoreError> {
    // Whatever keeps us from connecting (down, refusing logins, no such database) is
    // something to fix outside and retry, not a bug.
    let (mut client, connection) =
        settings.migrate_config.connect(settings.transport.connector.clone()).await.map_err(|e| {
            StoreError::Unavailable(format!(
                "cannot connect to PostgreSQL at {} ({}): {}",
                settings.target,
                settings.transport,
                describe(&e)
            ))
        })?;
    let driver = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "PostgreSQL migration connection ended");
        }
    });
    let outcome = match &settings.migrate_sql {
        Some(sql) => client.batch_execute(sql).await.map_err(|e| pg_error(&e)),
        None => Ok(()),
    };
    let outcome = match outcome {
        Ok(()) => migrate_locked(&mut client, settings).await,
        Err(e) => Err(e),
    };
    drop(client);
    // The connection ends (and the lock with it) once the client is gone.
    if let Err(e) = driver.await {
        tracing::debug!(error = %e, "PostgreSQL migration connection task failed");
    }
    outcome
}

async fn migrate_locked(client: &mut Client, settings: &Settings) -> Result<(), StoreError> {
    let schema = settings.schema.as_deref();
    client
        .execute(
            "SELECT pg_advisory_lock($1, hashtext(COALESCE($2::text, current_schema(), '')))",
            &[&MIGRATION_LOCK, &schema],
        )
        .await
        .map_err(|e| pg_error(&e))?;
    if let Some(schema) = schema {
        // Validated: a plain identifier, safe to quote.
        client.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"")).await.map_err(|e| pg_error(&e))?;
    }
    let tx = client.transaction().await.map_err(|e| pg_error(&e))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    BIGINT PRIMARY KEY,
            applied_at BIGINT NOT NULL
        )",
    )
    .await
    .map_err(|e| pg_error(&e))?;
    let current: i64 = tx
        .query_one("SELECT COALESCE(MAX(version), 0)::BIGINT FROM schema_migrations", &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| pg_error(&e))?;
    let known = MIGRATIONS.len() as i64;
    let place = match schema {
        Some(schema) => format!("{} (schema {schema})", settings.target),
        None => settings.target.clone(),
    };
    if current > known {
        // Running an older binary on a newer schema could silently drop what it does not know.
        return Err(StoreError::Internal(format!(
            "database {place} has schema version {current}, newer than this Slipway understands ({known})"
        )));
    }
    let done = usize::try_from(current)
        .map_err(|_| StoreError::Internal(format!("database {place}: bad schema version {current}")))?;
    let applied_at = Timestamp::from_system(SystemTime::now()).as_millis();
    for (version, sql) in (1_i64..).zip(MIGRATIONS).skip(done) {
        tx.batch_execute(sql)
            .await
            .map_err(|e| StoreError::Internal(format!("migration {version} failed: {}", describe(&e))))?;
        tx.execute("INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", &[&version, &applied_at])
            .await
            .map_err(|e| pg_error(&e))?;
        tracing::info!(version, database = %place, "applied PostgreSQL migration");
    }
    tx.commit().await.map_err(|e| pg_error(&e))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{redact, session_settings, set_statements, startup_options, valid_schema_name};

    #[test]
    fn startup_options_keep_the_urls_and_add_ours() {
        let options = |base: &str, timeout, schema| startup_options(base, &session_settings(timeout, schema));
        assert_eq!(
            options("", Duration::from_secs(5), None),
            "-c statement_timeout=5000 -c idle_in_transaction_session_timeout=10000"
        );
        assert_eq!(
            options("-c work_mem=8MB", Duration::from_micros(10), Some("t_1")),
            "-c work_mem=8MB -c statement_timeout=1 -c idle_in_transaction_session_timeout=2 -c search_path=t_1"
        );
        assert_eq!(
            options("", Duration::ZERO, None),
            "-c statement_timeout=0 -c idle_in_transaction_session_timeout=0"
        );
    }

    #[test]
    fn behind_a_session_pooler_the_settings_are_statements() {
        assert_eq!(
            set_statements(&session_settings(Duration::from_secs(5), Some("t_1"))),
            "SET statement_timeout = '5000'; SET idle_in_transaction_session_timeout = '10000'; \
             SET search_path = 't_1'"
        );
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        for good in ["slipway", "t_0123abc", "_x"] {
            assert!(valid_schema_name(good), "{good}");
        }
        for bad in ["", "Slipway", "1abc", "a-b", "a b", "a\"b", "pg_temp", &"x".repeat(64)] {
            assert!(!valid_schema_name(bad), "{bad}");
        }
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("postgres://u:secret@db:5432/x"), "postgres://u:***@db:5432/x");
        assert_eq!(redact("postgresql://u:p@ss@db/x?sslmode=disable"), "postgresql://u:***@db/x?sslmode=disable");
        assert_eq!(redact("postgres://u@db/x"), "postgres://u@db/x");
        assert_eq!(redact("postgres://db/x?user=u&password=secret&a=b"), "postgres://db/x?user=u&password=***&a=b");
        assert_eq!(redact("host=db user=u password=secret dbname=x"), "host=db user=u password=*** dbname=x");
        assert_eq!(redact("host=db mypassword=x"), "host=db mypassword=x");
    }
}
