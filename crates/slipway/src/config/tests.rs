//! Loading, overrides and validation of `slipway.toml`.

use super::*;

#[test]
fn default_config_loads() {
    let c = Config::load(None, []).unwrap();
    assert_eq!(c.server.listen, "127.0.0.1:8080");
    let s = &c.server;
    let limits = (s.header_read_timeout_seconds, s.body_read_timeout_seconds, s.idle_timeout_seconds);
    assert_eq!((limits, s.max_connections), ((10, 30, 60), 0), "the example's server limits are the defaults");
    let d = Server::default();
    assert_eq!((d.header_read_timeout_seconds, d.body_read_timeout_seconds, d.idle_timeout_seconds), limits);
    assert_eq!(c.store.url, "sqlite:slipway.db");
    assert!(c.types.len() >= 4);
    assert!(matches!(c.providers[0], ProviderConfig::Ansible(_)));
}

#[test]
fn notifications_default_as_the_example_says_and_can_be_overridden() {
    let n = Config::load(None, []).unwrap().notifications;
    let d = NotificationsConfig::default();
    let keys = |n: &NotificationsConfig| {
        (
            n.request_timeout_seconds,
            n.connect_timeout_seconds,
            n.max_concurrent,
            n.max_per_destination,
            n.max_attempts,
            n.max_backoff_seconds,
        )
    };
    assert_eq!(keys(&n), (5, 2, 32, 4, 20, 300));
    assert_eq!(keys(&d), keys(&n), "the example's notification settings are the defaults");
    let env = [("SLIPWAY_NOTIFICATIONS__MAX_PER_DESTINATION".to_string(), "2".to_string())];
    assert_eq!(Config::load(None, env).unwrap().notifications.max_per_destination, 2);
    let unknown = [("SLIPWAY_NOTIFICATIONS__TIMEOUT".to_string(), "1".to_string())];
    assert!(matches!(Config::load(None, unknown), Err(ConfigError::Parse(_))));
}

#[test]
fn env_overrides_tables_arrays_and_scalars() {
    let env = [
        ("SLIPWAY_SERVER__LISTEN".to_string(), "0.0.0.0:9000".to_string()),
        ("SLIPWAY_SERVER__RETRY_AFTER_SECONDS".to_string(), "5".to_string()),
        ("SLIPWAY_TYPES__0__POLL_INTERVAL_SECONDS".to_string(), "0.5".to_string()),
        ("SLIPWAY_IGNORED".to_string(), "x".to_string()),
    ];
    let c = Config::load(None, env).unwrap();
    assert_eq!(c.server.listen, "0.0.0.0:9000");
    assert_eq!(c.server.retry_after_seconds, 5);
    assert_eq!(c.types[0].poll_interval_seconds, 0.5);
}

#[test]
fn a_most_poll_interval_shorter_than_the_poll_interval_is_refused() {
    let set = |max: &str| {
        let env = [
            ("SLIPWAY_TYPES__0__POLL_INTERVAL_SECONDS".to_string(), "2".to_string()),
            ("SLIPWAY_TYPES__0__MAX_POLL_INTERVAL_SECONDS".to_string(), max.to_string()),
        ];
        Config::load(None, env)
    };
    assert_eq!(set("2").unwrap().types[0].max_poll_interval_seconds, Some(2.0));
    for bad in ["1.5", "-1", "inf"] {
        match set(bad) {
            Err(ConfigError::Invalid(m)) => assert!(m.contains("max_poll_interval_seconds"), "{m}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[test]
fn aap_providers_parse() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slipway.toml");
    std::fs::write(
        &path,
        r#"
[[providers]]
name = "aap"
type = "aap"
url = "https://aap.example.com"
api_prefix = "/api/controller/"
token_env = "AAP_TOKEN"
organization = "Platform"
template_prefix = "osac"
kind_overrides = { ClusterOrder = "hosted-cluster" }
[[types]]
namespace = "Ns"
type = "things"
kind = "Thing"
api_versions = ["2025-01-01"]
provider = "aap"
"#,
    )
    .unwrap();
    let c = Config::load(Some(&path), []).unwrap();
    let ProviderConfig::Aap(a) = &c.providers[0] else { panic!("not aap: {:?}", c.providers[0]) };
    assert_eq!(a.api_prefix, "/api/controller/");
    assert_eq!(a.token_env.as_deref(), Some("AAP_TOKEN"));
    assert_eq!(a.kind_overrides["ClusterOrder"], "hosted-cluster");
    assert_eq!(a.envelope, "slipway");
    assert_eq!(a.launch_ambiguity_seconds(), 90, "the request timeout plus a minute");
    std::fs::write(&path, "[[providers]]\nname = \"x\"\ntype = \"aap\"\nurl = \"u\"\ntoken = \"inline\"\n").unwrap();
    assert!(matches!(Config::load(Some(&path), []), Err(ConfigError::Parse(_))), "no inline secrets");
}

#[test]
fn a_launch_ambiguity_window_shorter_than_the_request_timeout_is_refused() {
    let base = "[[providers]]\nname = \"aap\"\ntype = \"aap\"\nurl = \"https://aap\"\nrequest_timeout_seconds = 30\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slipway.toml");
    std::fs::write(&path, format!("{base}launch_ambiguity_seconds = 29\n")).unwrap();
    match Config::load(Some(&path), []) {
        Err(ConfigError::Invalid(m)) => {
            assert!(m.contains("provider 'aap'") && m.contains("launch_ambiguity_seconds (29)"), "{m}");
            assert!(m.contains("request_timeout_seconds (30)"), "{m}");
        }
        other => panic!("accepted: {other:?}"),
    }
    std::fs::write(&path, format!("{base}launch_ambiguity_seconds = 30\n")).unwrap();
    Config::load(Some(&path), []).expect("equal to the request timeout is allowed");
}

#[test]
fn callbacks_default_to_https_and_public_hosts_and_bad_allowlists_are_refused() {
    let n = Config::load(None, []).unwrap().notifications;
    assert!(n.callback_allowlist.is_empty());
    assert!(!n.callback_allow_http && !n.callback_allow_private_networks);
    let policy = n.callback_policy().unwrap();
    assert!(policy.check_uri("https://hooks.example.com/cb").is_ok());
    assert!(policy.check_uri("https://127.0.0.1/cb").is_err());
    assert!(policy.check_uri("http://hooks.example.com/cb").is_err());

    let env = [
        ("SLIPWAY_NOTIFICATIONS__CALLBACK_ALLOWLIST".to_string(), r#"["https://*.example.com"]"#.to_string()),
        ("SLIPWAY_NOTIFICATIONS__CALLBACK_ALLOW_PRIVATE_NETWORKS".to_string(), "true".to_string()),
    ];
    let policy = Config::load(None, env).unwrap().notifications.callback_policy().unwrap();
    assert!(policy.check_uri("https://a.example.com/").is_ok());
    assert!(policy.check_uri("https://a.example.org/").is_err());
    assert!(policy.allow_private_networks());

    let http_entry =
        [("SLIPWAY_NOTIFICATIONS__CALLBACK_ALLOWLIST".to_string(), r#"["http://hooks.example.com"]"#.to_string())];
    match Config::load(None, http_entry) {
        Err(ConfigError::Invalid(m)) => {
            assert!(m.contains("callback_allowlist entry 'http://hooks.example.com'"), "{m}");
            assert!(m.contains("callback_allow_http"), "{m}");
        }
        other => panic!("accepted: {other:?}"),
    }
}

#[test]
fn type_name_rules_are_checked_at_load() {
    let c = Config::load(None, []).unwrap();
    assert!(c.types.iter().all(|t| t.name_pattern.is_none() && t.name_max_length == 260));
    let env = |pattern: &str, max: &str| {
        [
            ("SLIPWAY_TYPES__1__NAME_PATTERN".to_string(), format!("\"{pattern}\"")),
            ("SLIPWAY_TYPES__1__NAME_MAX_LENGTH".to_string(), max.to_string()),
        ]
    };
    let c = Config::load(None, env("[a-z][a-z0-9-]*", "24")).unwrap();
    let rule = c.types[1].name_rule().unwrap();
    assert!(rule.allows("subnet-1") && !rule.allows("Subnet_1") && !rule.allows(&"s".repeat(25)));
    let named = format!("type {}/{}", c.types[1].namespace, c.types[1].type_name);
    for (pattern, max, says) in
        [("[a-z", "24", "name_pattern"), ("a", "0", "name_max_length"), ("a", "261", "name_max_length")]
    {
        match Config::load(None, env(pattern, max)) {
            Err(ConfigError::Invalid(m)) => {
                assert!(m.contains(&format!("): resource {named}")) && m.contains(says), "{m}");
            }
            other => panic!("{pattern} / {max} accepted: {other:?}"),
        }
    }
}

#[test]
fn tls_files_resolve_against_the_config_and_come_in_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slipway.toml");
    let load = |text: &str| {
        std::fs::write(&path, text).unwrap();
        Config::load(Some(&path), [])
    };
    let c = load("[server]\ntls_cert_file = \"tls/cert.pem\"\ntls_key_file = \"/etc/key.pem\"\n").unwrap();
    let tls = c.tls_options().unwrap().expect("TLS on");
    assert_eq!((tls.cert_file, tls.key_file), (dir.path().join("tls/cert.pem"), "/etc/key.pem".into()));
    assert_eq!((tls.client_ca_file, tls.reload_interval.as_secs()), (None, 5));
    assert!(load("").unwrap().tls_options().unwrap().is_none());
    for (text, says) in [
        ("[server]\ntls_cert_file = \"c.pem\"\n", "give both or neither"),
        ("[server]\ntls_client_ca_file = \"ca.pem\"\n", "needs server.tls_cert_file"),
        ("[store]\nsslmode = \"require\"\n", "PostgreSQL only"),
        ("[store]\nurl = \"postgres://db/x\"\nsslmode = \"verify-ca\"\n", "store.sslmode 'verify-ca'"),
    ] {
        match load(text) {
            Err(ConfigError::Invalid(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("{text} accepted: {other:?}"),
        }
    }
    let c =
        load("[store]\nurl = \"postgres://db/x\"\nsslmode = \"verify-full\"\nssl_root_cert = \"ca.pem\"\n").unwrap();
    assert_eq!(c.store_tls().unwrap(), (Some(SslMode::VerifyFull), Some(dir.path().join("ca.pem"))));
}

#[test]
fn bad_overrides_and_unknown_keys_are_errors() {
    let bad = [("SLIPWAY_TYPES__99__KIND".to_string(), "X".to_string())];
    assert!(matches!(Config::load(None, bad), Err(ConfigError::Env(..))));
    let unknown = [("SLIPWAY_SERVER__LISTN".to_string(), "x".to_string())];
    assert!(matches!(Config::load(None, unknown), Err(ConfigError::Parse(_))));
}
