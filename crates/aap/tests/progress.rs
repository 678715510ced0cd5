//! A running job's progress against the simulator: the count of its task-start events and
//! the newest task, read at most once per `progress_every` and within the provider's budget
//! of reads, and once more when a followed job succeeds.
//!
//! On paused time: the simulator's jobs, its stamps and the provider's read budget all run on
//! tokio's clock, and loopback HTTP is ready at once, so the clock moves only while every side
//! waits for a timer, and the budgets hold however loaded the machine is.

use std::time::Duration;

use aap_sim::SimTemplate;
use slipway_domain::JobState;
use slipway_provider::Provider;
use support::*;

#[allow(dead_code)]
mod support;

const TASK_STARTS: &str = "GET /api/v2/jobs/{id}/job_events/";

/// A template whose jobs run four simulated tasks over two seconds.
fn four_tasks() -> SimTemplate {
    SimTemplate { duration_seconds: 2.0, tasks: 4, ..template(1, "slipway-create-subnet") }
}

#[tokio::test(start_paused = true)]
async fn a_long_job_reports_its_tasks_as_they_start_and_its_final_count() {
    let sim = start(config(vec![four_tasks()], vec![])).await;
    // A budget that never runs out: this test is about what is read.
    let p =
        provider(slipway_aap::AapOptions { progress_reads_per_second: 1000.0, ..aap_options(&sim, Duration::ZERO) });
    let l = p.launch(&create("Subnet", "op-p:1")).await.unwrap();
    let mut seen: Vec<(u32, String)> = Vec::new();
    let mut polls = 0;
    let last = loop {
        let s = status1(&p, &l.handle).await.unwrap();
        if let Some(progress) = &s.progress {
            assert_eq!(progress.expected_tasks, None, "AWX has no task list to count");
            let reading = (progress.tasks_started, progress.current_task.clone());
            if seen.last() != Some(&reading) {
                seen.push(reading);
            }
        }
        if s.state.is_terminal() {
            break s;
        }
        polls += 1;
        assert!(polls < 600, "the job did not end within 30 s: {seen:?}");
        // The client's poll cadence, which the scenario is about: not a wait for a condition.
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(last.state, JobState::Succeeded);
    // Read as the tasks started, never going back, ending with the record task: 4 + 1.
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");
    assert!(seen.iter().any(|(n, t)| *n == 2 && t == "simulated task 2 of 4"), "{seen:?}");
    assert_eq!(last.progress.map(|p| p.tasks_started), Some(5));
    sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn progress_is_read_at_most_once_per_interval_and_not_for_short_jobs() {
    let short = SimTemplate { duration_seconds: 0.2, ..template(2, "slipway-create-virtual-network") };
    let sim = start(config(vec![four_tasks(), short], vec![])).await;
    let p = provider(aap_options(&sim, Duration::from_secs(1)));
    let l = p.launch(&create("VirtualNetwork", "op-p:2")).await.unwrap();
    let s = terminal(&p, &l.handle).await;
    assert_eq!((s.state, s.progress), (JobState::Succeeded, None));
    assert_eq!(count(&sim, TASK_STARTS), 0, "a job shorter than the interval: {:?}", requests(&sim));

    // A two-second job polled every 50 ms: read once it has run a second, at most once a
    // second after, and once at its end.
    let l = p.launch(&create("Subnet", "op-p:3")).await.unwrap();
    let mut polls = 0;
    while !status1(&p, &l.handle).await.unwrap().state.is_terminal() {
        polls += 1;
        // The client's poll cadence, which the scenario is about: not a wait for a condition.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reads = count(&sim, TASK_STARTS);
    assert!(polls >= 20 && (1..=3).contains(&reads), "{polls} polls, {reads} reads");
    sim.shutdown().await;
}

/// Reads cannot be batched, so the provider makes at most `progress_reads_per_second` in
/// all, however many jobs are due: three jobs due at every poll share one read a second.
#[tokio::test(start_paused = true)]
async fn every_job_shares_one_budget_of_reads() {
    let sim = start(config(vec![four_tasks()], vec![])).await;
    let p = provider(slipway_aap::AapOptions { progress_reads_per_second: 1.0, ..aap_options(&sim, Duration::ZERO) });
    let mut handles = Vec::new();
    for key in ["op-b:1", "op-b:2", "op-b:3"] {
        handles.push(p.launch(&create("Subnet", key)).await.unwrap().handle);
    }
    let started = tokio::time::Instant::now();
    let mut polls = 0;
    loop {
        let statuses = p.status(&handles).await;
        polls += 1;
        if statuses.iter().all(|s| s.as_ref().unwrap().state.is_terminal()) {
            break;
        }
        // The client's poll cadence, which the scenario is about: not a wait for a condition.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (reads, seconds) = (count(&sim, TASK_STARTS), started.elapsed().as_secs_f64());
    // A burst of one, then one a second.
    assert!(reads >= 1 && reads as f64 <= 1.0 + seconds.ceil(), "{reads} reads in {seconds:.1} s, {polls} polls");
    sim.shutdown().await;
}

fn aap_options(sim: &aap_sim::Sim, progress_every: Duration) -> slipway_aap::AapOptions {
    slipway_aap::AapOptions { progress_every, ..options(sim) }
}
