//! Where a configuration file that does not load went wrong, all at once: every syntax error
//! the parser recovers past, then every section and every `[[providers]]`/`[[types]]` entry
//! deserialized on its own — so one bad key does not hide the next — each problem placed at
//! its line and column (the parser's spans) and, for an entry, named by its index and name.

use std::ops::Range;

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use super::{
    AuthConfig, EngineConfig, NotificationsConfig, ProviderConfig, SecretsConfig, Server, StoreConfig, TypeConfig,
};

/// Every problem of `text` (the file at `origin`), located; empty when the file as written
/// loads (a problem then came from an environment override).
pub(super) fn problems(text: &str, origin: &str) -> Vec<String> {
    // Each problem with where it is, so that they can be told in the file's order.
    let at = |span: Option<Range<usize>>, what: &str, message: &str| {
        let start = span.map_or(0, |s| s.start);
        let (line, column) = line_column(text, start);
        let what = if what.is_empty() { String::new() } else { format!(" {what}:") };
        (start, format!("{origin}:{line}:{column}:{what} {}", message.trim()))
    };
    let (doc, syntax) = DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        return in_order(syntax.iter().map(|e| at(e.span(), "", e.message())).collect());
    }
    let check = |value: &Spanned<DeValue<'_>>, what: &str, section: &str| {
        let result = match section {
            "server" => try_as::<Server>(value),
            "store" => try_as::<StoreConfig>(value),
            "engine" => try_as::<EngineConfig>(value),
            "notifications" => try_as::<NotificationsConfig>(value),
            "auth" => try_as::<AuthConfig>(value),
            "secrets" => try_as::<SecretsConfig>(value),
            "providers" => try_as::<ProviderConfig>(value),
            _ => try_as::<TypeConfig>(value),
        };
        result.err().map(|e| {
            let span = e.span().or_else(|| unknown_key(value, e.message())).unwrap_or(value.span());
            at(Some(span), what, e.message())
        })
    };
    let mut out = Vec::new();
    for (key, value) in doc.get_ref() {
        let section = key.get_ref().as_ref();
        match section {
            "server" | "store" | "engine" | "notifications" | "auth" | "secrets" => {
                out.extend(check(value, &format!("[{section}]"), section));
            }
            "providers" | "types" => match value.get_ref().as_array() {
                Some(entries) => {
                    for (i, entry) in entries.iter().enumerate() {
                        out.extend(check(entry, &entry_name(section, i, entry.get_ref()), section));
                    }
                }
                None => out.push(at(Some(value.span()), section, "must be an array of tables ([[…]])")),
            },
            other => out.push(at(
                Some(key.span()),
                "",
                &format!(
                    "unknown section `{other}`; expected server, store, engine, notifications, providers, types, \
                     auth or secrets"
                ),
            )),
        }
    }
    in_order(out)
}

fn in_order(mut located: Vec<(usize, String)>) -> Vec<String> {
    located.sort();
    located.into_iter().map(|(_, problem)| problem).collect()
}

/// Where the key an "unknown field" message names is in `table`: serde loses the span of a
/// key in an internally tagged entry (`[[providers]]`, by `type`).
fn unknown_key(table: &Spanned<DeValue<'_>>, message: &str) -> Option<Range<usize>> {
    let name = message.strip_prefix("unknown field `")?.split('`').next()?;
    table.get_ref().as_table()?.keys().find(|k| k.get_ref().as_ref() == name).map(Spanned::span)
}

/// Why `value` is not a `T`, if it is not.
fn try_as<T: DeserializeOwned>(value: &Spanned<DeValue<'_>>) -> Result<(), toml::de::Error> {
    let mut owned = value.clone();
    owned.get_mut().make_owned();
    T::deserialize(ValueDeserializer::from(owned)).map(drop)
}

/// `types[2] (Slipway.Example/things)`, `providers[0] (aap)`: as far as the entry names itself.
fn entry_name(section: &str, index: usize, entry: &DeValue<'_>) -> String {
    let text = |key: &str| entry.get(key).and_then(|v| v.get_ref().as_str()).unwrap_or("?").to_string();
    let name = if section == "types" { format!("{}/{}", text("namespace"), text("type")) } else { text("name") };
    format!("{section}[{index}] ({name})")
}

/// 1-based line and column (in characters) of byte `offset`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (before.matches('\n').count() + 1, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_named_and_placed() {
        let text = r#"
[server]
listen = 8080

[[providers]]
name = "local"
type = "ansible"
playbook_dir = "p"
bogus = 1

[[types]]
namespace = "A.B"
type = "things"
kind = "Thing"
api_versions = ["v1"]
provider = "local"
poll_interval_seconds = "fast"

[[types]]
namespace = "A.B"
type = "others"
kind = "Other"
api_versions = ["v1"]
provider = "local"
"#;
        let problems = problems(text, "slipway.toml");
        let find = |prefix: &str| {
            problems.iter().find(|p| p.starts_with(prefix)).unwrap_or_else(|| panic!("{prefix} in {problems:#?}"))
        };
        assert_eq!(problems.len(), 3, "{problems:#?}");
        find("slipway.toml:3:10: [server]:");
        assert!(find("slipway.toml:9:1: providers[0] (local):").contains("bogus"));
        assert!(find("slipway.toml:17:25: types[0] (A.B/things):").contains("f64"));
        // An unknown section is named where it is.
        let unknown = super::problems("[extra]\nx = 1\n", "f.toml");
        assert_eq!(
            unknown,
            [
                "f.toml:1:2: unknown section `extra`; expected server, store, engine, notifications, providers, types, auth or secrets"
            ]
        );
    }

    #[test]
    fn syntax_errors_are_all_reported_with_their_place() {
        let problems = problems("a = \nb = [1,\n", "f.toml");
        assert!(!problems.is_empty() && problems.iter().all(|p| p.starts_with("f.toml:")), "{problems:#?}");
        assert!(problems[0].starts_with("f.toml:1:"), "{problems:#?}");
    }

    #[test]
    fn lines_and_columns_count_from_one_in_characters() {
        assert_eq!(line_column("ab\ncé d", 0), (1, 1));
        assert_eq!(line_column("ab\ncé d", 3), (2, 1));
        assert_eq!(line_column("ab\ncé d", 7), (2, 4));
    }
}
