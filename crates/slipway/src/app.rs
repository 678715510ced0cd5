//! Builds every component from the configuration and runs them until shutdown.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use slipway_aap::{AapAuth, AapOptions, AapProvider, Envelope, Secret};
use slipway_ansible::{AnsibleOptions, AnsibleProvider};
use slipway_api::notify::{CallbackPolicy, Notifier, NotifierOptions};
use slipway_api::types::ResourceKind;
use slipway_api::{
    ActionType, ApiOptions, ApiState, Authenticator, EdgeOptions, ListenerOptions, ResourceType, ServerTls,
    TypeRegistry,
};
use slipway_domain::backoff::BackoffPolicy;
use slipway_domain::time::Clock;
use slipway_domain::{TypeKey, TypePolicy};

use slipway_engine::{Engine, EngineOptions, Providers, Readiness};
use slipway_provider::Provider;
use slipway_store::Store;
use slipway_store::postgres::{PostgresOptions, PostgresStore};
use slipway_store::sqlite::{SqliteOptions, SqliteStore, Synchronous};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::{AapConfig, AnsibleConfig, Config, ProviderConfig, TypeConfig};
use crate::config::{access_options, check_exposure, rate_limiter};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
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

/// A running Slipway: the bound address and a way to stop it.
pub struct App {
    pub addr: SocketAddr,
    store: Arc<dyn Store>,
    stop: watch::Sender<bool>,
    tasks: tokio::task::JoinSet<Result<(), AppError>>,
}

impl App {
    /// Builds and starts everything; returns once the listener is bound.
    pub async fn start(config: Config, clock: Arc<dyn Clock>) -> Result<App, AppError> {
        let store = open_store(&config).await?;
        let metrics = slipway_metrics::Metrics::new(store.metrics());
        let providers = build_providers(&config, &metrics.providers)?;
        let (types, policies) = build_types(&config)?;
        let hooks = webhook_tokens(&config)?;
        let engine_options = EngineOptions {
            owner: config.engine.node_name.clone().unwrap_or_else(host_name),
            lease_for: Duration::from_secs(config.engine.lease_seconds.max(3)),
            max_concurrent: config.engine.max_concurrent.max(1),
            shutdown_grace: Duration::from_secs(config.engine.shutdown_grace_seconds),
            status_batch: config.engine.status_batch.max(1),
            ..EngineOptions::default()
        };
        let hook_providers = providers.clone();
        let jobs = Arc::new(ProviderJobs(providers.clone()));
        let secrets = keyring(&config, &types)?;
        let mut engine = Engine::new(store.clone(), providers, policies, clock.clone(), engine_options)
            .with_metrics(metrics.engine.clone());
        if let Some(k) = &secrets {
            engine = engine.with_secrets(k.clone());
        }
        let handle = engine.handle();
        let callbacks = config.notifications.callback_policy().map_err(|e| AppError::Config(e.to_string()))?;
        let notifier_options =
            NotifierOptions { metrics: metrics.notifier.clone(), ..notifier_options(&config, callbacks.clone()) };
        let notifier = Notifier::new(store.clone(), clock.clone(), handle.outbox_signal(), notifier_options)
            .map_err(|e| AppError::Config(format!("notification client: {e}")))?;
        let wake = handle.clone();
        let hinted = handle.clone();
        let auth = match &config.auth {
            Some(a) => {
                let options = a.options(&config.base_dir).map_err(AppError::Config)?;
                Some(Arc::new(Authenticator::new(options, store.clone(), clock.clone()).map_err(AppError::Config)?))
            }
            None => None,
        };
        if auth.is_some()
            && let Err(e) = slipway_api::report_noncanonical_assignments(store.as_ref()).await
        {
            tracing::warn!(error = %e.body.message, "could not check the stored role assignments' scopes");
        }
        let edge = edge_options(&config)?;
        let access = access_options(config.auth.as_ref()).map_err(AppError::Config)?;
        let rate_limits = rate_limiter(config.auth.as_ref()).map_err(AppError::Config)?;
        let (stop, stopped) = watch::channel(false);
        let state = Arc::new(ApiState {
            store: store.clone(),
            types,
            auth,
            edge,
            access,
            rate_limits,
            secrets,
            clock,
            options: ApiOptions {
                location: config.server.location.clone(),
                retry_after_secs: config.server.retry_after_seconds,
                max_body_bytes: config.server.max_body_bytes,
                page_size: config.server.page_size.clamp(1, 1000),
                callbacks,
                metrics_access: config.server.metrics_access(&config).map_err(AppError::Config)?,
            },
            metrics,
            jobs,
            provider_readiness: {
                let engine = handle.clone();
                Arc::new(move || {
                    let answers = engine.provider_readiness().into_iter();
                    answers
                        .map(|(name, r)| (name, (r != Readiness::Unknown).then_some(r == Readiness::Ready)))
                        .collect()
                })
            },
            openapi: Default::default(),
            assignment_cache: Default::default(),
            stopping: stopped.clone(),
            on_accept: Arc::new(move || wake.wake()),
            hooks,
            on_job_notification: Arc::new(move |name, body| {
                let provider = hook_providers.get(name).ok_or_else(|| format!("no provider named '{name}'"))?;
                Ok(provider.job_from_notification(body)?.is_some_and(|job| hinted.job_changed(name, &job)))
            }),
        });
        let listener = TcpListener::bind(&config.server.listen)
            .await
            .map_err(|e| AppError::Listen(config.server.listen.clone(), e))?;
        let addr = listener.local_addr().map_err(|e| AppError::Listen(config.server.listen.clone(), e))?;
        check_exposure(config.auth.as_ref(), addr).map_err(AppError::Config)?;
        if config.auth.is_none() {
            tracing::warn!(%addr, "authentication is off ([auth] not configured): every local caller may do anything; serving on loopback only");
        }
        let listener_options = ListenerOptions {
            header_read_timeout: Duration::from_secs(config.server.header_read_timeout_seconds.max(1)),
            body_read_timeout: Duration::from_secs(config.server.body_read_timeout_seconds.max(1)),
            idle_timeout: Duration::from_secs(config.server.idle_timeout_seconds.max(1)),
            max_connections: config.server.max_connections,
            fd_reserve: fd_reserve(&config),
            tls: server_tls(&config)?,
        };

        let until_stopped = move || {
            let mut rx = stopped.clone();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let mut tasks = tokio::task::JoinSet::new();
        let api_stop = until_stopped();
        tasks.spawn(async move {
            slipway_api::serve(listener, state, listener_options, api_stop).await.map_err(AppError::Serve)
        });
        let engine_stop = until_stopped();
        tasks.spawn(async move { engine.run(engine_stop).await.map_err(AppError::from) });
        let notifier_stop = until_stopped();
        tasks.spawn(async move {
            notifier.run(notifier_stop).await;
            Ok(())
        });
        for t in &config.types {
            for problem in crate::check::missing_playbooks(&config, t) {
                tracing::warn!(resource_type = %format!("{}/{}", t.namespace, t.type_name), "{problem}");
            }
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

pub async fn open_store(config: &Config) -> Result<Arc<dyn Store>, AppError> {
    let url = config.store.url.as_str();
    let ttl = Duration::from_secs(config.store.operation_ttl_seconds);
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let mut options = PostgresOptions::new(url);
        options.schema = config.store.schema.clone();
        options.pool_size = config.store.pool_size.max(1);
        options.statement_timeout = Duration::from_secs(config.store.statement_timeout_seconds);
        options.operation_ttl = ttl;
        (options.ssl_mode, options.ssl_root_cert) = config.store_tls().map_err(|e| AppError::Config(e.to_string()))?;
        return Ok(Arc::new(PostgresStore::connect(options).await?));
    }
    let path = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")).unwrap_or(url);
    if url.contains("://") && !url.starts_with("sqlite://") {
        return Err(AppError::Config(format!("store url '{url}': use sqlite:PATH or postgres://…")));
    }
    let synchronous = match config.store.synchronous.to_ascii_lowercase().as_str() {
        "full" => Synchronous::Full,
        "normal" => Synchronous::Normal,
        other => return Err(AppError::Config(format!("store.synchronous '{other}': use full or normal"))),
    };
    let mut options = SqliteOptions::new(config.resolve(&PathBuf::from(path)));
    options.synchronous = synchronous;
    options.operation_ttl = ttl;
    Ok(Arc::new(SqliteStore::open(options)?))
}

fn build_providers(config: &Config, metrics: &slipway_metrics::ProviderMetrics) -> Result<Providers, AppError> {
    let mut providers: Providers = HashMap::new();
    for p in &config.providers {
        let provider = build_provider(config, p, metrics)?;
        if providers.insert(p.name().to_string(), provider).is_some() {
            return Err(AppError::Config(format!("provider '{}' is configured twice", p.name())));
        }
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
        self.0.get(&job.provider)?.job_link(&handle(job)).filter(|_| !job.job_id.is_empty())
    }
}

fn handle(job: &slipway_api::JobRef) -> slipway_provider::JobHandle {
    slipway_provider::JobHandle { job_id: job.job_id.clone(), data: job.handle.clone() }
}

/// One configured provider (checks its executables, files and credentials' files), counting
/// its HTTP requests into `metrics`.
pub(crate) fn build_provider(
    config: &Config,
    p: &ProviderConfig,
    metrics: &slipway_metrics::ProviderMetrics,
) -> Result<Arc<dyn Provider>, AppError> {
    Ok(match p {
        ProviderConfig::Ansible(a) => Arc::new(ansible_provider(config, a)?),
        ProviderConfig::Aap(a) => Arc::new(aap_provider(config, a, metrics.clone())?),
    })
}

/// Explicit template or playbook names of the types served by `provider`.
pub(crate) fn explicit_names(config: &Config, provider: &str) -> slipway_provider::ExplicitNames {
    config
        .types
        .iter()
        .filter(|t| t.provider == provider)
        .map(|t| (t.kind.clone(), t.explicit_names()))
        .filter(|(_, names)| !names.is_empty())
        .collect()
}

fn ansible_provider(config: &Config, p: &AnsibleConfig) -> Result<AnsibleProvider, AppError> {
    let options = AnsibleOptions {
        name: p.name.clone(),
        playbook_dir: absolute(config.resolve(&p.playbook_dir)),
        work_dir: absolute(config.resolve(&p.work_dir)),
        runner: absolute(config.resolve(&p.runner)),
        python_interpreter: absolute(config.resolve(&p.python)),
        playbook_prefix: p.playbook_prefix.clone(),
        playbooks: explicit_names(config, &p.name),
        job_timeout: p.job_timeout_seconds.map(Duration::from_secs),
        cancel_grace: Duration::from_secs(p.cancel_grace_seconds),
        job_retention: Duration::from_secs(p.job_retention_seconds),
        max_concurrent: p.max_concurrent_jobs.max(1),
        extra_vars: serde_json::to_value(&p.extra_vars).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default(),
    };
    AnsibleProvider::new(options).map_err(|e| AppError::Config(format!("provider '{}': {e}", p.name)))
}

/// A secret from a file or an environment variable; errors never contain the value.
fn secret(
    provider: &str,
    what: &str,
    file: &Option<PathBuf>,
    env: &Option<String>,
    config: &Config,
) -> Result<Option<Secret>, AppError> {
    let loaded = match (file, env) {
        (Some(_), Some(_)) => {
            return Err(AppError::Config(format!("provider '{provider}': give {what}_file or {what}_env, not both")));
        }
        (Some(f), None) => Some(Secret::from_file(config.resolve(f))),
        (None, Some(var)) => Some(Secret::from_env(var)),
        (None, None) => None,
    };
    loaded.transpose().map_err(|e| AppError::Config(format!("provider '{provider}': {what}: {e}")))
}

fn aap_provider(
    config: &Config,
    p: &AapConfig,
    metrics: slipway_metrics::ProviderMetrics,
) -> Result<AapProvider, AppError> {
    let token = secret(&p.name, "token", &p.token_file, &p.token_env, config)?;
    let password = secret(&p.name, "password", &p.password_file, &p.password_env, config)?;
    let auth = match (token, &p.username, password) {
        (Some(t), None, None) => AapAuth::Token(t),
        (None, Some(u), Some(pw)) => AapAuth::Basic { username: u.clone(), password: pw },
        (None, None, None) => AapAuth::None,
        _ => {
            return Err(AppError::Config(format!(
                "provider '{}': configure either a token (token_file/token_env) or username + password",
                p.name
            )));
        }
    };
    let envelope = match p.envelope.as_str() {
        "slipway" => Envelope::Slipway,
        "osac" => Envelope::OsacEda,
        other => {
            return Err(AppError::Config(format!("provider '{}': envelope '{other}': use slipway or osac", p.name)));
        }
    };
    let options = AapOptions {
        name: p.name.clone(),
        client_id: format!("{}/{}", config.engine.node_name.clone().unwrap_or_else(host_name), p.name),
        base_url: p.url.clone(),
        api_prefix: p.api_prefix.clone(),
        auth,
        organization: p.organization.clone(),
        template_prefix: p.template_prefix.clone(),
        templates: explicit_names(config, &p.name),
        kind_overrides: p.kind_overrides.clone(),
        envelope,
        ca_bundle: p.ca_bundle.as_ref().map(|c| config.resolve(c)),
        insecure: p.insecure,
        request_timeout: Duration::from_secs(p.request_timeout_seconds.max(1)),
        max_concurrent_requests: p.max_concurrent_requests.max(1),
        purge_grace: Duration::from_secs(p.purge_grace_seconds),
        metrics,
        ..AapOptions::default()
    };
    AapProvider::new(options).map_err(|e| AppError::Config(format!("provider '{}': {e}", p.name)))
}

/// Webhook tokens by provider name (providers without one get no hook).
fn webhook_tokens(config: &Config) -> Result<HashMap<String, String>, AppError> {
    let mut hooks = HashMap::new();
    for p in &config.providers {
        if let ProviderConfig::Aap(a) = p
            && let Some(token) = secret(&a.name, "webhook_token", &a.webhook_token_file, &a.webhook_token_env, config)?
        {
            hooks.insert(a.name.clone(), token.expose().to_string());
        }
    }
    Ok(hooks)
}

fn absolute(p: PathBuf) -> PathBuf {
    if p.is_absolute() {
        return p;
    }
    std::env::current_dir().map(|d| d.join(&p)).unwrap_or(p)
}

pub(crate) type Types = (TypeRegistry, HashMap<TypeKey, TypePolicy>);

pub(crate) fn build_types(config: &Config) -> Result<Types, AppError> {
    let mut types = Vec::new();
    let mut policies = HashMap::new();
    for t in &config.types {
        let ty = build_type(config, t)?;
        let mut type_policy = policy(t, launch_ambiguity(config, &t.provider));
        type_policy.has_child_types = config.types.iter().any(|c| t.is_parent_of(c));
        policies.insert(ty.key(), type_policy);
        types.push(ty);
    }
    for target in types.iter().flat_map(|t| t.reference_targets().collect::<Vec<_>>()) {
        match policies.get_mut(&target) {
            Some(p) => p.is_referenced = true,
            None => {
                return Err(AppError::Config(format!(
                    "a schema references the type {target}, which is not configured"
                )));
            }
        }
    }
    Ok((TypeRegistry::new(types), policies))
}

/// One configured type: its schema, its actions' schemas, its name rule.
pub(crate) fn build_type(config: &Config, t: &TypeConfig) -> Result<ResourceType, AppError> {
    let schema = t.schema.as_ref().map(|path| read_schema(config, path)).transpose()?;
    let mut actions = Vec::new();
    for (name, a) in &t.actions {
        let schema = a.schema.as_ref().map(|path| read_schema(config, path)).transpose()?;
        let display = format!("{}/{}", t.namespace, t.type_name);
        actions.push(ActionType::new(&display, name, schema.as_ref()).map_err(|e| AppError::Config(e.to_string()))?);
    }
    let names = t.name_rule().map_err(|e| AppError::Config(e.to_string()))?;
    Ok(ResourceType::new(&t.namespace, &t.type_name, &t.kind, t.api_versions.clone(), schema.as_ref())
        .map_err(|e| AppError::Config(e.to_string()))?
        .with_name_rule(names)
        .with_resource_kind(t.resource_kind.unwrap_or_else(|| ResourceKind::default_for(&t.type_name)))
        .with_actions(actions))
}

/// A JSON Schema file, resolved against the configuration's directory.
fn read_schema(config: &Config, path: &std::path::Path) -> Result<serde_json::Value, AppError> {
    let path = config.resolve(path);
    let text =
        std::fs::read_to_string(&path).map_err(|e| AppError::Config(format!("schema {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| AppError::Config(format!("schema {}: {e}", path.display())))
}

/// The provider's launch-ambiguity window. The local provider has none: its launch runs in
/// this process and is exclusive by the job directory the key names, so a launch that was
/// not answered cannot create a job later.
fn launch_ambiguity(config: &Config, provider: &str) -> Duration {
    match config.providers.iter().find(|p| p.name() == provider) {
        Some(ProviderConfig::Aap(a)) => Duration::from_secs(a.launch_ambiguity_seconds()),
        Some(ProviderConfig::Ansible(_)) | None => Duration::ZERO,
    }
}

fn policy(t: &TypeConfig, launch_ambiguity: Duration) -> TypePolicy {
    TypePolicy {
        type_name: format!("{}/{}", t.namespace, t.type_name),
        provider: t.provider.clone(),
        poll_interval: Duration::from_secs_f64(t.poll_interval_seconds),
        backoff: t.retry_failures.then_some(BackoffPolicy {
            base: Duration::from_secs(t.backoff_base_seconds),
            max: Duration::from_secs(t.backoff_max_seconds),
        }),
        create_deadline: Duration::from_secs(t.create_deadline_seconds),
        update_deadline: Duration::from_secs(t.update_deadline_seconds),
        delete_deadline: Duration::from_secs(t.delete_deadline_seconds),
        max_history: t.max_history.max(1),
        block_deletion_on_failure: t.block_deletion_on_failure,
        launch_ambiguity,
        max_output_bytes: t.max_output_bytes,
        preflight: t.preflight,
        ..TypePolicy::default()
    }
}

/// File descriptors to keep free of client connections when the cap is derived from the
/// open-file limit: the process itself (stdio, runtime, listener, logs, lock files), the
/// store's connections, notification deliveries, and each provider's concurrent work.
fn fd_reserve(config: &Config) -> usize {
    let url = config.store.url.as_str();
    let store = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        config.store.pool_size + 8
    } else {
        32 // writer, readers and checkpointer: database, WAL and shared-memory files each
    };
    let providers: usize = config
        .providers
        .iter()
        .map(|p| match p {
            // Pipes and artifact files per ansible-runner child.
            ProviderConfig::Ansible(a) => 8 * a.max_concurrent_jobs.max(1),
            ProviderConfig::Aap(a) => 2 * a.max_concurrent_requests.max(1) + 8,
        })
        .sum();
    // One socket per callback in flight.
    let notifications = config.notifications.max_concurrent.max(1);
    64 + store + notifications + providers
}

fn notifier_options(config: &Config, callbacks: CallbackPolicy) -> NotifierOptions {
    let n = &config.notifications;
    NotifierOptions {
        request_timeout: Duration::from_secs(n.request_timeout_seconds.max(1)),
        connect_timeout: Duration::from_secs(n.connect_timeout_seconds.max(1)),
        max_concurrent: n.max_concurrent.max(1),
        max_per_destination: n.max_per_destination.max(1),
        max_attempts: n.max_attempts.max(1),
        max_backoff: Duration::from_secs(n.max_backoff_seconds.max(1)),
        shutdown_grace: Duration::from_secs(config.engine.shutdown_grace_seconds),
        location: config.server.location.clone(),
        callbacks,
        ..NotifierOptions::default()
    }
}

/// The secret-property keys; a type that marks a secret needs them.
fn keyring(config: &Config, types: &TypeRegistry) -> Result<Option<Arc<slipway_secrets::Keyring>>, AppError> {
    let files: Vec<PathBuf> =
        config.secrets.iter().flat_map(|s| s.key_files.iter()).map(|f| config.resolve(f)).collect();
    if files.is_empty() {
        if let Some(ty) =
            types.all().find(|t| t.schema().is_some_and(|s| !slipway_secrets::secret_properties(s).is_empty()))
        {
            return Err(AppError::Config(format!(
                "type {} has secret properties but [secrets] key_files is not configured",
                ty.display_name()
            )));
        }
        return Ok(None);
    }
    let keyring = slipway_secrets::Keyring::from_files(&files).map_err(|e| AppError::Config(e.to_string()))?;
    Ok(Some(Arc::new(keyring)))
}

fn edge_options(config: &Config) -> Result<EdgeOptions, AppError> {
    let mut trusted_proxies = Vec::new();
    for (i, p) in config.server.trusted_proxies.iter().enumerate() {
        let net =
            p.parse::<ipnet::IpNet>().or_else(|_| p.parse::<std::net::IpAddr>().map(ipnet::IpNet::from)).map_err(
                |_| AppError::Config(format!("server.trusted_proxies[{i}] = '{p}': not an IP address or CIDR range")),
            )?;
        trusted_proxies.push(net);
    }
    let public_base_url = match &config.server.public_base_url {
        Some(u) if !(u.starts_with("https://") || u.starts_with("http://")) || u.contains(['?', '#', ' ']) => {
            return Err(AppError::Config(format!(
                "server.public_base_url = '{u}': use scheme and authority only, e.g. https://slipway.example.com"
            )));
        }
        other => other.clone(),
    };
    let tls = config.server.tls_cert_file.is_some();
    Ok(EdgeOptions { public_base_url, trusted_proxies, tls })
}

/// The listener's TLS, loaded now so a bad file stops startup with its name.
fn server_tls(config: &Config) -> Result<Option<ServerTls>, AppError> {
    let Some(options) = config.tls_options().map_err(|e| AppError::Config(e.to_string()))? else {
        return Ok(None);
    };
    ServerTls::load(options).map(Some).map_err(|e| AppError::Config(format!("server TLS: {e}")))
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "local".into())
}
