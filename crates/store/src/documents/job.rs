//! Version 1 of a job entry of a resource body (`jobs` and `duplicateJobs`), with the OSAC
//! field names (`jobID`, `type`).

use serde::{Deserialize, Serialize};
use slipway_domain::config_version::ConfigVersion;
use slipway_domain::job::{Job, JobState, JobType, Stop};
use slipway_domain::names::JobId;
use slipway_domain::time::Timestamp;

use super::operation::RerunDocument;
use super::{DocumentError, operation_id_opt};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct JobDocument {
    /// The provider's job id; empty until it has one (`Job::job_id` is none), and written even then.
    #[serde(rename = "jobID")]
    job_id: String,
    #[serde(rename = "type")]
    job_type: JobTypeDocument,
    #[serde(rename = "state")]
    state: JobStateDocument,
    #[serde(rename = "message", default, skip_serializing_if = "String::is_empty")]
    message: String,
    /// Milliseconds since the Unix epoch, as every time below.
    #[serde(rename = "timestamp")]
    timestamp: i64,
    /// Empty for a legacy job (recorded before config versions existed), then left out.
    #[serde(rename = "configVersion", default, skip_serializing_if = "String::is_empty")]
    config_version: String,
    #[serde(rename = "blockDeletionOnFailure", default, skip_serializing_if = "is_false")]
    block_deletion_on_failure: bool,
    #[serde(rename = "idempotencyKey", default, skip_serializing_if = "String::is_empty")]
    idempotency_key: String,
    #[serde(rename = "provider", default, skip_serializing_if = "String::is_empty")]
    provider: String,
    #[serde(rename = "template", default, skip_serializing_if = "String::is_empty")]
    template: String,
    /// Canonical operation id (lowercase UUID).
    #[serde(rename = "operationId", default, skip_serializing_if = "Option::is_none")]
    operation_id: Option<String>,
    /// Provider-specific, stored as given; `null` is left out.
    #[serde(rename = "handle", default, skip_serializing_if = "serde_json::Value::is_null")]
    handle: serde_json::Value,
    #[serde(rename = "errorDetails", default, skip_serializing_if = "String::is_empty")]
    error_details: String,
    #[serde(rename = "cancelRequestedAt", default, skip_serializing_if = "Option::is_none")]
    cancel_requested_at: Option<i64>,
    #[serde(rename = "launchAttempts", default, skip_serializing_if = "is_zero")]
    launch_attempts: u32,
    #[serde(rename = "absentConfirmed", default, skip_serializing_if = "is_false")]
    absent_confirmed: bool,
    #[serde(rename = "launchSentAt", default, skip_serializing_if = "Option::is_none")]
    launch_sent_at: Option<i64>,
    #[serde(rename = "launchSends", default, skip_serializing_if = "is_zero")]
    launch_sends: u32,
    #[serde(rename = "uniqueConfirmed", default, skip_serializing_if = "is_false")]
    unique_confirmed: bool,
    /// An action job's action name.
    #[serde(rename = "action", default, skip_serializing_if = "String::is_empty")]
    action: String,
    #[serde(rename = "endedAt", default, skip_serializing_if = "Option::is_none")]
    ended_at: Option<i64>,
    #[serde(rename = "killRequested", default, skip_serializing_if = "is_false")]
    kill_requested: bool,
    /// Launched for an update that ran the unchanged spec again: why.
    #[serde(rename = "rerun", default, skip_serializing_if = "Option::is_none")]
    rerun: Option<RerunDocument>,
    /// Progress, added without a version bump: a reader that does not know these fields
    /// loses only what a job's next poll reads again (and a finished job's task count, which
    /// only estimates a later job's total).
    #[serde(rename = "tasksStarted", default, skip_serializing_if = "is_zero")]
    tasks_started: u32,
    #[serde(rename = "currentTask", default, skip_serializing_if = "String::is_empty")]
    current_task: String,
    #[serde(rename = "expectedTasks", default, skip_serializing_if = "Option::is_none")]
    expected_tasks: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum JobTypeDocument {
    #[serde(rename = "provision")]
    Provision,
    #[serde(rename = "deprovision")]
    Deprovision,
    #[serde(rename = "action")]
    Action,
    #[serde(rename = "preflight")]
    Preflight,
    #[serde(rename = "check")]
    Check,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum JobStateDocument {
    #[serde(rename = "Launching")]
    Launching,
    #[serde(rename = "Pending")]
    Pending,
    #[serde(rename = "Waiting")]
    Waiting,
    #[serde(rename = "Running")]
    Running,
    #[serde(rename = "Unknown")]
    Unknown,
    #[serde(rename = "Succeeded")]
    Succeeded,
    #[serde(rename = "Failed")]
    Failed,
    #[serde(rename = "Canceled")]
    Canceled,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl From<&Job> for JobDocument {
    fn from(job: &Job) -> Self {
        let Job {
            job_id,
            job_type,
            state,
            message,
            timestamp,
            config_version,
            block_deletion_on_failure,
            idempotency_key,
            provider,
            template,
            operation_id,
            handle,
            error_details,
            stop,
            launch_attempts,
            absent_confirmed,
            launch_sent_at,
            launch_sends,
            unique_confirmed,
            action,
            ended_at,
            rerun,
            tasks_started,
            current_task,
            expected_tasks,
        } = job;
        JobDocument {
            job_id: job_id.as_ref().map(JobId::to_string).unwrap_or_default(),
            job_type: (*job_type).into(),
            state: (*state).into(),
            message: message.clone(),
            timestamp: timestamp.as_millis(),
            config_version: config_version.as_str().to_string(),
            block_deletion_on_failure: *block_deletion_on_failure,
            idempotency_key: idempotency_key.to_string(),
            provider: provider.to_string(),
            template: template.clone(),
            operation_id: operation_id.as_ref().map(|id| id.as_str().to_string()),
            handle: handle.clone(),
            error_details: error_details.clone(),
            cancel_requested_at: stop.and_then(Stop::asked_at).map(Timestamp::as_millis),
            launch_attempts: *launch_attempts,
            absent_confirmed: *absent_confirmed,
            launch_sent_at: launch_sent_at.map(Timestamp::as_millis),
            launch_sends: *launch_sends,
            unique_confirmed: *unique_confirmed,
            action: action.clone(),
            ended_at: ended_at.map(Timestamp::as_millis),
            kill_requested: stop.is_some_and(Stop::is_kill),
            rerun: rerun.map(RerunDocument::from),
            tasks_started: *tasks_started,
            current_task: current_task.clone(),
            expected_tasks: *expected_tasks,
        }
    }
}

impl TryFrom<JobDocument> for Job {
    type Error = DocumentError;

    fn try_from(doc: JobDocument) -> Result<Self, DocumentError> {
        let JobDocument {
            job_id,
            job_type,
            state,
            message,
            timestamp,
            config_version,
            block_deletion_on_failure,
            idempotency_key,
            provider,
            template,
            operation_id,
            handle,
            error_details,
            cancel_requested_at,
            launch_attempts,
            absent_confirmed,
            launch_sent_at,
            launch_sends,
            unique_confirmed,
            action,
            ended_at,
            kill_requested,
            rerun,
            tasks_started,
            current_task,
            expected_tasks,
        } = doc;
        Ok(Job {
            operation_id: operation_id_opt(operation_id, &format!("job {job_id:?}: operationId"))?,
            job_id: (!job_id.is_empty()).then(|| JobId::from(job_id)),
            job_type: job_type.into(),
            state: state.into(),
            message,
            timestamp: Timestamp(timestamp),
            config_version: ConfigVersion::new(config_version),
            block_deletion_on_failure,
            idempotency_key: idempotency_key.into(),
            provider: provider.into(),
            template,
            handle,
            error_details,
            stop: match (kill_requested, cancel_requested_at.map(Timestamp)) {
                (true, asked_at) => Some(Stop::Kill { asked_at }),
                (false, Some(asked_at)) => Some(Stop::Cancel { asked_at }),
                (false, None) => None,
            },
            launch_attempts,
            absent_confirmed,
            launch_sent_at: launch_sent_at.map(Timestamp),
            launch_sends,
            unique_confirmed,
            action,
            ended_at: ended_at.map(Timestamp),
            rerun: rerun.map(Into::into),
            tasks_started,
            current_task,
            expected_tasks,
        })
    }
}

impl From<JobType> for JobTypeDocument {
    fn from(t: JobType) -> Self {
        match t {
            JobType::Provision => JobTypeDocument::Provision,
            JobType::Deprovision => JobTypeDocument::Deprovision,
            JobType::Action => JobTypeDocument::Action,
            JobType::Preflight => JobTypeDocument::Preflight,
            JobType::Check => JobTypeDocument::Check,
        }
    }
}

impl From<JobTypeDocument> for JobType {
    fn from(t: JobTypeDocument) -> Self {
        match t {
            JobTypeDocument::Provision => JobType::Provision,
            JobTypeDocument::Deprovision => JobType::Deprovision,
            JobTypeDocument::Action => JobType::Action,
            JobTypeDocument::Preflight => JobType::Preflight,
            JobTypeDocument::Check => JobType::Check,
        }
    }
}

impl From<JobState> for JobStateDocument {
    fn from(s: JobState) -> Self {
        match s {
            JobState::Launching => JobStateDocument::Launching,
            JobState::Pending => JobStateDocument::Pending,
            JobState::Waiting => JobStateDocument::Waiting,
            JobState::Running => JobStateDocument::Running,
            JobState::Unknown => JobStateDocument::Unknown,
            JobState::Succeeded => JobStateDocument::Succeeded,
            JobState::Failed => JobStateDocument::Failed,
            JobState::Canceled => JobStateDocument::Canceled,
        }
    }
}

impl From<JobStateDocument> for JobState {
    fn from(s: JobStateDocument) -> Self {
        match s {
            JobStateDocument::Launching => JobState::Launching,
            JobStateDocument::Pending => JobState::Pending,
            JobStateDocument::Waiting => JobState::Waiting,
            JobStateDocument::Running => JobState::Running,
            JobStateDocument::Unknown => JobState::Unknown,
            JobStateDocument::Succeeded => JobState::Succeeded,
            JobStateDocument::Failed => JobState::Failed,
            JobStateDocument::Canceled => JobState::Canceled,
        }
    }
}
