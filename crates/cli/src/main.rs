//! The `palisade` binary: parses the command line and hands off to a subcommand.

mod check;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => check::run(&args),
    }
}
