//! The `palisade` binary: parses the command line and hands off to a subcommand.

mod check;
mod client;
mod serve;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "palisade",
    version,
    about = "Boundary policies for the internal developer platform"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Evaluate manifests against policies offline, as the cluster would (exit 0 admitted,
    /// 1 denied, 2 bad input). `palisade check plan --type T --plan P` decides a compute plan.
    Check(check::CheckArgs),
    /// Run the API (SQLite in ./.palisade by default; PostgreSQL with --database).
    Serve(serve::ServeArgs),
    /// Create or update BoundaryPolicy documents from a file or directory (all or nothing).
    Apply {
        #[arg(short = 'f', long = "filename", value_name = "FILE|DIR")]
        file: PathBuf,
        /// Validate and show what would change; write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// List objects: boundaries, clusters, policies B, resources B, namespaces B, tokens,
    /// plans B --type T.
    Get {
        #[command(subcommand)]
        kind: client::Kind,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Delete an object.
    Delete {
        #[command(subcommand)]
        kind: client::DeleteKind,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Create or update a resource (plans are checked against the boundary's policies).
    Resource {
        #[command(subcommand)]
        command: client::ResourceCommand,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Create, list or revoke API tokens.
    Token {
        #[command(subcommand)]
        command: client::TokenCommand,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Create a boundary (admin).
    Boundary {
        #[command(subcommand)]
        command: client::BoundaryCommand,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Create or adopt a namespace labelled for a boundary in one of its clusters.
    Namespace {
        #[command(subcommand)]
        command: client::NamespaceCommand,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Register clusters and attach them to boundaries (admin).
    Cluster {
        #[command(subcommand)]
        command: client::ClusterCommand,
        #[command(flatten)]
        connection: client::Connection,
    },
}

fn finish(outcome: Result<(), client::Failure>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(client::Failure(message)) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Serve(args) => match serve::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::FAILURE
            }
        },
        Command::Apply {
            file,
            dry_run,
            connection,
        } => finish(client::apply(&connection, &file, dry_run)),
        Command::Get { kind, connection } => finish(client::get(&connection, &kind)),
        Command::Delete { kind, connection } => finish(client::delete(&connection, &kind)),
        Command::Resource {
            command,
            connection,
        } => finish(client::resource(&connection, &command)),
        Command::Token {
            command,
            connection,
        } => finish(client::token(&connection, &command)),
        Command::Boundary {
            command,
            connection,
        } => finish(client::boundary(&connection, &command)),
        Command::Namespace {
            command,
            connection,
        } => finish(client::namespace(&connection, &command)),
        Command::Cluster {
            command,
            connection,
        } => finish(client::cluster(&connection, &command)),
    }
}
