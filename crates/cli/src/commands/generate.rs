//! Shell completions and man pages, generated from the one clap definition so they cannot
//! drift from the commands.

use std::path::Path;

use crate::error::CliError;

pub fn completions(shell: clap_complete::Shell, mut cli: clap::Command) -> Result<(), CliError> {
    let name = cli.get_name().to_string();
    clap_complete::generate(shell, &mut cli, name, &mut std::io::stdout());
    Ok(())
}

/// `slipway.1` and one page per subcommand (`slipway-resource-put.1`).
pub fn man(dir: &Path, cli: clap::Command) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).map_err(|e| CliError::Local(format!("creating {}: {e}", dir.display())))?;
    clap_mangen::generate_to(cli, dir).map_err(|e| CliError::Local(format!("writing man pages: {e}")))?;
    eprintln!("wrote man pages to {}", dir.display());
    Ok(())
}
