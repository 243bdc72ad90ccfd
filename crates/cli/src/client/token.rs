//! `palisade token create|list|revoke`.

use clap::Subcommand;
use reqwest::Method;
use serde_json::json;

use super::{all_pages, cell, items, print_body, print_table, Api, Connection, Format, Outcome};
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
            let mut body = json!({"role": role});
            if let Some(b) = boundary {
                body["boundary"] = json!(b);
            }
            if let Some(days) = expires_in_days {
                body["expires_in_days"] = json!(days);
            }
            let (answer, _) = api.send(api.request(Method::POST, "/v1/tokens").json(&body))?;
            if connection.output != Format::Table {
                return print_body(connection.output, &answer);
            }
            eprintln!(
                "token {} ({}{}) created; it is shown once:",
                cell(&answer["id"]),
                cell(&answer["role"]),
                answer["boundary"]
                    .as_str()
                    .map(|b| format!(" of {b}"))
                    .unwrap_or_default()
            );
            println!("{}", cell(&answer["secret"]));
        }
        TokenCommand::List => {
            let body = all_pages(&api, "/v1/tokens")?;
            if connection.output != Format::Table {
                return print_body(connection.output, &body);
            }
            let rows = items(&body)
                .iter()
                .map(|t| {
                    vec![
                        cell(&t["id"]),
                        cell(&t["role"]),
                        cell(&t["boundary"]),
                        cell(&t["expires_at"]),
                        cell(&t["created_at"]),
                    ]
                })
                .collect();
            print_table(&["ID", "ROLE", "BOUNDARY", "EXPIRES", "CREATED"], rows);
        }
        TokenCommand::Revoke { id } => {
            api.send(api.request(Method::DELETE, &format!("/v1/tokens/{id}")))?;
            println!("token {id} revoked");
        }
    }
    Ok(())
}
