//! The plan's own checks, without files or processes.

use slipway_store::sqlite::Synchronous;

use super::*;

/// The example configuration (its paths resolved against the repository's `examples/`), its
/// data in a scratch directory.
fn load(env: &[(&str, &str)]) -> Config {
    static DATA: std::sync::LazyLock<tempfile::TempDir> = std::sync::LazyLock::new(|| tempfile::tempdir().unwrap());
    let data = ("SLIPWAY_SERVER__DATA_DIR".to_string(), DATA.path().display().to_string());
    let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).chain([data]);
    Config::load(None, env).unwrap()
}

#[test]
fn the_example_and_the_defaults_are_in_range() {
    // The example's provider needs the repository's `.venv`; whether or not it is there,
    // nothing else is wrong.
    let problems = Plan::from_config(&load(&[])).err().unwrap_or_default();
    assert!(problems.iter().all(|p| p.as_str().starts_with("providers[0] (ansible): ")), "{problems:#?}");
    let mut found = Found::default();
    let defaults = Config { server: Default::default(), engine: Default::default(), ..load(&[]) };
    engine(&defaults, "n".into(), &mut found);
    server::listener(&defaults, &mut found);
    notifier(&defaults, Default::default(), &mut found);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn synchronous_is_full_or_normal_in_any_case() {
    for (value, want) in [("full", Some(Synchronous::Full)), ("NORMAL", Some(Synchronous::Normal)), ("off", None)] {
        let plan = StorePlan::from_config(&load(&[("SLIPWAY_STORE__SYNCHRONOUS", value)]));
        match (plan, want) {
            (Ok(StorePlan::Sqlite(o)), Some(want)) => assert_eq!(o.synchronous, want),
            (Err(problems), None) => {
                assert_eq!(problems, [Problem::new("store.synchronous = 'off': use full or normal")]);
            }
            (other, _) => panic!("{value}: {other:?}"),
        }
    }
}

#[test]
fn a_pooler_is_session_or_none_and_only_in_front_of_postgresql() {
    let pg = ("SLIPWAY_STORE__URL", "postgres://slipway@db.example/slipway");
    let plan = |pooler: &str, url| StorePlan::from_config(&load(&[url, ("SLIPWAY_STORE__POOLER", pooler)]));
    assert!(matches!(plan("session", pg), Ok(StorePlan::Postgres(o)) if o.pooler == Pooler::Session));
    assert!(matches!(plan("none", pg), Ok(StorePlan::Postgres(o)) if o.pooler == Pooler::None));
    let refused = |pooler: &str, url| plan(pooler, url).err().unwrap_or_default();
    let transaction = refused("transaction", pg);
    assert!(transaction[0].as_str().contains("transaction pooling is not supported"), "{transaction:?}");
    assert!(transaction[0].as_str().contains("pool_mode = session"), "{transaction:?}");
    assert_eq!(refused("odd", pg), [Problem::new("store.pooler = 'odd': use none or session")]);
    let sqlite = ("SLIPWAY_STORE__URL", "sqlite:x.db");
    assert_eq!(refused("session", sqlite), [Problem::new("store.pooler = 'session' applies to PostgreSQL only")]);
}

#[test]
fn values_out_of_range_are_refused_with_their_range() {
    let config = load(&[
        ("SLIPWAY_ENGINE__LEASE_SECONDS", "2"),
        ("SLIPWAY_ENGINE__MAX_CONCURRENT", "0"),
        ("SLIPWAY_SERVER__PAGE_SIZE", "1001"),
        ("SLIPWAY_NOTIFICATIONS__MAX_ATTEMPTS", "0"),
        ("SLIPWAY_TYPES__0__MAX_HISTORY", "0"),
    ]);
    let problems = Plan::from_config(&config).err().unwrap();
    let problems: Vec<&str> = problems.iter().map(Problem::as_str).filter(|p| !p.starts_with("providers[")).collect();
    assert_eq!(
        problems,
        [
            "server.page_size = 1001: must be from 1 to 1000",
            "engine.lease_seconds = 2: must be at least 3",
            "engine.max_concurrent = 0: must be at least 1",
            "notifications.max_attempts = 0: must be at least 1",
            "types[0] (Slipway.Example/virtualNetworks): max_history = 0: must be at least 1",
        ]
    );
}

#[test]
fn notification_limits_that_contradict_each_other_are_refused_not_lowered() {
    let config = load(&[
        ("SLIPWAY_NOTIFICATIONS__CONNECT_TIMEOUT_SECONDS", "9"),
        ("SLIPWAY_NOTIFICATIONS__REQUEST_TIMEOUT_SECONDS", "5"),
        ("SLIPWAY_NOTIFICATIONS__MAX_CONCURRENT", "4"),
        ("SLIPWAY_NOTIFICATIONS__MAX_PER_DESTINATION", "8"),
    ]);
    let mut found = Found::default();
    notifier(&config, Default::default(), &mut found);
    let problems: Vec<String> = found.finish(Some(())).unwrap_err().iter().map(|p| p.as_str().to_string()).collect();
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].starts_with("notifications.connect_timeout_seconds = 9 is longer than request_timeout_seconds = 5")
    );
    assert!(problems[1].starts_with("notifications.max_per_destination = 8 is more than max_concurrent = 4"));
}

#[test]
fn the_database_goes_under_the_data_dir_unless_its_path_is_absolute() {
    let config = load(&[]);
    let data = config.data_dir().unwrap();
    assert!(data.is_absolute());
    let path = |config: &Config| match StorePlan::from_config(config) {
        Ok(StorePlan::Sqlite(o)) => o.path,
        other => panic!("{other:?}"),
    };
    assert_eq!(path(&config), data.join("slipway.db"));
    assert_eq!(path(&load(&[("SLIPWAY_STORE__URL", "sqlite:/srv/s.db")])), std::path::Path::new("/srv/s.db"));
    // Unset: the platform's data directory; relative: against the configuration's directory.
    let mut config = load(&[]);
    config.server.data_dir = None;
    assert_eq!(config.data_dir(), Ok(dirs::data_dir().unwrap().join("slipway")));
    config.server.data_dir = Some("state".into());
    assert_eq!(config.data_dir(), Ok(config.base_dir.join("state")));
    config.server.data_dir = Some("".into());
    assert_eq!(config.data_dir(), Err("server.data_dir is empty".to_string()));
}

#[test]
fn the_built_in_default_without_its_checkout_is_one_problem_naming_the_way_out() {
    let mut config = load(&[]);
    config.base_dir = std::path::PathBuf::from("/nonexistent/checkout/examples");
    let problems = Plan::from_config(&config).err().unwrap();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].as_str().starts_with(
            "the built-in configuration reads its schemas and playbooks from /nonexistent/checkout/examples"
        )
    );
    assert!(problems[0].as_str().contains("give --config a copy of examples/slipway.toml"));
    assert_eq!(crate::check::check(&config), [problems[0].to_string()]);
    // A file of one's own at a missing place is judged entry by entry as ever.
    config.built_in = false;
    assert!(Plan::from_config(&config).err().unwrap().len() > 1);
}
