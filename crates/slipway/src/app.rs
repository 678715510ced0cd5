//! Runs a [`Plan`]: opens the store, builds the providers, binds the listener and spawns the
//! API, engine and notifier, until shutdown. Every option was built and checked by the plan;
//! what can still fail here is I/O.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use slipway_api::{ApiState, Authenticator};
use slipway_domain::time::Clock;
use slipway_engine::{Engine, Providers};
use slipway_notify::{Notifier, NotifierOptions, StatusDocument};
use slipway_store::Store;
use slipway_store::entries::{EntryKind, RESTORE_PENDING};
use slipway_store::postgres::PostgresStore;
use slipway_store::sqlite::SqliteStore;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::{Config, exposure};
use crate::plan::{Plan, Problem, ProviderPlan, StorePlan};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// What building the plan found wrong, one problem a line.
    #[error("{}", lines(.0))]
    Plan(Vec<Problem>),
    #[error("{0}")]
    Config(String),
    #[error("store: {0}")]
    Store(#[from] slipway_store::StoreError),
    #[error("listening on {0}: {1}")]
    Listen(String, std::io::Error),
    #[error("http server: {0}")]
    Serve(std::io::Error),
    #[error("engine: {0}")]
    Engine(#[from] slipway_engine::EngineError),
}

fn lines(problems: &[Problem]) -> String {
    problems.iter().map(Problem::as_str).collect::<Vec<_>>().join("\n")
}

/// A running Slipway: the bound address and a way to stop it.
pub struct App {
    pub addr: SocketAddr,
    store: Arc<dyn Store>,
    stop: watch::Sender<bool>,
    tasks: tokio::task::JoinSet<Result<(), AppError>>,
}

impl App {
    /// Plans `config` and runs the plan; returns once the listener is bound.
    pub async fn start(config: Config, clock: Arc<dyn Clock>) -> Result<App, AppError> {
        let plan = Plan::from_config(&config).map_err(AppError::Plan)?;
        App::start_plan(plan, clock).await
    }

    /// Starts everything `plan` describes; returns once the listener is bound.
    pub async fn start_plan(plan: Plan, clock: Arc<dyn Clock>) -> Result<App, AppError> {
        let Plan {
            listen,
            store,
            engine: engine_options,
            api,
            listener,
            edge,
            auth,
            console_sign_in,
            access,
            rate_limits,
            keyring: secrets,
            notifier: notifier_options,
            providers,
            hooks,
            types,
            policies,
            quotas,
            admission_policies,
            activity_sink,
            warnings,
        } = plan;
        let store = open_store(&store).await?;
        refuse_unreconciled(store.as_ref()).await?;
        let type_keys: Vec<String> =
            types.all().map(|t| slipway_domain::TypeKey::new(&t.namespace, &t.type_name).to_string()).collect();
        let provider_names: Vec<String> = providers.iter().map(|p| p.name().to_string()).collect();
        let metrics = slipway_metrics::Metrics::new(store.metrics()).with_series(&type_keys, &provider_names);
        let providers = build_providers(&providers, &metrics.providers)?;
        let hook_providers = providers.clone();
        let jobs = Arc::new(ProviderJobs(providers.clone()));
        let mut engine = Engine::new(store.clone(), providers, policies, clock.clone(), engine_options)
            .with_metrics(metrics.engine.clone());
        if let Some(k) = &secrets {
            engine = engine.with_secrets(k.clone());
        }
        let handle = engine.handle();
        let notifier_options = NotifierOptions { metrics: metrics.notifier.clone(), ..notifier_options };
        let location = api.location.clone();
        let document: StatusDocument = Arc::new(move |op| slipway_api::operation_status_document(op, &location));
        let notifier = Notifier::new(store.clone(), clock.clone(), handle.outbox_signal(), notifier_options, document)
            .map_err(|e| AppError::Config(format!("notification client: {e}")))?;
        let wake = handle.clone();
        let hinted = handle.clone();
        let authenticated = auth.is_some();
        let auth = match auth {
            Some(options) => {
                Some(Arc::new(Authenticator::new(options, store.clone(), clock.clone()).map_err(AppError::Config)?))
            }
            None => None,
        };
        if auth.is_some()
            && let Err(e) = slipway_api::report_noncanonical_assignments(store.as_ref()).await
        {
            tracing::warn!(error = %e.body.message, "could not check the stored role assignments' scopes");
        }
        let (stop, stopped) = watch::channel(false);
        let (recorder, record_activity) = slipway_api::ActivityRecorder::new(store.clone());
        let state = Arc::new(ApiState {
            store: store.clone(),
            types,
            quotas: Arc::new(quotas),
            policies: Arc::new(admission_policies),
            auth,
            edge,
            access,
            rate_limits,
            secrets,
            clock,
            options: api,
            metrics,
            jobs,
            provider_readiness: {
                let engine = handle.clone();
                Arc::new(move || engine.provider_readiness())
            },
            openapi: Default::default(),
            assignment_cache: Default::default(),
            stopping: stopped.clone(),
            activity: recorder,
            on_accept: Arc::new(move || wake.wake()),
            hooks,
            on_job_notification: Arc::new(move |name, body| {
                let provider = hook_providers.get(name).ok_or_else(|| format!("no provider named '{name}'"))?;
                Ok(provider.job_from_notification(body)?.is_some_and(|job| hinted.job_changed(name, &job)))
            }),
        });
        let tcp = TcpListener::bind(&listen).await.map_err(|e| AppError::Listen(listen.clone(), e))?;
        let addr = tcp.local_addr().map_err(|e| AppError::Listen(listen.clone(), e))?;
        exposure(authenticated, addr).map_err(AppError::Config)?;
        if !authenticated {
            tracing::warn!(%addr, "authentication is off ([auth] not configured): every local caller may do anything; serving on loopback only");
        }

        let until_stopped = move || {
            let mut rx = stopped.clone();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(async move {
            record_activity.await;
            Ok(())
        });
        let api_router = slipway_api::router(state.clone());
        let console = slipway_console::ConsoleOptions {
            types: state.types.clone(),
            location: state.options.location.clone(),
            authentication: authenticated,
            secure_cookies: state.edge.tls,
            public_base_url: state.edge.public_base_url.clone(),
            oidc: console_sign_in,
        };
        let router = api_router.clone().merge(slipway_console::router(api_router, console));
        let api_stop = until_stopped();
        tasks.spawn(
            async move { slipway_listener::serve(tcp, router, listener, api_stop).await.map_err(AppError::Serve) },
        );
        let engine_stop = until_stopped();
        tasks.spawn(async move { engine.run(engine_stop).await.map_err(AppError::from) });
        let notifier_stop = until_stopped();
        tasks.spawn(async move {
            notifier.run(notifier_stop).await;
            Ok(())
        });
        if let Some(target) = activity_sink {
            let sink = crate::activity_sink::ActivitySink::open(target, store.clone(), state.clock.clone())
                .await
                .map_err(|e| AppError::Config(format!("activity.sink: {e}")))?;
            let sink_stop = until_stopped();
            tasks.spawn(async move {
                sink.run(sink_stop).await;
                Ok(())
            });
        }
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        tracing::info!(%addr, "slipway serving");
        Ok(App { addr, store, stop, tasks })
    }

    /// The store this Slipway runs on (for admin tasks in the same process, and tests).
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// What the store has committed so far.
    pub fn store_stats(&self) -> slipway_store::StoreStats {
        self.store.stats()
    }

    /// Stops accepting work, drains, and waits for every component.
    pub async fn shutdown(mut self) -> Result<(), AppError> {
        let _ = self.stop.send(true);
        let mut result = Ok(());
        while let Some(done) = self.tasks.join_next().await {
            match done {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = Err(e),
                Err(e) => result = Err(AppError::Config(format!("a component panicked: {e}"))),
            }
        }
        result
    }

    /// Runs until a component fails or `signal` resolves, then shuts down.
    pub async fn run_until(mut self, signal: impl std::future::Future<Output = ()>) -> Result<(), AppError> {
        tokio::select! {
            _ = signal => {}
            Some(done) = self.tasks.join_next() => {
                tracing::error!("a component stopped early: {done:?}");
            }
        }
        self.shutdown().await
    }
}

/// Opens (and migrates) the store the plan names.
pub async fn open_store(plan: &StorePlan) -> Result<Arc<dyn Store>, AppError> {
    Ok(match plan {
        StorePlan::Postgres(options) => Arc::new(PostgresStore::connect(options.clone()).await?),
        StorePlan::Sqlite(options) => Arc::new(SqliteStore::open(options.clone())?),
    })
}

/// A store restored from a backup is served only once it was reconciled with what the
/// providers ran since: before that, the engine could launch a job a second time.
async fn refuse_unreconciled(store: &dyn Store) -> Result<(), AppError> {
    let pending = store.get_entry(EntryKind::Backup, RESTORE_PENDING).await?;
    match pending {
        None => Ok(()),
        Some(_) => Err(AppError::Config(
            "this store was restored from a backup and not yet reconciled with the jobs its providers ran since: \
             run `slipway restore --in-place` first (docs/operations.md#backup-and-restore)"
                .into(),
        )),
    }
}

/// The planned providers, counting their HTTP requests into `metrics`.
pub fn build_providers(
    plans: &[ProviderPlan],
    metrics: &slipway_metrics::ProviderMetrics,
) -> Result<Providers, AppError> {
    let mut providers: Providers = HashMap::new();
    for p in plans {
        let provider = p.build(metrics).map_err(|e| AppError::Config(format!("provider '{}': {e}", p.name())))?;
        providers.insert(p.name().into(), provider);
    }
    Ok(providers)
}

/// What the API reads about a job from the provider that ran it: its output and its link.
struct ProviderJobs(Providers);

#[async_trait::async_trait]
impl slipway_api::JobReader for ProviderJobs {
    async fn output(
        &self,
        job: &slipway_api::JobRef,
        offset: u64,
    ) -> Result<slipway_api::OutputChunk, slipway_api::OutputError> {
        let Some(provider) = self.0.get(&job.provider) else {
            return Err(slipway_api::OutputError::Unavailable(format!(
                "provider '{}' is not configured",
                job.provider
            )));
        };
        match provider.output(&handle(job), offset).await {
            Ok(out) => Ok(slipway_api::OutputChunk { text: out.text, next_offset: out.next_offset }),
            Err(slipway_provider::ProviderError::NotFound(_)) => Err(slipway_api::OutputError::Gone),
            Err(e) => Err(slipway_api::OutputError::Unavailable(e.to_string())),
        }
    }

    fn link(&self, job: &slipway_api::JobRef) -> Option<String> {
        self.0.get(&job.provider)?.job_link(&handle(job))
    }
}

fn handle(job: &slipway_api::JobRef) -> slipway_provider::JobHandle {
    slipway_provider::JobHandle { job_id: job.job_id.clone(), data: job.handle.clone() }
}
