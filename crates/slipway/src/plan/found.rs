//! What building a plan found wrong: every problem, each naming its entry.

use std::fmt;

/// One reason a configuration cannot be served, naming its entry
/// (`types[2] (Contoso.Dns/dnsRecords): …`, `providers[0] (aap): …`,
/// `server.page_size = 5000: …`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem(String);

impl Problem {
    pub fn new(text: impl Into<String>) -> Self {
        Problem(text.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The problems found so far; a check that fails records its problem and goes on, so one
/// pass reports them all.
#[derive(Debug, Default)]
pub(crate) struct Found(Vec<Problem>);

impl Found {
    pub fn add(&mut self, text: impl Into<String>) {
        self.0.push(Problem::new(text));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value, or `None` with the error recorded.
    pub fn ok<T, E: fmt::Display>(&mut self, result: Result<T, E>) -> Option<T> {
        result.map_err(|e| self.add(e.to_string())).ok()
    }

    /// Runs `check` on a fresh collector and records what it found under `entry`
    /// (`types[2] (Contoso.Dns/dnsRecords): …`).
    pub fn within<T>(&mut self, entry: &str, check: impl FnOnce(&mut Found) -> T) -> T {
        let mut here = Found::default();
        let value = check(&mut here);
        self.0.extend(here.0.into_iter().map(|p| Problem(format!("{entry}: {p}"))));
        value
    }

    /// `value`, recorded as a problem when it is below `min`.
    pub fn at_least<T: PartialOrd + fmt::Display + Copy>(&mut self, key: &str, value: T, min: T) -> T {
        if value < min {
            self.add(format!("{key} = {value}: must be at least {min}"));
        }
        value
    }

    /// `value`, recorded as a problem when it is outside `min..=max`.
    pub fn between<T: PartialOrd + fmt::Display + Copy>(&mut self, key: &str, value: T, min: T, max: T) -> T {
        if value < min || value > max {
            self.add(format!("{key} = {value}: must be from {min} to {max}"));
        }
        value
    }

    /// `Ok(value)` when nothing was found, else every problem.
    pub fn finish<T>(self, value: Option<T>) -> Result<T, Vec<Problem>> {
        match value {
            Some(v) if self.0.is_empty() => Ok(v),
            _ => {
                debug_assert!(!self.0.is_empty(), "a part of the plan is missing without a problem saying why");
                Err(self.0)
            }
        }
    }

    pub fn into_problems(self) -> Vec<Problem> {
        self.0
    }
}
