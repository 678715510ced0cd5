//! Small codecs the simulator needs and that are not worth a dependency: ISO-8601 times,
//! base64 (basic auth), form-urlencoding the way Django/Python do it, Python's `json.dumps`
//! spacing, a flat-YAML fallback for `extra_vars` strings, and a seeded PRNG for faults.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

// ---------------------------------------------------------------------------------------------
// Time: microseconds since the Unix epoch, UTC.

/// The wall clock read once, with tokio's clock at that moment.
static ANCHOR: OnceLock<(i64, tokio::time::Instant)> = OnceLock::new();

/// Now, as the simulator stamps jobs and events: the wall clock when it was first read, moved
/// on by tokio's clock since. Every duration the simulator measures (a job's phases, a
/// Retry-After window) is tokio's, so its stamps agree with them, and a test on paused time
/// sees a job that ran a paused minute stamped a minute long.
pub fn now_micros() -> i64 {
    let (wall, at) = *ANCHOR.get_or_init(|| {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0);
        (wall, tokio::time::Instant::now())
    });
    wall.saturating_add(tokio::time::Instant::now().saturating_duration_since(at).as_micros() as i64)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn split_micros(micros: i64) -> (i64, i64, i64, i64, i64, i64, i64) {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60, frac)
}

/// The API's format (DRF `DateTimeField` with UTC): `2024-10-23T12:34:56.123456Z`.
pub fn format_api(micros: i64) -> String {
    let (y, m, d, hh, mm, ss, frac) = split_micros(micros);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{frac:06}Z")
}

/// Python's `datetime.isoformat()` of an aware UTC time, as in AWX notification bodies:
/// `2024-10-23T12:34:56.123456+00:00` (no fraction when it is zero).
pub fn format_python(micros: i64) -> String {
    let (y, m, d, hh, mm, ss, frac) = split_micros(micros);
    if frac == 0 {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}+00:00")
    } else {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{frac:06}+00:00")
    }
}

/// Parses what Django's `parse_datetime` / `parse_date` accept for a filter value:
/// `YYYY-MM-DD`, or `YYYY-MM-DD[T ]HH:MM[:SS[.ffffff]]` with an optional `Z` or `±HH[:MM]`
/// (naive times are UTC, AWX's `TIME_ZONE`).
pub fn parse_datetime(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = s.get(from..from + len)?;
        if part.bytes().all(|c| c.is_ascii_digit()) { part.parse().ok() } else { None }
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    if b.len() == 10 {
        return Some(days * 86_400 * 1_000_000);
    }
    if b[10] != b'T' && b[10] != b' ' {
        return None;
    }
    let hh = num(11, 2)?;
    if b.get(13) != Some(&b':') {
        return None;
    }
    let mm = num(14, 2)?;
    let mut i = 16;
    let mut ss = 0;
    let mut frac = 0i64;
    if b.get(i) == Some(&b':') {
        ss = num(i + 1, 2)?;
        i += 3;
        if matches!(b.get(i), Some(b'.') | Some(b',')) {
            let start = i + 1;
            let mut end = start;
            while end < b.len() && b[end].is_ascii_digit() {
                end += 1;
            }
            if end == start || end - start > 6 {
                return None;
            }
            let digits = &s[start..end];
            frac = digits.parse::<i64>().ok()? * 10i64.pow(6 - digits.len() as u32);
            i = end;
        }
    }
    if hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let rest = &s[i..];
    let offset_secs = match rest {
        "" | "Z" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let tz = &rest[1..];
            let (oh, om) = match tz.len() {
                2 => (tz.parse::<i64>().ok()?, 0),
                4 => (tz[..2].parse::<i64>().ok()?, tz[2..].parse::<i64>().ok()?),
                5 if tz.as_bytes()[2] == b':' => (tz[..2].parse::<i64>().ok()?, tz[3..].parse::<i64>().ok()?),
                _ => return None,
            };
            sign * (oh * 3600 + om * 60)
        }
    };
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss - offset_secs;
    Some(secs * 1_000_000 + frac)
}

// ---------------------------------------------------------------------------------------------
// Base64 (standard alphabet, padding optional) for `Authorization: Basic`.

pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// URLs: percent-decoding and Python's `urlencode` (quote_plus), which DRF uses for the
// `next`/`previous` links.

pub fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a query string into ordered `(key, value)` pairs, keeping blank values (like
/// Django's `QueryDict`).
pub fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k, true), percent_decode(v, true)),
            None => (percent_decode(p, true), String::new()),
        })
        .collect()
}

/// Python's `quote_plus`: unreserved characters stay, space becomes `+`, the rest `%XX`.
pub fn quote_plus(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => out.push(c as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{c:02X}")),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Python `json.dumps` spacing (`", "` and `": "`), which is how AWX stores `extra_vars`.

struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

pub fn python_json_dumps(v: &Value) -> String {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, PythonFormatter);
    // Serializing a `Value` into memory cannot fail.
    serde::Serialize::serialize(v, &mut ser).expect("serialize a JSON value");
    String::from_utf8(buf).expect("serde_json writes UTF-8")
}

// ---------------------------------------------------------------------------------------------
// `extra_vars` given as a string: AWX's `parse_yaml_or_json`. JSON first; then a flat YAML
// mapping (`key: scalar` lines), which is what clients send in practice. Nested YAML is not
// supported and answers 400 like unparsable input.

pub fn parse_yaml_or_json(s: &str) -> Result<Map<String, Value>, String> {
    if s.trim().is_empty() {
        return Ok(Map::new());
    }
    let json_err = match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) => return Ok(m),
        Ok(other) => {
            return Err(format!("Input type `{}` is not a dictionary", python_type_name(&other)));
        }
        Err(e) => e.to_string(),
    };
    let mut map = Map::new();
    for (n, line) in s.lines().enumerate() {
        let t = line.trim_end();
        if t.trim().is_empty() || t.trim_start().starts_with('#') || t == "---" {
            continue;
        }
        let Some((k, v)) = t.split_once(':') else {
            return Err(format!(
                "Cannot parse as JSON (error: {json_err}) or YAML (error: line {}: expected `key: value`).",
                n + 1
            ));
        };
        if k.starts_with(char::is_whitespace) || k.is_empty() {
            return Err(format!(
                "Cannot parse as JSON (error: {json_err}) or YAML (error: line {}: nested YAML is not supported by aap-sim).",
                n + 1
            ));
        }
        map.insert(unquote(k.trim()), yaml_scalar(v.trim()));
    }
    Ok(map)
}

fn python_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

fn unquote(s: &str) -> String {
    let b = s.as_bytes();
    if b.len() >= 2 && ((b[0] == b'"' && b[b.len() - 1] == b'"') || (b[0] == b'\'' && b[b.len() - 1] == b'\'')) {
        s[1..s.len() - 1].to_string()
    } else {
        s.to_string()
    }
}

fn yaml_scalar(v: &str) -> Value {
    let v = v.split(" #").next().unwrap_or("").trim();
    match v {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if v.starts_with('"') || v.starts_with('\'') {
        return Value::String(unquote(v));
    }
    if (v.starts_with('[') || v.starts_with('{'))
        && let Ok(j) = serde_json::from_str(v)
    {
        return j;
    }
    if let Ok(i) = v.parse::<i64>() {
        return Value::from(i);
    }
    if let Ok(f) = v.parse::<f64>()
        && f.is_finite()
    {
        return Value::from(f);
    }
    Value::String(v.to_string())
}

// ---------------------------------------------------------------------------------------------
// SplitMix64: a tiny deterministic generator; fault decisions must repeat for a given seed.

#[derive(Debug, Clone)]
pub struct Prng(u64);

impl Prng {
    pub fn new(seed: u64) -> Prng {
        Prng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `percent`/100. Draws nothing when the percentage is 0, so a fault
    /// that is off does not consume the sequence.
    pub fn percent(&mut self, percent: u8) -> bool {
        percent > 0 && self.next_u64() % 100 < u64::from(percent)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trip() {
        let t = parse_datetime("2024-10-23T12:34:56.123456Z").unwrap();
        assert_eq!(format_api(t), "2024-10-23T12:34:56.123456Z");
        assert_eq!(format_python(t), "2024-10-23T12:34:56.123456+00:00");
        assert_eq!(parse_datetime("2024-10-23T14:34:56.123456+02:00"), Some(t));
        assert_eq!(parse_datetime("2024-10-23 12:34:56.123456"), Some(t));
        assert_eq!(parse_datetime("2024-10-23"), parse_datetime("2024-10-23T00:00:00Z"));
        assert_eq!(parse_datetime("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(format_python(0), "1970-01-01T00:00:00+00:00");
        assert!(parse_datetime("yesterday").is_none());
        assert!(parse_datetime("2024-13-01").is_none());
        assert!(parse_datetime("2024-10-23T12:34:56 00:00").is_none());
    }

    #[test]
    fn codecs() {
        assert_eq!(base64_decode("YWRtaW46c2VjcmV0").unwrap(), b"admin:secret");
        assert_eq!(base64_decode("YQ==").unwrap(), b"a");
        assert!(base64_decode("a*b").is_none());
        assert_eq!(quote_plus("1,2 x/é"), "1%2C2+x%2F%C3%A9");
        assert_eq!(percent_decode("a%2Cb+c%zz", true), "a,b c%zz");
        assert_eq!(percent_decode("name++org", false), "name++org");
        assert_eq!(
            parse_query("id__in=1%2C2&name=a+b&flag"),
            vec![("id__in".into(), "1,2".into()), ("name".into(), "a b".into()), ("flag".into(), String::new())]
        );
        assert_eq!(
            python_json_dumps(&serde_json::json!({"a": [1, 2], "b": {"c": "x"}})),
            r#"{"a": [1, 2], "b": {"c": "x"}}"#
        );
    }

    #[test]
    fn extra_vars_strings() {
        assert_eq!(parse_yaml_or_json("{\"a\": 1}").unwrap()["a"], 1);
        let y = parse_yaml_or_json("---\na: 1\nb: 'two'\nc: true\nd: 1.5\n# comment\ne: plain text\n").unwrap();
        assert_eq!(
            serde_json::Value::Object(y),
            serde_json::json!({"a": 1, "b": "two", "c": true, "d": 1.5, "e": "plain text"})
        );
        assert!(parse_yaml_or_json("[1, 2]").unwrap_err().contains("not a dictionary"));
        assert!(parse_yaml_or_json("a:\n  b: 1").is_err());
        assert!(parse_yaml_or_json("").unwrap().is_empty());
    }
}
