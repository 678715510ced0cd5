//! AWX's vocabulary, which every other module speaks: the version the simulator answers as,
//! job statuses, the two kinds of job, and users as the API shows them. Depends on nothing
//! else in the crate, so the configuration can check an outcome without the job lifecycle.

pub const AWX_VERSION: &str = "24.6.1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    New,
    Pending,
    Waiting,
    Running,
    Successful,
    Failed,
    Error,
    Canceled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::New => "new",
            Status::Pending => "pending",
            Status::Waiting => "waiting",
            Status::Running => "running",
            Status::Successful => "successful",
            Status::Failed => "failed",
            Status::Error => "error",
            Status::Canceled => "canceled",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "new" => Status::New,
            "pending" => Status::Pending,
            "waiting" => Status::Waiting,
            "running" => Status::Running,
            other => return Status::parse_outcome(other),
        })
    }

    /// A terminal status, as templates and per-launch overrides may name it.
    pub fn parse_outcome(s: &str) -> Option<Status> {
        Some(match s {
            "successful" => Status::Successful,
            "failed" => Status::Failed,
            "error" => Status::Error,
            "canceled" => Status::Canceled,
            _ => return None,
        })
    }

    /// AWX `CAN_CANCEL` / `ACTIVE_STATES`.
    pub fn is_active(self) -> bool {
        matches!(self, Status::New | Status::Pending | Status::Waiting | Status::Running)
    }

    /// `UnifiedJob.save`: `failed = status in ('failed', 'error', 'canceled')`.
    pub fn is_failed(self) -> bool {
        matches!(self, Status::Failed | Status::Error | Status::Canceled)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Job,
    WorkflowJob,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Job => "job",
            Kind::WorkflowJob => "workflow_job",
        }
    }
    pub fn collection(self) -> &'static str {
        match self {
            Kind::Job => "jobs",
            Kind::WorkflowJob => "workflow_jobs",
        }
    }
    pub fn template_collection(self) -> &'static str {
        match self {
            Kind::Job => "job_templates",
            Kind::WorkflowJob => "workflow_job_templates",
        }
    }
    pub fn template_type(self) -> &'static str {
        match self {
            Kind::Job => "job_template",
            Kind::WorkflowJob => "workflow_job_template",
        }
    }
}

/// A user as the API shows it (`launched_by`, `created_by`, `/me/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: u64,
    pub username: String,
}
