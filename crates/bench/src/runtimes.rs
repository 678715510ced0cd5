//! The runtimes a scenario's parts run on, apart: an in-process Slipway on one of its own
//! (threads `slipway-rt`), the AWX-API simulator on another (one thread, `aap-sim-rt`), and
//! the client on the scenario's. Apart, each one's CPU is read by thread name, and the
//! simulator's work (ten thousand jobs ticking, status lists of hundreds of jobs) does not
//! queue on the worker threads that time the client's requests.

use std::collections::BTreeMap;
use std::time::Duration;

use aap_sim::{Sim, SimConfig, SimHandle, SimWebhook};

use crate::harness::HOOK_TOKEN;

/// The name of every thread of an in-process Slipway's runtime; the store's own threads are
/// `slipway-sqlite-*`. [`crate::harness::slipway_cpu_seconds`] adds up the threads named
/// `slipway-`.
const SLIPWAY_THREADS: &str = "slipway-rt";
const SIM_THREADS: &str = "aap-sim-rt";

/// A tokio runtime of one part's own, shut down without blocking when dropped (which may
/// happen inside the scenario's runtime).
pub struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl OwnRuntime {
    /// Slipway's: as many workers as cores, like `slipway serve`.
    pub fn slipway() -> Result<OwnRuntime, String> {
        OwnRuntime::new(SLIPWAY_THREADS, None)
    }

    /// The simulator's: one worker, so it takes at most a core from the rest, as a real
    /// controller elsewhere would take none.
    fn simulator() -> Result<OwnRuntime, String> {
        OwnRuntime::new(SIM_THREADS, Some(1))
    }

    fn new(name: &str, workers: Option<usize>) -> Result<OwnRuntime, String> {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        if let Some(n) = workers {
            builder.worker_threads(n);
        }
        let runtime = builder
            .thread_name(name)
            // Blocking threads that exit take their CPU time out of /proc/self/task.
            .thread_keep_alive(Duration::from_secs(24 * 3600))
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(OwnRuntime(Some(runtime)))
    }

    /// Runs `work` on this runtime (where whatever it spawns stays) and awaits it.
    pub async fn run<T: Send + 'static>(&self, work: impl Future<Output = T> + Send + 'static) -> Result<T, String> {
        let runtime = self.0.as_ref().ok_or("the runtime is gone")?;
        runtime.spawn(work).await.map_err(|e| e.to_string())
    }
}

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// The AWX-API simulator, serving from a runtime of its own.
pub struct SimServer {
    sim: Sim,
    runtime: OwnRuntime,
}

impl SimServer {
    pub fn base_url(&self) -> String {
        self.sim.base_url()
    }

    pub fn handle(&self) -> SimHandle {
        self.sim.handle()
    }

    pub async fn shutdown(self) {
        let SimServer { sim, runtime } = self;
        let _ = runtime.run(sim.shutdown()).await;
    }
}

/// The AWX-API simulator with jobs of `job_seconds` (properties' `delaySeconds` overrides
/// it per resource), sending job notifications to `webhook_to`'s hook endpoint if given.
pub async fn start_sim(job_seconds: f64, tick_ms: u64, webhook_to: Option<&str>) -> Result<SimServer, String> {
    let mut config = SimConfig { tick_ms, ..SimConfig::default() };
    for t in &mut config.job_templates {
        t.duration_seconds = job_seconds;
        t.pending_seconds = 0.0;
    }
    if let Some(base) = webhook_to {
        config.notifications.push(SimWebhook {
            url: format!("{base}/hooks/aap"),
            headers: BTreeMap::from([("X-Slipway-Token".to_string(), HOOK_TOKEN.to_string())]),
            ..SimWebhook::default()
        });
    }
    let runtime = OwnRuntime::simulator()?;
    let sim = runtime.run(Sim::start("127.0.0.1:0", config)).await?.map_err(|e| format!("aap-sim: {e}"))?;
    Ok(SimServer { sim, runtime })
}

/// The simulator's lifecycle tick for jobs of `job_seconds`. It checks every job on every
/// tick: with ten thousand long jobs a 10 ms tick costs it a tenth of a core, taken from
/// Slipway on this 2-core machine (a real AAP runs elsewhere). Zero-duration jobs get 10 ms,
/// longer ones 50 ms; finish times are stamped at the tick either way, so finish-to-visible
/// is measured from when the job really became visible as finished.
pub fn sim_tick_ms(job_seconds: f64) -> u64 {
    if job_seconds >= 1.0 { 50 } else { 10 }
}
