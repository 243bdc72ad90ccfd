//! `palisade config`: named contexts in the client's config file (see [`crate::contexts`]);
//! no server is asked.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::{print_table, Failure, Outcome};
use crate::contexts::{self, Config, Context, REDACTED};
use crate::help;

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Create or update a context: a server, and the token and CA file to use with it.
    ///
    /// Create or update a context. Only the settings given change; an empty value (`--token
    /// ''`) removes one. The config file is written readable by its owner only.
    #[command(after_help = help::CONFIG_SET_CONTEXT)]
    SetContext {
        /// The context's name (letters, digits, `.`, `_` and `-`).
        name: String,
        /// The palisade server's URL (http:// or https://).
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// The API token to send to that server.
        #[arg(long, value_name = "TOKEN")]
        token: Option<String>,
        /// A PEM file of CA certificates to trust for the server (kept as an absolute path).
        #[arg(long, value_name = "FILE")]
        ca_file: Option<PathBuf>,
    },
    /// Make a context the current one: client commands use it unless told otherwise.
    #[command(after_help = help::CONFIG_USE_CONTEXT)]
    UseContext {
        /// The context's name.
        name: String,
    },
    /// Print the config file, its tokens shown as REDACTED.
    #[command(after_help = help::CONFIG_VIEW)]
    View,
    /// List the contexts; the current one is marked with *.
    #[command(after_help = help::CONFIG_GET_CONTEXTS)]
    GetContexts,
}

fn failure(error: contexts::ConfigError) -> Failure {
    Failure(error.to_string())
}

pub fn config(command: &ConfigCommand) -> Outcome {
    let path = contexts::default_location().map_err(failure)?;
    let mut config = Config::load(&path).map_err(failure)?;
    match command {
        ConfigCommand::SetContext {
            name,
            url,
            token,
            ca_file,
        } => {
            check_name(name)?;
            let created = !config.contexts.contains_key(name);
            let context = config.contexts.entry(name.clone()).or_default();
            set_context(
                context,
                url.as_deref(),
                token.as_deref(),
                ca_file.as_deref(),
            )?;
            config.save(&path).map_err(failure)?;
            let action = if created { "created" } else { "updated" };
            println!("context {name} {action}");
        }
        ConfigCommand::UseContext { name } => {
            config.context(&path, name).map_err(failure)?;
            config.current_context = Some(name.clone());
            config.save(&path).map_err(failure)?;
            println!("switched to context {name}");
        }
        ConfigCommand::View => {
            let text = serde_yaml_ng::to_string(&config.redacted())
                .map_err(|e| Failure(format!("cannot show the config: {e}")))?;
            print!("{text}");
        }
        ConfigCommand::GetContexts => {
            let rows = config
                .contexts
                .iter()
                .map(|(name, context)| {
                    let current = config.current_context.as_ref() == Some(name);
                    vec![
                        if current { "*" } else { "" }.to_owned(),
                        name.clone(),
                        context.url.clone().unwrap_or_else(|| "-".to_owned()),
                        if context.token.is_some() {
                            REDACTED
                        } else {
                            "-"
                        }
                        .to_owned(),
                        context
                            .ca_file
                            .as_ref()
                            .map_or_else(|| "-".to_owned(), |p| p.display().to_string()),
                    ]
                })
                .collect();
            print_table(&["CURRENT", "NAME", "URL", "TOKEN", "CA FILE"], rows);
        }
    }
    Ok(())
}

fn check_name(name: &str) -> Outcome {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 253 || !name.chars().all(allowed) {
        return Err(Failure(format!(
            "context name '{name}': use letters, digits, '.', '_' and '-' (at most 253)"
        )));
    }
    Ok(())
}

/// Sets what was given; an empty value removes the setting.
fn set_context(
    context: &mut Context,
    url: Option<&str>,
    token: Option<&str>,
    ca_file: Option<&Path>,
) -> Outcome {
    if let Some(url) = url {
        let url = url.trim();
        if url.is_empty() {
            context.url = None;
        } else if url.starts_with("http://") || url.starts_with("https://") {
            context.url = Some(url.to_owned());
        } else {
            return Err(Failure(format!(
                "--url: '{url}' is not an http:// or https:// URL"
            )));
        }
    }
    if let Some(token) = token {
        let token = token.trim();
        context.token = (!token.is_empty()).then(|| token.to_owned());
    }
    if let Some(file) = ca_file {
        context.ca_file = if file.as_os_str().is_empty() {
            None
        } else {
            // Kept absolute: commands run from any directory.
            let absolute = std::path::absolute(file)
                .map_err(|e| Failure(format!("--ca-file: {}: {e}", file.display())))?;
            if !absolute.is_file() {
                return Err(Failure(format!(
                    "--ca-file: {}: no such file",
                    absolute.display()
                )));
            }
            Some(absolute)
        };
    }
    Ok(())
}
