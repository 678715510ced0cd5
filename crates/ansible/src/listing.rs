//! Every job the work dir still holds, from the `job.json` records (`Provider::jobs_since`,
//! used after a store was restored from a backup).
//!
//! A listing takes neither the launch lock nor any key's lock: a held key lock would make
//! another process's launch of that key answer "outcome unknown", and waiting on the launch
//! lock would put a listing behind every launch. Nothing here needs them: a record is
//! written atomically once its runner runs, and a directory with a record is never launched
//! into again, so a job whose record is being written is simply missed or listed.

use std::fs;

use slipway_domain::Timestamp;
use slipway_provider::{ListedJob, ProviderError};

use crate::jobdir::JobRecord;
use crate::{Inner, naming};

impl Inner {
    /// The recorded jobs launched at or after `since` (all with `None`), oldest first.
    /// Blocking.
    pub(crate) fn jobs_since(&self, since: Option<Timestamp>) -> Result<Vec<ListedJob>, ProviderError> {
        let entries = fs::read_dir(&self.work_dir).map_err(|e| {
            // An empty answer would claim nothing ran, and a restore would relaunch it.
            ProviderError::Transient(format!("cannot list the ansible work dir {}: {e}", self.work_dir.display()))
        })?;
        let mut found: Vec<(Option<Timestamp>, String, JobRecord)> = Vec::new();
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let Some(name) = entry.file_name().to_str().filter(|n| naming::is_job_dir_name(n)).map(str::to_owned)
            else {
                continue;
            };
            let job = self.job_dir(&name);
            let record = match job.read_record() {
                Ok(Some(record)) => record,
                // A launch not yet recorded, or not a job directory at all.
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(dir = %job.dir.display(), error = %e, "unreadable job.json; not listed");
                    continue;
                }
            };
            // A handle names the directory of its key: a record that does not name its own
            // directory (copied, moved) would list a job `find` of that key never returns.
            if naming::job_dir_name(record.key.as_str()).as_deref() != Some(name.as_str()) {
                tracing::warn!(dir = %job.dir.display(), key = %record.key, "job.json of another key; not listed");
                continue;
            }
            // Unparsable (never written so): kept whatever `since` says, since a job left out
            // of a listing after a restore would be launched a second time.
            let launched_at = Timestamp::parse_rfc3339(&record.launched_at);
            if let (Some(since), Some(at)) = (since, launched_at)
                && at < since
            {
                continue;
            }
            // Without its resource the job cannot be matched to anything; `find` by its key
            // still returns it.
            if record.resource_id.is_empty() {
                tracing::warn!(dir = %job.dir.display(), key = %record.key,
                    "a job recorded by an earlier version does not say its resource; not listed");
                continue;
            }
            found.push((launched_at, name, record));
        }
        found.sort_by(|a, b| (a.0, a.2.key.as_str()).cmp(&(b.0, b.2.key.as_str())));
        Ok(found
            .into_iter()
            .map(|(launched_at, name, record)| {
                let job = self.launched(&name, &self.job_dir(&name), record.playbook);
                ListedJob { key: record.key, resource_id: record.resource_id, action: record.action, job, launched_at }
            })
            .collect())
    }
}
