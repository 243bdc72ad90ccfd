//! `palisade token create|list|revoke`.

use clap::Subcommand;
use palisade_api_types::view::{CreatedToken, NewToken};
use reqwest::Method;

use super::{Api, Connection, Outcome};
use crate::help;

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token; its secret is printed once, on standard output.
    ///
    /// Create a token. The secret is printed once, on standard output (the line before it
    /// goes to standard error), so `TOKEN=$(palisade token create ...)` keeps only the
    /// secret. An admin creates any token; a boundary admin creates developer tokens of its
    /// own boundary.
    #[command(after_help = help::TOKEN_CREATE)]
    Create {
        /// The token's role.
        #[arg(long, value_name = "ROLE", value_parser = help::roles())]
        role: String,
        /// The boundary of a boundary-admin or developer token (not for admin).
        #[arg(long, value_name = "BOUNDARY")]
        boundary: Option<String>,
        /// Days until the token expires (default: never).
        #[arg(long, value_name = "DAYS")]
        expires_in_days: Option<u32>,
    },
    /// List tokens (the same as `palisade get tokens`); secrets are never shown.
    #[command(after_help = help::TOKEN_LIST)]
    List,
    /// Revoke a token.
    #[command(after_help = help::TOKEN_REVOKE)]
    Revoke {
        /// The token's id (the ID column of `palisade token list`).
        id: String,
    },
}

pub fn token(connection: &Connection, command: &TokenCommand) -> Outcome {
    match command {
        TokenCommand::Create {
            role,
            boundary,
            expires_in_days,
        } => {
            let api = Api::new(connection)?;
            let body = NewToken {
                role: role.clone(),
                boundary: boundary.clone(),
                expires_in_days: *expires_in_days,
            };
            let answer = api.send(api.request(Method::POST, "/v1/tokens").json(&body))?;
            let Some(created) = answer.for_table::<CreatedToken>(connection.output)? else {
                return Ok(());
            };
            let token = &created.token;
            eprintln!(
                "token {} ({}{}) created; it is shown once:",
                token.id,
                token.role,
                token
                    .boundary
                    .as_deref()
                    .map(|b| format!(" of {b}"))
                    .unwrap_or_default()
            );
            println!("{}", created.secret);
        }
        TokenCommand::List => return super::get(connection, &super::Kind::Tokens, false),
        TokenCommand::Revoke { id } => {
            return super::delete::delete_token(&Api::new(connection)?, id, "revoked")
        }
    }
    Ok(())
}
