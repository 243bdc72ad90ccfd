//! `palisade token create|list|revoke`.

use clap::Subcommand;
use palisade_api_types::view::{CreatedToken, NewToken, TokenList};
use reqwest::Method;

use super::{all_pages, cell, print_body, print_table, Api, Connection, Format, Outcome};
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
    let api = Api::new(connection)?;
    match command {
        TokenCommand::Create {
            role,
            boundary,
            expires_in_days,
        } => {
            let body = NewToken {
                role: role.clone(),
                boundary: boundary.clone(),
                expires_in_days: *expires_in_days,
            };
            let answer = api.send(api.request(Method::POST, "/v1/tokens").json(&body))?;
            let created: CreatedToken = answer.decode()?;
            if connection.output != Format::Table {
                return print_body(connection.output, &answer.body);
            }
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
        TokenCommand::List => {
            let list = all_pages::<TokenList>(&api, "/v1/tokens")?;
            if connection.output != Format::Table {
                return print_body(connection.output, &list.body);
            }
            let rows = list
                .items
                .into_iter()
                .map(|t| {
                    vec![
                        t.id,
                        t.role,
                        cell(t.boundary.as_deref()),
                        cell(t.expires_at.as_deref()),
                        t.created_at,
                    ]
                })
                .collect();
            print_table(&["ID", "ROLE", "BOUNDARY", "EXPIRES", "CREATED"], rows);
        }
        TokenCommand::Revoke { id } => return super::delete::delete_token(&api, id, "revoked"),
    }
    Ok(())
}
