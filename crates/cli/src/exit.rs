//! The process exit codes, one enum mapped from every outcome in one place, so scripts can
//! branch on them and `docs/cli.md` and `--help` can state them once.

use crate::error::CliError;

/// Documented in `docs/cli.md` and in `slipway --help`; never renumber a variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    Succeeded = 0,
    OperationFailed = 1,
    Usage = 2,
    Canceled = 3,
    TimedOut = 4,
    CannotConnect = 5,
    Refused = 6,
    ApiError = 7,
}

/// The text `--help` ends with.
pub const EXIT_CODES_HELP: &str = "Exit codes: 0 succeeded; 1 the operation failed; 2 usage error; 3 canceled; \
4 timed out waiting; 5 cannot connect; 6 authentication or authorization refused (401/403); \
7 any other API error.";

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The one mapping from a command's result to the process's exit code.
    pub fn of(result: &Result<(), CliError>) -> Exit {
        match result {
            Ok(()) => Exit::Succeeded,
            Err(CliError::OperationFailed(_)) => Exit::OperationFailed,
            Err(CliError::Usage(_)) => Exit::Usage,
            Err(CliError::Canceled(_)) => Exit::Canceled,
            Err(CliError::TimedOut(_)) => Exit::TimedOut,
            Err(CliError::Connect(_)) => Exit::CannotConnect,
            Err(CliError::Api(e)) if e.status == 401 || e.status == 403 => Exit::Refused,
            Err(CliError::Api(_) | CliError::Local(_)) => Exit::ApiError,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;

    #[test]
    fn refusals_are_told_apart_from_other_api_errors() {
        let api = |status| Err(CliError::Api(ApiError::from_body(status, "")));
        assert_eq!(Exit::of(&api(401)), Exit::Refused);
        assert_eq!(Exit::of(&api(403)), Exit::Refused);
        assert_eq!(Exit::of(&api(404)), Exit::ApiError);
        assert_eq!(Exit::of(&Ok(())).code(), 0);
        assert_eq!(Exit::of(&Err(CliError::TimedOut("x".into()))).code(), 4);
    }
}
