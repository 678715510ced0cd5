//! Throwaway PostgreSQL clusters of one test: `initdb` (or `pg_basebackup` of another
//! cluster, for a streaming standby) in a temp dir, run as user `postgres` when tests run as
//! root, listening on a free loopback port, stopped and removed on drop (panics too). The
//! machine's shared PostgreSQL, which other test binaries use, is never touched.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use slipway_test_support::eventually_blocking;

use super::free_port;

pub struct PrivatePostgres {
    bin: PathBuf,
    data: PathBuf,
    log: PathBuf,
    port: u16,
    dir: tempfile::TempDir,
}

/// Settings every cluster of a test gets: loopback only, and no fsync — a test kills
/// processes, never the machine, so what reached the OS survives.
fn base_settings(port: u16, socket_dir: &Path) -> String {
    format!(
        "\nport = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\nfsync = off\n\
         full_page_writes = off\nmax_connections = 100\n",
        socket_dir.display()
    )
}

impl PrivatePostgres {
    /// A new cluster with a database `test`.
    pub fn start() -> PrivatePostgres {
        let pg = PrivatePostgres::empty();
        pg.as_postgres(
            &format!("{} -D {} -U postgres --auth=trust -E UTF8 --no-sync", q(&pg.bin.join("initdb")), q(&pg.data)),
            "initdb",
        );
        pg.append_conf("postgresql.conf", &base_settings(pg.port, pg.dir.path()));
        pg.start_again();
        pg.psql("postgres", "CREATE DATABASE test");
        pg
    }

    /// A streaming-replication standby of `primary`, started and connected to it under the
    /// application name `name` (what `synchronous_standby_names` refers to). `initdb`'s
    /// trust authentication already lets loopback replication connections in.
    pub fn standby_of(primary: &PrivatePostgres, name: &str) -> PrivatePostgres {
        let pg = PrivatePostgres::empty();
        pg.as_postgres(
            &format!(
                "{} -h 127.0.0.1 -p {} -U postgres -D {} -X stream -R -c fast --no-sync",
                q(&pg.bin.join("pg_basebackup")),
                primary.port,
                q(&pg.data)
            ),
            "pg_basebackup",
        );
        // The copy has the primary's settings; a standby promoted in its place must not wait
        // for a synchronous standby of its own.
        let mut settings = base_settings(pg.port, pg.dir.path());
        settings.push_str("synchronous_standby_names = ''\n");
        pg.append_conf("postgresql.conf", &settings);
        // Later lines win: -R wrote a primary_conninfo without the name the primary knows us by.
        pg.append_conf(
            "postgresql.auto.conf",
            &format!(
                "\nprimary_conninfo = 'host=127.0.0.1 port={} user=postgres application_name={name}'\n",
                primary.port
            ),
        );
        pg.start_again();
        pg
    }

    fn empty() -> PrivatePostgres {
        let bin = postgres_bin().unwrap_or_else(|| {
            panic!(
                "this test needs the PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin \
                 or in $SLIPWAY_TEST_PG_BIN: install the postgresql server package"
            )
        });
        let dir = tempfile::tempdir().expect("tempdir");
        if is_root() {
            run(Command::new("chown").arg("postgres:postgres").arg(dir.path()), "chown the cluster directory");
        }
        PrivatePostgres {
            data: dir.path().join("data"),
            log: dir.path().join("postgres.log"),
            port: free_port(),
            bin,
            dir,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/test", self.port)
    }

    /// Commits wait until the standby named `name` has flushed them (`synchronous_commit`
    /// stays `on`); returns once that standby streams as the synchronous one.
    pub fn require_synchronous_standby(&self, name: &str) {
        self.psql("postgres", &format!("ALTER SYSTEM SET synchronous_standby_names = '{name}'"));
        self.psql("postgres", "SELECT pg_reload_conf()");
        eventually_blocking(
            &format!("standby {name} streaming as the synchronous one"),
            Duration::from_secs(30),
            || {
                let state = self.psql(
                    "postgres",
                    &format!("SELECT sync_state FROM pg_stat_replication WHERE application_name = '{name}'"),
                );
                if state.trim() == "sync" { Ok(()) } else { Err(format!("{state:?}")) }
            },
        );
    }

    pub fn start_again(&self) {
        self.pg_ctl("-w -t 60 start", "pg_ctl start");
    }

    /// Fast shutdown: sessions are terminated, open transactions rolled back.
    pub fn stop(&self) {
        self.pg_ctl("-m fast -w -t 60 stop", "pg_ctl stop");
    }

    /// Immediate shutdown, as a crash: no checkpoint, every session cut off mid-statement.
    pub fn crash(&self) {
        self.pg_ctl("-m immediate -w -t 60 stop", "pg_ctl stop -m immediate");
    }

    /// A standby becomes a primary, returning once it accepts writes.
    pub fn promote(&self) {
        self.pg_ctl("-w -t 60 promote", "pg_ctl promote");
    }

    /// Runs SQL with psql against `db`, returning its unaligned output.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let cmd = format!(
            "{} -X -q -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -p {} -U postgres -d {db} -c {}",
            q(&self.bin.join("psql")),
            self.port,
            sh_quote(sql)
        );
        self.as_postgres(&cmd, &format!("psql {sql}"))
    }

    pub fn server_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn append_conf(&self, file: &str, text: &str) {
        let path = self.data.join(file);
        let mut conf = std::fs::read_to_string(&path).unwrap_or_default();
        conf.push_str(text);
        std::fs::write(&path, conf).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    fn pg_ctl(&self, args: &str, what: &str) {
        let cmd = format!("{} -D {} -l {} {args}", q(&self.bin.join("pg_ctl")), q(&self.data), q(&self.log));
        self.as_postgres(&cmd, what);
    }

    fn as_postgres(&self, cmd: &str, what: &str) -> String {
        let out = as_postgres(cmd).current_dir(self.dir.path()).output();
        let out = out.unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
        assert!(
            out.status.success(),
            "{what} failed ({}):\n{}\n{}\nserver log so far:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.server_log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let cmd = format!("{} -D {} -m immediate -w stop", q(&self.bin.join("pg_ctl")), q(&self.data));
        let _ = as_postgres(&cmd).current_dir(self.dir.path()).output();
    }
}

/// `sh -c cmd`, as user `postgres` when we are root (the server refuses to run as root).
fn as_postgres(cmd: &str) -> Command {
    if is_root() {
        let mut c = Command::new("su");
        c.args(["postgres", "-s", "/bin/sh", "-c", cmd]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", cmd]);
        c
    }
}

/// The newest installed server's `bin` directory holding `initdb` and `pg_ctl`.
fn postgres_bin() -> Option<PathBuf> {
    let usable = |p: &Path| p.join("initdb").is_file() && p.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os("SLIPWAY_TEST_PG_BIN") {
        return Some(PathBuf::from(dir)).filter(|p| usable(p));
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, p)| usable(p))
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p)
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A path single-quoted for `sh`.
fn q(p: &Path) -> String {
    sh_quote(&p.display().to_string())
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn run(c: &mut Command, what: &str) {
    let out = c.output().unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
