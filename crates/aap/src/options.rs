//! What configures a provider instance ([`AapOptions`]), why building one can fail
//! ([`AapError`]), and building it ([`AapProvider::new`]): the HTTP client (timeouts, no
//! redirects, extra CA certificates), the API root, the `Authorization` header and the
//! `User-Agent`.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Url;
use reqwest::header::HeaderValue;
use slipway_domain::rate::TokenBucket;
use slipway_domain::time::{Clock, SystemClock};

use crate::AapProvider;
use crate::envelope::Envelope;
use crate::http::{Http, HttpSettings};
use crate::naming::TemplateNaming;
use crate::secret::{self, Secret};
use crate::status::{Bounded, DETAILS_CACHE, MISSING_CACHE, PAGE_SIZE};

/// How the provider authenticates.
#[derive(Clone, Debug)]
pub enum AapAuth {
    /// `Authorization: Bearer <token>` (AWX personal token, AAP gateway token).
    Token(Secret),
    /// `Authorization: Basic …` (needs AAP's `AUTH_BASIC_ENABLED`, the default).
    Basic { username: String, password: Secret },
    /// No credentials (tests, or a proxy that adds them).
    None,
}

#[derive(Clone)]
pub struct AapOptions {
    /// Provider instance name.
    pub name: String,
    /// Who this client is, sent in `User-Agent: slipway/<version> (<client_id>)`: the node
    /// name (and provider) in a multi-node deployment. Empty: the provider `name`.
    pub client_id: String,
    /// Scheme, host and optional path of AAP, e.g. `https://aap.example.com`.
    pub base_url: String,
    /// The controller API root under `base_url`: `/api/` (AWX, AAP ≤ 2.4) or
    /// `/api/controller/` (the AAP 2.5+ gateway).
    pub api_prefix: String,
    pub auth: AapAuth,
    /// Restricts template lookups to this organization (template names are unique per
    /// organization only).
    pub organization: Option<String>,
    /// `Some("osac")` → `osac-create-virtual-network`.
    pub template_prefix: Option<String>,
    /// Explicit template names per kind and job word; they win over the convention.
    pub templates: slipway_provider::ExplicitNames,
    /// Per-kind name suffix replacing `kebab(kind)` (`ClusterOrder` → `hosted-cluster`).
    pub kind_overrides: HashMap<String, String>,
    pub envelope: Envelope,
    /// PEM bundle of extra trusted CA certificates.
    pub ca_bundle: Option<PathBuf>,
    /// Accept any server certificate. Only for test installations.
    pub insecure: bool,
    /// Whole-request timeout (connect, send, answer).
    pub request_timeout: Duration,
    /// Requests in flight to this AAP at most.
    pub max_concurrent_requests: usize,
    /// How long a job may be missing from AAP before it is reported `NotFound`.
    pub purge_grace: Duration,
    /// A running job's progress (its task-start events) is read once it has run this long,
    /// and then at most this often: one request per job and interval.
    pub progress_every: Duration,
    /// Progress reads this provider makes per second at most, in all (they cannot be
    /// batched): with many long jobs running, each is read less often.
    pub progress_reads_per_second: f64,
    /// Retries of an idempotent request (GET, cancel) after the first try.
    pub get_retries: u32,
    /// Wait before the first retry; it doubles per retry.
    pub retry_backoff: Duration,
    /// Longest wait between tries, and longest a request waits for the throttle gate. A
    /// `Retry-After` longer than this is not waited for in-process: the request reports
    /// `RateLimited` and the engine schedules it.
    pub max_retry_wait: Duration,
    /// `find` only looks at jobs created within this window before now. `None`: the
    /// template's whole job list, so "no such job" is always certain.
    pub find_window: Option<Duration>,
    /// Rows per list page requested (1..=200, AWX's maximum). Status requests batch up to
    /// 200 ids each regardless and follow `next` links when pages are smaller.
    pub page_size: usize,
    /// Where wall-clock time is read: the `now` of an HTTP-date `Retry-After` and of
    /// `find_window`. Tests inject a shifted clock; waits run on tokio's clock regardless.
    pub clock: Arc<dyn Clock>,
    /// Where this provider's HTTP requests are counted (the application's, for `/metrics`).
    pub metrics: slipway_metrics::ProviderMetrics,
}

impl Default for AapOptions {
    fn default() -> Self {
        AapOptions {
            name: "aap".into(),
            client_id: String::new(),
            base_url: String::new(),
            api_prefix: "/api/".into(),
            auth: AapAuth::None,
            organization: None,
            template_prefix: None,
            templates: HashMap::new(),
            kind_overrides: HashMap::new(),
            envelope: Envelope::Slipway,
            ca_bundle: None,
            insecure: false,
            request_timeout: Duration::from_secs(30),
            max_concurrent_requests: 8,
            purge_grace: Duration::from_secs(300),
            progress_every: crate::progress::DEFAULT_PROGRESS_EVERY,
            progress_reads_per_second: crate::progress::DEFAULT_PROGRESS_READS_PER_SECOND,
            get_retries: 3,
            retry_backoff: Duration::from_millis(500),
            max_retry_wait: Duration::from_secs(10),
            find_window: None,
            page_size: PAGE_SIZE,
            clock: Arc::new(SystemClock),
            metrics: Default::default(),
        }
    }
}

/// Every option but the clock and the metrics, which have no useful `Debug` (credentials print as `***`).
impl fmt::Debug for AapOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let AapOptions {
            name,
            client_id,
            base_url,
            api_prefix,
            auth,
            organization,
            template_prefix,
            templates,
            kind_overrides,
            envelope,
            ca_bundle,
            insecure,
            request_timeout,
            max_concurrent_requests,
            purge_grace,
            progress_every,
            progress_reads_per_second,
            get_retries,
            retry_backoff,
            max_retry_wait,
            find_window,
            page_size,
            clock: _,
            metrics: _,
        } = self;
        f.debug_struct("AapOptions")
            .field("name", name)
            .field("client_id", client_id)
            .field("base_url", base_url)
            .field("api_prefix", api_prefix)
            .field("auth", auth)
            .field("organization", organization)
            .field("template_prefix", template_prefix)
            .field("templates", templates)
            .field("kind_overrides", kind_overrides)
            .field("envelope", envelope)
            .field("ca_bundle", ca_bundle)
            .field("insecure", insecure)
            .field("request_timeout", request_timeout)
            .field("max_concurrent_requests", max_concurrent_requests)
            .field("purge_grace", purge_grace)
            .field("progress_every", progress_every)
            .field("progress_reads_per_second", progress_reads_per_second)
            .field("get_retries", get_retries)
            .field("retry_backoff", retry_backoff)
            .field("max_retry_wait", max_retry_wait)
            .field("find_window", find_window)
            .field("page_size", page_size)
            .finish_non_exhaustive()
    }
}

/// Why the provider could not be built. Never contains a credential.
#[derive(Debug, thiserror::Error)]
pub enum AapError {
    #[error("invalid aap provider option: {0}")]
    InvalidOption(String),
    #[error("cannot use the CA bundle {path}: {reason}")]
    CaBundle { path: PathBuf, reason: String },
    #[error("cannot build the AAP HTTP client: {0}")]
    Client(String),
}

impl AapProvider {
    /// Checks the options and builds the provider; no request is made.
    pub fn new(options: AapOptions) -> Result<Self, AapError> {
        let invalid = |m: String| AapError::InvalidOption(m);
        if options.name.trim().is_empty() {
            return Err(invalid("name must not be empty".into()));
        }
        if options.max_concurrent_requests == 0 {
            return Err(invalid("max_concurrent_requests must be at least 1".into()));
        }
        if !(1..=PAGE_SIZE).contains(&options.page_size) {
            return Err(invalid(format!("page_size must be between 1 and {PAGE_SIZE}")));
        }
        if options.request_timeout.is_zero() {
            return Err(invalid("request_timeout must be positive".into()));
        }
        if !(options.progress_reads_per_second.is_finite() && options.progress_reads_per_second >= 0.0) {
            return Err(invalid("progress_reads_per_second must be a number ≥ 0".into()));
        }
        let root = api_root(&options.base_url, &options.api_prefix).map_err(invalid)?;
        let ui = ui_root(&root);
        let (authorization, scrub) = authorization(&options.auth).map_err(invalid)?;
        let client_id = if options.client_id.trim().is_empty() { &options.name } else { &options.client_id };
        let user_agent = user_agent(client_id);
        if authorization.is_some() && root.scheme() == "http" {
            tracing::warn!(provider = %options.name, "AAP credentials are sent over plain http");
        }

        let mut builder = reqwest::Client::builder()
            .timeout(options.request_timeout)
            .connect_timeout(options.request_timeout.min(Duration::from_secs(10)))
            // A redirect would turn the launch POST into a GET and could carry the
            // credentials elsewhere: answered as an error naming the target instead.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(user_agent);
        if let Some(path) = &options.ca_bundle {
            let ca_err = |reason: String| AapError::CaBundle { path: path.clone(), reason };
            let pem = std::fs::read(path).map_err(|e| ca_err(e.to_string()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| ca_err(e.to_string()))?;
            if certs.is_empty() {
                return Err(ca_err("no PEM certificate in the file".into()));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        if options.insecure {
            tracing::warn!(provider = %options.name, "AAP server certificates are not verified (insecure = true)");
            builder = builder.danger_accept_invalid_certs(true);
        }
        let client = builder.build().map_err(|e| AapError::Client(e.to_string()))?;
        let jitter_seed = format!("{}|{root}", options.client_id);
        let http = Http::new(HttpSettings {
            client,
            root,
            authorization,
            scrub,
            max_concurrent: options.max_concurrent_requests,
            retries: options.get_retries,
            backoff: options.retry_backoff,
            max_wait: options.max_retry_wait,
            timeout: options.request_timeout,
            jitter_seed,
        })
        .with_clock(options.clock.clone())
        .with_metrics(&options.name, options.metrics.clone());
        let progress_rate = crate::progress::budget_rate(options.progress_reads_per_second);
        let progress_budget = Mutex::new(TokenBucket::full(progress_rate, options.clock.now()));
        Ok(AapProvider {
            name: options.name,
            ui,
            http,
            clock: options.clock,
            naming: TemplateNaming {
                prefix: options.template_prefix,
                templates: options.templates,
                kind_overrides: options.kind_overrides,
            },
            organization: options.organization.filter(|o| !o.trim().is_empty()),
            envelope: options.envelope,
            purge_grace: options.purge_grace,
            find_window: options.find_window,
            page_size: options.page_size.to_string(),
            templates: Mutex::new(HashMap::new()),
            resolving: tokio::sync::Mutex::new(()),
            details: Mutex::new(Bounded::new(DETAILS_CACHE)),
            changes: Mutex::new(Bounded::new(DETAILS_CACHE)),
            missing: Mutex::new(Bounded::new(MISSING_CACHE)),
            progress_every: options.progress_every,
            followed: Mutex::new(Bounded::new(crate::progress::FOLLOWED)),
            progress_budget,
            progress_rate,
        })
    }
}

/// The API root: `base_url` (its path kept) + `api_prefix`, ending in `/`.
fn api_root(base_url: &str, api_prefix: &str) -> Result<Url, String> {
    let base = Url::parse(base_url.trim()).map_err(|e| format!("base_url {base_url:?}: {e}"))?;
    if !matches!(base.scheme(), "http" | "https") {
        return Err(format!("base_url {base_url:?} must be http or https"));
    }
    if !base.username().is_empty() || base.password().is_some() {
        // Not echoed: it holds credentials.
        return Err("base_url must not contain credentials; use the auth settings".into());
    }
    if base.query().is_some() || base.fragment().is_some() {
        return Err(format!("base_url {base_url:?} must not have a query or fragment"));
    }
    let prefix = api_prefix.trim();
    if !prefix.starts_with('/') || prefix.contains(['?', '#']) {
        return Err(format!("api_prefix {api_prefix:?} must be a path such as /api/ or /api/controller/"));
    }
    let mut path = format!("{}{}", base.path().trim_end_matches('/'), prefix);
    if !path.ends_with('/') {
        path.push('/');
    }
    let mut root = base;
    root.set_path(&path);
    Ok(root)
}

/// Where the controller's web interface shows a job, from the API root: the AAP 2.5+
/// gateway (`…/api/controller/`) under `/execution/`, AWX and AAP ≤ 2.4 under `/#/`.
fn ui_root(api_root: &Url) -> String {
    let path = api_root.path();
    let (base, gateway) = match path.strip_suffix("api/controller/") {
        Some(base) => (base, true),
        None => (path.strip_suffix("api/").unwrap_or(path), false),
    };
    let mut site = api_root.clone();
    site.set_path(base);
    let site = site.as_str().trim_end_matches('/').to_string();
    if gateway { format!("{site}/execution/jobs/") } else { format!("{site}/#/jobs/") }
}

/// `slipway/<version> (<client_id>)`; characters a `User-Agent` comment cannot carry (not
/// printable ASCII, parentheses, backslashes) become `_`.
fn user_agent(client_id: &str) -> String {
    let id: String = client_id
        .trim()
        .chars()
        .map(|c| if (' '..='~').contains(&c) && !matches!(c, '(' | ')' | '\\') { c } else { '_' })
        .collect();
    format!("slipway/{} ({id})", env!("CARGO_PKG_VERSION"))
}

/// The `Authorization` header (sensitive) and the texts to scrub from messages.
fn authorization(auth: &AapAuth) -> Result<(Option<HeaderValue>, Vec<String>), String> {
    let (value, scrub) = match auth {
        AapAuth::None => return Ok((None, Vec::new())),
        AapAuth::Token(token) => (format!("Bearer {}", token.expose()), vec![token.expose().to_owned()]),
        AapAuth::Basic { username, password } => {
            let encoded = secret::base64(format!("{username}:{}", password.expose()).as_bytes());
            (format!("Basic {encoded}"), vec![password.expose().to_owned(), encoded])
        }
    };
    let mut header = HeaderValue::from_str(&value)
        .map_err(|_| "the AAP credentials contain characters not allowed in an HTTP header".to_owned())?;
    header.set_sensitive(true);
    Ok((Some(header), scrub))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_agents_name_the_client() {
        let v = env!("CARGO_PKG_VERSION");
        assert_eq!(user_agent("replica-1/aap"), format!("slipway/{v} (replica-1/aap)"));
        assert_eq!(user_agent(" node a "), format!("slipway/{v} (node a)"));
        assert_eq!(user_agent("a(b)c\\d\né"), format!("slipway/{v} (a_b_c_d__)"));
        assert!(HeaderValue::from_str(&user_agent("x\u{7f}\r\n")).is_ok());
    }

    #[test]
    fn api_roots() {
        let r = |b: &str, p: &str| api_root(b, p).map(|u| u.to_string());
        assert_eq!(r("https://aap.example.com", "/api/").unwrap(), "https://aap.example.com/api/");
        assert_eq!(
            r("https://aap.example.com/", "/api/controller/").unwrap(),
            "https://aap.example.com/api/controller/"
        );
        assert_eq!(r("https://h:8443/aap/", "/api/controller").unwrap(), "https://h:8443/aap/api/controller/");
        assert!(r("ftp://h", "/api/").is_err());
        assert!(r("not a url", "/api/").is_err());
        assert!(r("https://h", "api/").is_err());
        assert!(r("https://h?x=1", "/api/").is_err());
        let e = r("https://admin:hunter2@h", "/api/").unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn job_pages_are_under_the_web_interface_of_the_controller() {
        let ui = |b: &str, p: &str| ui_root(&api_root(b, p).unwrap());
        assert_eq!(ui("https://awx.example.com", "/api/"), "https://awx.example.com/#/jobs/");
        assert_eq!(ui("https://aap.example.com/", "/api/controller/"), "https://aap.example.com/execution/jobs/");
        assert_eq!(ui("https://h:8443/aap", "/api/"), "https://h:8443/aap/#/jobs/");
    }

    #[test]
    fn authorization_headers_are_sensitive_and_scrubbed() {
        let (h, scrub) = authorization(&AapAuth::Token(Secret::new("tok-1234"))).unwrap();
        let h = h.unwrap();
        assert!(h.is_sensitive());
        assert_eq!(h.to_str().unwrap(), "Bearer tok-1234");
        assert_eq!(scrub, vec!["tok-1234".to_owned()]);
        let (h, scrub) =
            authorization(&AapAuth::Basic { username: "admin".into(), password: Secret::new("p@ss") }).unwrap();
        assert_eq!(h.unwrap().to_str().unwrap(), "Basic YWRtaW46cEBzcw==");
        assert_eq!(scrub, vec!["p@ss".to_owned(), "YWRtaW46cEBzcw==".to_owned()]);
        assert!(authorization(&AapAuth::None).unwrap().0.is_none());
        let e = authorization(&AapAuth::Token(Secret::new("bad\ntoken-xyz"))).unwrap_err();
        assert!(!e.contains("token-xyz"), "{e}");
    }

    #[test]
    fn options_debug_never_shows_secrets() {
        let o = AapOptions {
            auth: AapAuth::Basic { username: "admin".into(), password: Secret::new("pw-very-secret") },
            ..Default::default()
        };
        let dbg = format!("{o:?}");
        assert!(!dbg.contains("pw-very-secret") && dbg.contains("***"), "{dbg}");
        let o = AapOptions { auth: AapAuth::Token(Secret::new("tok-very-secret")), ..Default::default() };
        assert!(!format!("{o:?}").contains("tok-very-secret"));
    }
}
