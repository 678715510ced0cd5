//! `GET …/operationStatuses/{id}/logs`: what the operation's job printed (a Slipway
//! extension, docs/arm-contract.md#job-output). Plain text by default (`?tail=N`: the last
//! N lines), or with `?follow=true` Server-Sent Events: one `data` event per line as the job
//! prints it, then one `end` event whose data is the job's final state. The output is read
//! from the job's provider through [`crate::JobReader`]: a local job's runner output,
//! an AAP job's `stdout`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use slipway_domain::echo::echo;
use slipway_domain::ids::{OperationId, SubscriptionId};
use slipway_domain::{Job, JobId, JobState, Operation, ResourceKey};
use slipway_store::Store;

use crate::error::ArmError;
use crate::handlers::{Ctx, bool_param};
use crate::{ApiState, JobReader, JobRef, OutputError};

/// Most lines `?tail=` keeps.
const MAX_TAIL: usize = 10_000;
/// Most output a plain answer carries; the rest is cut, and the answer says so.
const MAX_PLAIN_BYTES: u64 = 16 * 1024 * 1024;
/// How often a follower looks for new output and for the job's end.
const FOLLOW_POLL: Duration = Duration::from_millis(250);
/// The header naming the job whose output an answer carries.
const JOB_ID_HEADER: &str = "x-slipway-job-id";

pub(crate) async fn job_logs(state: &ApiState, ctx: &Ctx, op: &Operation) -> Result<Response, ArmError> {
    let tail = match ctx.query.get("tail") {
        None => None,
        Some(v) => Some(v.parse::<usize>().ok().filter(|n| (1..=MAX_TAIL).contains(n)).ok_or_else(|| {
            ArmError::bad_request(
                "InvalidParameter",
                format!("tail must be a number of lines from 1 to {MAX_TAIL}, not '{}'.", echo(v, 16)),
            )
            .with_target("tail")
        })?),
    };
    let follow = bool_param(ctx, "follow")?;
    let wanted = ctx.query.get("job").cloned();
    let res = state.store.get_resource(&op.resource_key).await?.ok_or_else(|| {
        ArmError::not_found("JobOutputNotFound", "The operation's resource is gone, and its jobs' output with it.")
    })?;
    let job = pick_job(&res.jobs, &op.id, wanted.as_deref());
    if let Some(wanted) = &wanted
        && job.is_none()
    {
        return Err(ArmError::not_found(
            "JobNotFound",
            format!("The operation ran no job '{}'; its jobs are listed at {{resourceId}}/jobs.", echo(wanted, 40)),
        )
        .with_target("job"));
    }
    if follow {
        let follower = Follower {
            store: state.store.clone(),
            reader: state.jobs.clone(),
            stopping: state.stopping.clone(),
            clock: state.clock.clone(),
            key: op.resource_key.clone(),
            operation: op.id.clone(),
            wanted,
            followed: None,
            offset: 0,
            partial: String::new(),
            queue: VecDeque::new(),
            done: false,
        };
        let stream = futures_util::stream::unfold(follower, |mut f| async move {
            let event = f.next().await?;
            Some((Ok::<Event, Infallible>(event), f))
        });
        return Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response());
    }
    let Some((job, _)) = job else { return Ok(text_response(String::new(), None)) };
    let mut text = String::new();
    let mut offset = 0;
    loop {
        let chunk = read(state.jobs.as_ref(), &job, offset).await?;
        if chunk.next_offset == offset {
            break;
        }
        text.push_str(&chunk.text);
        offset = chunk.next_offset;
        if offset >= MAX_PLAIN_BYTES {
            text.push_str("\n[output cut: more than 16 MiB; ?tail=N shows the end only when it is shorter]\n");
            break;
        }
    }
    if let Some(n) = tail {
        let lines: Vec<&str> = text.lines().collect();
        let kept = lines[lines.len().saturating_sub(n)..].join("\n");
        text = if kept.is_empty() { kept } else { kept + "\n" };
    }
    Ok(text_response(text, Some(job.job_id.as_str())))
}

/// The job the request names (`?job=`), else the operation's latest launched job, with its
/// reference at its provider.
fn pick_job(jobs: &[Job], operation: &OperationId, wanted: Option<&str>) -> Option<(JobRef, JobState)> {
    let mut of_op = jobs
        .iter()
        .filter(|j| j.operation_id.as_ref() == Some(operation))
        .filter_map(|j| Some((JobRef::of(j)?, j.state)));
    match wanted {
        Some(id) => of_op.find(|(r, _)| r.job_id.as_str() == id),
        None => of_op.next_back(),
    }
}

fn text_response(text: String, job_id: Option<&str>) -> Response {
    let mut resp = (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response();
    if let Some(v) = job_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        resp.headers_mut().insert(JOB_ID_HEADER, v);
    }
    resp
}

/// One read; a provider's own words (which may name server paths) stay in the server's log.
async fn read(reader: &dyn JobReader, job: &JobRef, offset: u64) -> Result<crate::OutputChunk, ArmError> {
    reader.output(job, offset).await.map_err(|e| match e {
        OutputError::Gone => {
            ArmError::not_found("JobOutputNotFound", format!("The output of job '{}' is no longer kept.", job.job_id))
        }
        OutputError::Unavailable(why) => {
            tracing::warn!(job = %job.job_id, provider = %job.provider, error = %why, "reading a job's output failed");
            ArmError::unavailable(format!("The output of job '{}' cannot be read now.", job.job_id))
        }
    })
}

/// A `?follow=true` answer in progress.
struct Follower {
    store: Arc<dyn Store>,
    reader: Arc<dyn JobReader>,
    stopping: tokio::sync::watch::Receiver<bool>,
    clock: Arc<dyn slipway_domain::time::Clock>,
    key: ResourceKey,
    operation: OperationId,
    wanted: Option<String>,
    /// The job being followed, once there is one: a retry's job is not switched to.
    followed: Option<JobId>,
    offset: u64,
    /// The start of a line the job has not finished printing.
    partial: String,
    queue: VecDeque<Event>,
    done: bool,
}

impl Follower {
    /// The next event, or `None` once the `end` event went out.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if self.done {
                return None;
            }
            self.step().await;
            if self.queue.is_empty() && !self.done {
                let mut stopping = self.stopping.clone();
                tokio::select! {
                    _ = tokio::time::sleep(FOLLOW_POLL) => {}
                    _ = stopping.wait_for(|s| *s) => self.finish("ServerShuttingDown"),
                }
            }
        }
    }

    fn finish(&mut self, why: &str) {
        if !self.partial.is_empty() {
            self.queue.push_back(Event::default().data(std::mem::take(&mut self.partial)));
        }
        self.queue.push_back(Event::default().event("end").data(why));
        self.done = true;
    }

    /// Reads the job's state, then its new output: a job seen ended has printed everything,
    /// so what follows that read is the whole rest, and the answer ends.
    async fn step(&mut self) {
        let res = match self.store.get_resource(&self.key).await {
            Ok(Some(res)) => res,
            Ok(None) => return self.finish("ResourceGone"),
            Err(e) => {
                tracing::warn!(error = %e, "following a job's output: reading its resource failed");
                return;
            }
        };
        let following = self.followed.as_ref().map(JobId::as_str).or(self.wanted.as_deref());
        let Some((job, job_state)) = pick_job(&res.jobs, &self.operation, following) else {
            let subscription = SubscriptionId::new(&res.id.subscription);
            let operation = self.store.get_operation(&subscription, &self.operation, self.clock.now()).await;
            let operation_ended = operation.is_ok_and(|op| op.is_none_or(|o| o.is_terminal()));
            if operation_ended {
                self.finish("NoJob");
            }
            return;
        };
        self.followed = Some(job.job_id.clone());
        let ended = job_state.is_terminal();
        loop {
            match read(self.reader.as_ref(), &job, self.offset).await {
                Ok(chunk) if chunk.next_offset > self.offset => {
                    self.offset = chunk.next_offset;
                    self.partial.push_str(&chunk.text);
                    while let Some(end) = self.partial.find('\n') {
                        let line: String = self.partial.drain(..=end).collect();
                        self.queue.push_back(Event::default().data(line.trim_end_matches(['\n', '\r'])));
                    }
                    if !ended {
                        return;
                    }
                }
                Ok(_) => break,
                Err(e) => {
                    if e.status == StatusCode::NOT_FOUND {
                        return self.finish("OutputGone");
                    }
                    return;
                }
            }
        }
        if ended {
            self.finish(job_state.as_str());
        }
    }
}
