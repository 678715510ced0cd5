//! The inputs ansible-runner reads from a job directory, written before launching: the extra
//! vars (as YAML with every string tagged `!unsafe`), the inventory, runner's settings and
//! environment, and for a check-mode job the `ansible-playbook` arguments that mark it one.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use serde_json::{Value, json};
use slipway_provider::LaunchRequest;

use super::{JobDir, write_private};

/// What a check-mode job passes `ansible-playbook`: report what would change, with diffs,
/// and change nothing.
const CHECK_MODE_ARGS: &str = "--check --diff";

/// What [`JobDir::create`] needs.
pub struct Layout<'a> {
    pub request: &'a LaunchRequest,
    pub python: &'a Path,
    pub extra_vars: &'a serde_json::Map<String, Value>,
    pub job_timeout_secs: Option<u64>,
}

impl JobDir {
    /// Creates the directory (exclusively: an existing dir is an error) and everything
    /// ansible-runner reads from it.
    pub fn create(&self, layout: &Layout<'_>) -> io::Result<()> {
        fs::DirBuilder::new().mode(0o700).create(&self.dir)?;
        for sub in ["env", "inventory", "tmp"] {
            fs::DirBuilder::new().mode(0o700).create(self.dir.join(sub))?;
        }
        let python = layout.python.display().to_string();
        write_private(
            &self.extravars(),
            extravars_yaml(&extravars(layout.request, &python, layout.extra_vars)).as_bytes(),
        )?;
        write_private(
            &self.dir.join("inventory/hosts"),
            format!("localhost ansible_connection=local ansible_python_interpreter={python}\n").as_bytes(),
        )?;
        let mut settings = json!({
            // How often runner checks for cancellation and job_timeout (default 5 s).
            "pexpect_timeout": 1,
            // The playbook output is in artifacts/run/stdout; don't duplicate it.
            "suppress_ansible_output": true,
        });
        if let Some(t) = layout.job_timeout_secs {
            settings["job_timeout"] = json!(t);
        }
        write_private(&self.dir.join("env/settings"), settings.to_string().as_bytes())?;
        // Runner records its whole environment in artifacts/run/command: only paths here.
        let tmp = self.tmp();
        let envvars = json!({
            // AnsiballZ unpacks modules with Python's tempfile, which ignores ANSIBLE_*.
            "TMPDIR": tmp.display().to_string(),
            "ANSIBLE_LOCAL_TEMP": tmp.join("local").display().to_string(),
            "ANSIBLE_REMOTE_TEMP": tmp.join("remote").display().to_string(),
            "ANSIBLE_NOCOLOR": "1",
        });
        write_private(&self.dir.join("env/envvars"), envvars.to_string().as_bytes())?;
        if layout.request.is_check() {
            write_private(&self.cmdline(), CHECK_MODE_ARGS.as_bytes())?;
        }
        Ok(())
    }
}

/// The extra vars a playbook sees: the `slipway` envelope plus the idempotency key and
/// the pinned interpreter (interpreter discovery picks broken shims on some hosts).
fn extravars(r: &LaunchRequest, python: &str, static_vars: &serde_json::Map<String, Value>) -> Value {
    let mut vars = static_vars.clone();
    vars.extend(slipway_provider::slipway_extra_vars(r));
    vars.insert("ansible_python_interpreter".into(), json!(python));
    Value::Object(vars)
}

/// Renders extra vars as YAML flow text with every string tagged `!unsafe`.
///
/// Ansible templates extra vars: a property such as `{{ lookup('pipe', 'id') }}` would
/// run on this host (verified with ansible-core 2.19). `!unsafe` makes Ansible treat the
/// value as a literal. Keys are not templated, so they stay plain. JSON is not enough:
/// it cannot carry the tag.
fn extravars_yaml(v: &Value) -> String {
    let mut out = String::new();
    write_yaml(&mut out, v);
    out.push('\n');
    out
}

fn write_yaml(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&yaml_number(n)),
        Value::String(s) => {
            out.push_str("!unsafe ");
            write_yaml_str(out, s);
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_yaml(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_yaml_str(out, k);
                out.push_str(": ");
                write_yaml(out, item);
            }
            out.push('}');
        }
    }
}

/// YAML 1.1 (PyYAML) reads `1e300` as a string: a float needs a `.` in the mantissa and
/// a signed exponent (`1.0e+300`).
fn yaml_number(n: &serde_json::Number) -> String {
    let s = n.to_string();
    if !n.is_f64() {
        return s;
    }
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s.as_str(), None),
    };
    let mut out = mantissa.to_owned();
    if !out.contains('.') {
        out.push_str(".0");
    }
    if let Some(exp) = exp {
        out.push('e');
        if !exp.starts_with(['+', '-']) {
            out.push('+');
        }
        out.push_str(exp);
    }
    out
}

/// A YAML double-quoted scalar. Escapes everything PyYAML would reject as non-printable
/// (control characters, DEL, C1 controls, U+FFFE/U+FFFF) or would read as a line break.
fn write_yaml_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            // NEL, LS, PS and BOM are printable but YAML folds or strips them: escaped.
            '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{feff}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            ' '..='~' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' => out.push(c),
            c if (c as u32) >= 0x10000 => out.push(c),
            c => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_tags_every_string_and_escapes() {
        let v = json!({"a": "x\"y\\z\n\u{7f}é😀", "n": [1, -2, 1.5, 1e300, 2.5e-7], "b": true, "z": null});
        let y = extravars_yaml(&v);
        assert_eq!(
            y,
            "{\"a\": !unsafe \"x\\\"y\\\\z\\n\\u007fé😀\", \"b\": true, \
             \"n\": [1, -2, 1.5, 1.0e+300, 2.5e-7], \"z\": null}\n"
        );
    }
}
