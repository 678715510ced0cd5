//! Connection profiles: `~/.config/slipway/config.toml` (or `SLIPWAY_CONFIG`) keeps named
//! profiles — server URL, token, default subscription and resource group — and which one is
//! current. Each setting is resolved flag > environment > profile, so a script can pin one
//! value without editing anyone's file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::CliError;

/// Where a server listens when nothing says otherwise (the example configuration's).
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";
const DEFAULT_PROFILE: &str = "default";

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_group: Option<String>,
    /// Get the token from an identity provider instead (when no token is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<OidcProfile>,
}

/// Where a profile's token comes from when it names no token: the issuer, the CLI's client id
/// there and the scopes to ask for (ones that yield an access token for Slipway's audience).
/// The client secret, for the client-credentials grant, is only ever read from
/// `SLIPWAY_CLIENT_SECRET`; without it the device flow asks a person.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OidcProfile {
    pub issuer: String,
    pub client_id: String,
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// The whole file.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProfileFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

/// The file's path: `SLIPWAY_CONFIG`, else the platform's config directory.
pub fn path(env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, CliError> {
    if let Some(p) = env("SLIPWAY_CONFIG").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    dirs::config_dir()
        .map(|d| d.join("slipway").join("config.toml"))
        .ok_or_else(|| CliError::Usage("no config directory on this platform: set SLIPWAY_CONFIG".into()))
}

impl ProfileFile {
    /// A missing file is an empty one: profiles are optional.
    pub fn load(path: &Path) -> Result<ProfileFile, CliError> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|e| CliError::Usage(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ProfileFile::default()),
            Err(e) => Err(CliError::Usage(format!("reading {}: {e}", path.display()))),
        }
    }

    /// Written owner-only: the file holds tokens.
    pub fn save(&self, path: &Path) -> Result<(), CliError> {
        let local = |e: std::io::Error| CliError::Local(format!("writing {}: {e}", path.display()));
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(local)?;
        }
        let text = toml::to_string_pretty(self).map_err(|e| CliError::Local(e.to_string()))?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(path).map_err(local)?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(local)
    }

    pub fn current_name(&self) -> &str {
        self.current.as_deref().unwrap_or(DEFAULT_PROFILE)
    }
}

/// What the command line says about the connection (each `None` when not given).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub profile: Option<String>,
    pub url: Option<String>,
    pub token: Option<String>,
    pub subscription: Option<String>,
    pub resource_group: Option<String>,
}

/// The settings a command runs with, after flag > environment > profile.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub profile: String,
    pub url: String,
    pub token: Option<String>,
    pub subscription: Option<String>,
    pub resource_group: Option<String>,
    /// The profile's identity provider, used when no token is set.
    pub oidc: Option<OidcProfile>,
}

impl Settings {
    pub fn resolve(
        flags: &Overrides,
        env: &dyn Fn(&str) -> Option<String>,
        file: &ProfileFile,
    ) -> Result<Settings, CliError> {
        let env = |name: &str| env(name).filter(|v| !v.is_empty());
        let profile_name = flags.profile.clone().or_else(|| env("SLIPWAY_PROFILE"));
        let explicit = profile_name.is_some();
        let profile_name = profile_name.unwrap_or_else(|| file.current_name().to_string());
        let profile = match file.profiles.get(&profile_name) {
            Some(p) => p.clone(),
            None if explicit => return Err(CliError::Usage(format!("no profile named '{profile_name}'"))),
            None => Profile::default(),
        };
        let pick = |flag: &Option<String>, var: &str, saved: &Option<String>| {
            flag.clone().or_else(|| env(var)).or_else(|| saved.clone())
        };
        Ok(Settings {
            url: pick(&flags.url, "SLIPWAY_URL", &profile.url).unwrap_or_else(|| DEFAULT_URL.to_string()),
            token: pick(&flags.token, "SLIPWAY_TOKEN", &profile.token),
            subscription: pick(&flags.subscription, "SLIPWAY_SUBSCRIPTION", &profile.subscription),
            resource_group: pick(&flags.resource_group, "SLIPWAY_RESOURCE_GROUP", &profile.resource_group),
            oidc: profile.oidc,
            profile: profile_name,
        })
    }

    pub fn subscription(&self) -> Result<&str, CliError> {
        self.subscription.as_deref().ok_or_else(|| {
            CliError::Usage("no subscription: pass --subscription, set SLIPWAY_SUBSCRIPTION or a profile's".into())
        })
    }

    pub fn resource_group(&self) -> Result<&str, CliError> {
        self.resource_group.as_deref().ok_or_else(|| {
            CliError::Usage(
                "no resource group: pass --resource-group, set SLIPWAY_RESOURCE_GROUP or a profile's".into(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> ProfileFile {
        let mut f = ProfileFile { current: Some("lab".into()), ..Default::default() };
        let lab = Profile {
            url: Some("http://lab:1".into()),
            subscription: Some("sub-lab".into()),
            resource_group: Some("rg-lab".into()),
            ..Default::default()
        };
        f.profiles.insert("lab".into(), lab);
        f.profiles.insert("prod".into(), Profile { url: Some("http://prod:1".into()), ..Default::default() });
        f
    }

    #[test]
    fn a_flag_beats_the_environment_which_beats_the_profile() {
        let env = |k: &str| (k == "SLIPWAY_RESOURCE_GROUP" || k == "SLIPWAY_URL").then(|| format!("env-{k}"));
        let flags = Overrides { url: Some("http://flag:1".into()), ..Default::default() };
        let s = Settings::resolve(&flags, &env, &file()).unwrap();
        assert_eq!(s.url, "http://flag:1");
        assert_eq!(s.resource_group.as_deref(), Some("env-SLIPWAY_RESOURCE_GROUP"));
        assert_eq!(s.subscription.as_deref(), Some("sub-lab"));
        assert_eq!(s.profile, "lab");
    }

    #[test]
    fn the_profile_is_chosen_by_flag_then_environment_then_current() {
        let env = |k: &str| (k == "SLIPWAY_PROFILE").then(|| "prod".to_string());
        let s = Settings::resolve(&Overrides::default(), &env, &file()).unwrap();
        assert_eq!((s.profile.as_str(), s.url.as_str()), ("prod", "http://prod:1"));
        let flags = Overrides { profile: Some("nope".into()), ..Default::default() };
        assert!(matches!(Settings::resolve(&flags, &env, &file()), Err(CliError::Usage(_))));
        let s = Settings::resolve(&Overrides::default(), &|_| None, &ProfileFile::default()).unwrap();
        assert_eq!((s.profile.as_str(), s.url.as_str()), ("default", DEFAULT_URL));
    }

    #[test]
    fn the_file_round_trips_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/config.toml");
        assert_eq!(ProfileFile::load(&path).unwrap(), ProfileFile::default());
        file().save(&path).unwrap();
        assert_eq!(ProfileFile::load(&path).unwrap(), file());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }
}
