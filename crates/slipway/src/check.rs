//! `slipway check-config`: every problem building the [`Plan`] finds (what `serve` would
//! refuse), and what only a tenant's failed job would otherwise reveal (a missing playbook),
//! each naming its entry (`types[2] (Contoso.Dns/dnsRecords): …`).

use crate::config::Config;
use crate::plan::{Plan, job_words, missing_playbooks};

/// Every problem found; empty when `serve` would start with this configuration and every
/// job the types need has its playbook.
pub fn check(config: &Config) -> Vec<String> {
    if let Some(problem) = config.origin_problem() {
        return vec![problem];
    }
    let problems = Plan::from_config(config).err().unwrap_or_default();
    problems.iter().chain(&missing_playbooks(config)).map(ToString::to_string).collect()
}

/// `check-config --online`: asks each provider whether it can take work (an AAP
/// controller: reachable, credentials accepted) and whether every job the types need could
/// start there (each template exists, in the organization, and prompts for variables).
pub async fn check_online(config: &Config) -> Vec<String> {
    let plan = match Plan::from_config(config) {
        Ok(plan) => plan,
        Err(problems) => return problems.iter().map(ToString::to_string).collect(),
    };
    let mut problems = Vec::new();
    for (i, p) in plan.providers.iter().enumerate() {
        let entry = format!("providers[{i}] ({})", p.name());
        let provider = match p.build(&Default::default()) {
            Ok(provider) => provider,
            Err(e) => {
                problems.push(format!("{entry}: {e}"));
                continue;
            }
        };
        if let Err(e) = provider.check().await {
            problems.push(format!("{entry}: not ready: {e}"));
            continue;
        }
        for (j, t) in config.types.iter().enumerate().filter(|(_, t)| t.provider == p.name()) {
            for action in job_words(t) {
                if let Some(Err(e)) = provider.check_job(&t.kind, &action).await {
                    problems.push(format!(
                        "types[{j}] ({}/{}): the {} job: {e}",
                        t.namespace,
                        t.type_name,
                        action.as_str()
                    ));
                }
            }
        }
        provider.shutdown().await;
    }
    problems
}
