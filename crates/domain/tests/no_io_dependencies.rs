//! Architecture invariant: the domain crate depends on no I/O crate. Checked here, against
//! its own manifest, so a new dependency has to be argued for in review.

#[test]
fn domain_depends_only_on_pure_crates() {
    let manifest = include_str!("../Cargo.toml");
    let deps: Vec<&str> = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("a [dependencies] table")
        .lines()
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter_map(|l| l.split(['.', '=', ' ']).next())
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .collect();
    let allowed = ["serde", "serde_json", "thiserror"];
    for dep in &deps {
        assert!(allowed.contains(dep), "slipway-domain must stay free of I/O crates; found '{dep}'");
    }
}
