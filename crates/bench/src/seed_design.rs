//! The seed design side by side with Slipway, in one run: the same burn-down and steady
//! runs with Slipway configured as the seed design works — one status request per job
//! (no batching) on a fixed 30 s interval, no webhooks.

use std::time::Duration;

use crate::burn_down::{self, BurnDown};
use crate::harness::{Setup, StoreKind};
use crate::steady::{self, Steady};
use crate::store_ceiling;

#[derive(clap::Args)]
pub struct Args {
    /// Creates in the burn-down.
    #[arg(long, default_value_t = 10_000)]
    pub ops: usize,
    #[command(flatten)]
    pub steady: steady::Options,
}

pub async fn run(args: Args) -> Result<(), String> {
    let (burn, steady) = compare(StoreKind::SqliteFull, args.ops, &args.steady).await?;
    burn_down::print(&burn);
    steady::print(&steady);
    Ok(())
}

/// Burn-down and steady (polling, and with webhooks) as Slipway runs them, then as the seed
/// design would.
pub async fn compare(
    store: StoreKind,
    ops: usize,
    o: &steady::Options,
) -> Result<(Vec<BurnDown>, Vec<Steady>), String> {
    let ceiling = store_ceiling::measure(store, Duration::from_secs(2)).await?;
    let burn = vec![
        burn_down::measure("slipway", &Setup::new(store, 0.5), ops, ceiling.clone()).await?,
        burn_down::measure("seed", &Setup::seed(store), ops, ceiling).await?,
    ];
    Ok((burn, steady_runs(store, o).await?))
}

/// Steady as Slipway runs it (every setup of [`steady::setups`]), then as the seed design.
pub async fn steady_runs(store: StoreKind, o: &steady::Options) -> Result<Vec<Steady>, String> {
    let mut runs = Vec::new();
    for (label, setup) in steady::setups(store, o.poll_seconds) {
        runs.push(steady::measure(label, &setup, o).await?);
    }
    runs.push(steady::measure("seed", &Setup::seed(store), o).await?);
    Ok(runs)
}
