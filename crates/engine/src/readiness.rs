//! Whether each provider can take work (an AAP controller: reachable, credentials accepted),
//! asked at startup and then every [`CHECK_INTERVAL`]: a wrong token shows in the log and in
//! `/readyz` at once, not first as a tenant's failed operation. A change is logged once (a
//! warning when a provider stops being ready, info when it is ready again) and counted in
//! `slipway_provider_ready`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use slipway_metrics::{EngineMetrics, ProviderLabels};

use crate::effects::Providers;

/// How often every provider is asked.
pub(crate) const CHECK_INTERVAL: Duration = Duration::from_secs(60);
/// How long one check may take before it counts as not ready.
const CHECK_TIMEOUT: Duration = Duration::from_secs(30);

use slipway_domain::ProviderName;
pub use slipway_domain::readiness::Readiness;

#[derive(Default)]
pub(crate) struct ProviderReadiness {
    last: Mutex<BTreeMap<ProviderName, Readiness>>,
}

impl ProviderReadiness {
    pub fn new(providers: &Providers) -> Self {
        let last = providers.keys().map(|name| (name.clone(), Readiness::Unknown)).collect();
        ProviderReadiness { last: Mutex::new(last) }
    }

    pub fn snapshot(&self) -> Vec<(ProviderName, Readiness)> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Asks every provider at once and records the answers.
    pub async fn check_all(&self, providers: &Providers, metrics: &EngineMetrics) {
        let asked = providers.iter().map(|(name, provider)| async move {
            let answer = match tokio::time::timeout(CHECK_TIMEOUT, provider.check()).await {
                Ok(Ok(())) => Readiness::Ready,
                Ok(Err(e)) => Readiness::NotReady(e.to_string()),
                Err(_) => Readiness::NotReady(format!("no answer within {} s", CHECK_TIMEOUT.as_secs())),
            };
            (name.clone(), answer)
        });
        for (name, answer) in futures_util::future::join_all(asked).await {
            self.record(&name, answer, metrics);
        }
    }

    fn record(&self, name: &ProviderName, answer: Readiness, metrics: &EngineMetrics) {
        let ready = answer == Readiness::Ready;
        metrics.providers_ready.get_or_create(&ProviderLabels { provider: name.to_string() }).set(i64::from(ready));
        let was = self.last.lock().unwrap_or_else(|e| e.into_inner()).insert(name.clone(), answer.clone());
        if was.as_ref() == Some(&answer) {
            return;
        }
        match answer {
            Readiness::Ready => tracing::info!(provider = %name, "provider ready"),
            Readiness::NotReady(why) => {
                tracing::warn!(provider = %name, error = %why, "provider not ready: its jobs fail until this is fixed")
            }
            Readiness::Unknown => {}
        }
    }
}
