//! The activity log's export for a SIEM (`[activity] sink`): every entry recorded while this
//! Slipway runs, one JSON line each in Azure's `EventData` shape, on stdout or appended to a
//! file (created `0600`: entries name people and addresses).
//!
//! It tails the store, not the API, so it exports what every replica recorded, refusals and
//! committed changes alike. Positions are handed out at insert, not at commit (PostgreSQL), so
//! it reads by time: each poll reads the entries of the last [`LAG`] and after, and writes
//! those it has not written yet, oldest position first (an index on the time keeps each poll
//! to the window). An entry committed more than `LAG` after its request arrived would be
//! missed. One replica exports (configure the sink on one): each would export everything.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use slipway_domain::activity::ActivityFilter;
use slipway_domain::{Clock, Timestamp};
use slipway_store::{ActivityQuery, ActivityScope, Store};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// How far back each poll reads again: an entry's time is its request's arrival, so a slow
/// upload (the listener allows 30 s for a body), lock waits and the refusal recorder's queue
/// all come between it and the commit; two minutes covers them with room.
pub const LAG: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_secs(1);
const PAGE: usize = 500;

/// Where the export goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SinkTarget {
    Stdout,
    File(PathBuf),
}

pub struct ActivitySink {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    out: Box<dyn AsyncWrite + Send + Unpin>,
    /// Positions written, with their entries' times, until they fall out of the window.
    written: BTreeMap<i64, Timestamp>,
    /// Entries before this were recorded before the sink started: not exported.
    since: Timestamp,
}

impl ActivitySink {
    pub async fn open(target: SinkTarget, store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> std::io::Result<Self> {
        let out: Box<dyn AsyncWrite + Send + Unpin> = match &target {
            SinkTarget::Stdout => Box::new(tokio::io::stdout()),
            SinkTarget::File(path) => {
                Box::new(tokio::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path).await?)
            }
        };
        let since = clock.now();
        Ok(ActivitySink { store, clock, out, written: BTreeMap::new(), since })
    }

    /// Exports until `stop` resolves, then once more.
    pub async fn run(mut self, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        let mut tick = tokio::time::interval(POLL);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.export().await {
                tracing::warn!(error = %e, "activity export failed; trying again");
            }
        }
        if let Err(e) = self.export().await {
            tracing::warn!(error = %e, "the last activity export failed");
        }
    }

    /// Writes what was recorded since the last poll's window began and was not written yet.
    pub async fn export(&mut self) -> Result<usize, String> {
        let window = self.clock.now().sub(LAG).max(self.since);
        let mut query = ActivityQuery {
            scope: ActivityScope::Everything,
            filter: ActivityFilter { since: Some(window), ..ActivityFilter::default() },
            before: None,
            limit: PAGE,
        };
        let mut fresh = Vec::new();
        loop {
            let page = self.store.activity(&query).await.map_err(|e| e.to_string())?;
            fresh.extend(page.items.into_iter().filter(|(position, _)| !self.written.contains_key(position)));
            match page.next {
                Some(next) => query.before = Some(next),
                None => break,
            }
        }
        fresh.sort_by_key(|(position, _)| *position);
        let mut text = String::new();
        for (position, entry) in &fresh {
            text.push_str(&slipway_api::activity_event_data(*position, entry).to_string());
            text.push('\n');
        }
        self.out.write_all(text.as_bytes()).await.map_err(|e| e.to_string())?;
        self.out.flush().await.map_err(|e| e.to_string())?;
        self.written.extend(fresh.iter().map(|(position, entry)| (*position, entry.time)));
        self.written.retain(|_, at| *at >= window);
        Ok(fresh.len())
    }
}
