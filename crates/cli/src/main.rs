//! The `palisade` binary: parses the command line and hands off to a subcommand.

mod argv;
mod check;
mod client;
mod contexts;
mod help;
mod input;
mod policy_test;
mod sarif;
mod selector;
mod serve;

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "palisade",
    version,
    about = "Boundary policies for the internal developer platform",
    long_about = "Boundary policies for the internal developer platform.\n\n\
        Platform admins write policies for a boundary (a tenant's part of the platform). \
        palisade refuses resources on disallowed compute plans through its API, and installs \
        the admission rules (required labels, allowed registries, no latest tag) in the \
        boundary's Kubernetes clusters as ValidatingAdmissionPolicies.",
    after_help = help::MAIN
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Evaluate manifests against policies offline, as the cluster would.
    ///
    /// Evaluate Kubernetes manifests against BoundaryPolicy files offline, exactly as the
    /// cluster's admission rules would judge them, as if every object were in a namespace of
    /// the policies' boundary. Denials go to standard output, one line each; audit warnings,
    /// errors and the summary `checked N objects: M denied` to standard error.
    /// `palisade check plan` decides a compute plan instead.
    #[command(after_help = help::CHECK)]
    Check(check::CheckArgs),
    /// Run policy test suites: cases with the verdict and message they expect.
    ///
    /// Run the cases of PolicyTest documents offline, with `palisade check`'s evaluation:
    /// each case is an object (inline or from a manifest file) or a resource's compute plan,
    /// judged by the test's policies and exceptions, and passes when it gets the expected
    /// verdict and, when given, the exact message, denying policy, audit warnings or
    /// exception. The documents' schema: docs/schemas/policytest.schema.json.
    #[command(after_help = help::TEST)]
    Test(policy_test::TestArgs),
    /// Run the API, the portal and the reconciler.
    ///
    /// Run palisade: the HTTP API, the web portal on the same port, and the reconciler that
    /// installs policies in the attached clusters. SQLite in ./.palisade by default;
    /// PostgreSQL with --database.
    #[command(after_help = help::SERVE)]
    Serve(serve::ServeArgs),
    /// Create or update BoundaryPolicy documents (all or nothing).
    ///
    /// Create or update BoundaryPolicy documents from files, directories or standard input.
    /// Every document is validated first; if one is invalid nothing is saved. Policies not
    /// named are left alone (no pruning).
    #[command(after_help = help::APPLY)]
    Apply(client::ApplyArgs),
    /// Show what policies would deny among what already runs, before applying them.
    ///
    /// Preview BoundaryPolicy documents against the boundary's clusters without saving
    /// anything: every object in the boundary's namespaces each policy would deny (with its
    /// workload and replicas), what the saved version denies and this one would allow, and the
    /// platform resources whose plan it would disallow. Exit 0 when nothing would be denied,
    /// 1 when something would, 2 when the preview could not be made.
    #[command(after_help = help::PREVIEW)]
    Preview(client::PreviewArgs),
    /// Make the spec of an earlier version of a policy its current one, as a new version, at
    /// once (SPEC 8).
    ///
    /// Reads the policy, then saves the spec its version VERSION saved as a new version
    /// (`POST /v1/boundaries/{b}/policies/{p}/rollback`), as a save of that spec would be:
    /// validated, with its save warnings, in force in the clusters as any change. Prints
    /// `boundarypolicy shop/trusted rolled back to version 1: now version 3`, or `unchanged`
    /// when the policy already has that spec. The versions are in `palisade describe policy`.
    #[command(after_help = help::ROLLBACK)]
    Rollback(client::RollbackArgs),
    /// Show, promote or abort the staged rollout of a policy's current version (SPEC 8).
    ///
    /// `status` prints where it is (`boundarypolicy shop/trusted rolling out v4: stage 2/3, 0
    /// denials, next 14:00`); `promote` moves it to its next stage now (after the last: done);
    /// `abort` puts the previous version back everywhere. Promote and abort need a
    /// boundary-admin; a rollout that does not run is a 409.
    #[command(after_help = help::ROLLOUT)]
    Rollout {
        #[command(subcommand)]
        command: client::RolloutCommand,
    },
    /// Show how the stored documents differ from the files, as a unified diff.
    ///
    /// Compare BoundaryPolicy and BoundaryException documents in files, directories or standard
    /// input with what the server stores, as `kubectl diff` does: one unified diff per document
    /// that `palisade apply -f` would create or change (nothing for one it would leave
    /// unchanged). Both sides are the documents as the server stores them. Exit 0 when nothing
    /// differs, 1 when something does, 2 on bad input or a server that cannot be asked.
    #[command(after_help = help::DIFF)]
    Diff(client::DiffArgs),
    /// Show objects: boundaries, clusters, policies, policy, resources, namespaces, tokens,
    /// plans.
    #[command(after_help = help::GET)]
    Get {
        #[command(subcommand)]
        kind: client::Kind,
        /// After the list, print a line for every object that is new or whose row changed
        /// (the list is read every second), until interrupted. Lists only.
        #[arg(short = 'w', long, global = true)]
        watch: bool,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Show one exception, policy, resource or cluster in words: status per cluster,
    /// exceptions, history; a resource's replicas, pods and events; a cluster's version,
    /// layout, replica, restarts and repairs.
    #[command(after_help = help::DESCRIBE)]
    Describe {
        #[command(subcommand)]
        kind: client::DescribeKind,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Delete a boundary, policy, resource, token, cluster or namespace.
    #[command(after_help = help::DELETE)]
    Delete {
        #[command(subcommand)]
        kind: client::DeleteKind,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Create or update a resource; plans are checked against the boundary's policies.
    ///
    /// Create or update a resource of a boundary. Resource types: app, container_instance,
    /// postgresql, sqlserver, qdrant, valkey (plans checked), function (plans never checked),
    /// static_web_app (no plan).
    #[command(after_help = help::RESOURCE)]
    Resource {
        #[command(subcommand)]
        command: client::ResourceCommand,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Create, list or revoke API tokens (roles: admin, boundary-admin, developer).
    #[command(after_help = help::TOKEN)]
    Token {
        #[command(subcommand)]
        command: client::TokenCommand,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Request or approve exceptions: one workload or resource let past one policy until a
    /// stated time (SPEC 7).
    #[command(after_help = help::EXCEPTION)]
    Exception {
        #[command(subcommand)]
        command: client::ExceptionCommand,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Create a boundary (admin).
    #[command(after_help = help::BOUNDARY)]
    Boundary {
        #[command(subcommand)]
        command: client::BoundaryCommand,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Create or adopt a namespace labelled for a boundary in one of its clusters.
    #[command(after_help = help::NAMESPACE)]
    Namespace {
        #[command(subcommand)]
        command: client::NamespaceCommand,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Register clusters, attach them to boundaries, print the RBAC palisade needs in them.
    #[command(after_help = help::CLUSTER)]
    Cluster {
        #[command(subcommand)]
        command: client::ClusterCommand,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Name servers, tokens and CA files as contexts in the config file, and pick one.
    ///
    /// Keep named contexts (a server URL, a token, a CA file) in the config file:
    /// $PALISADE_CONFIG, else $XDG_CONFIG_HOME/palisade/config.yaml, else
    /// ~/.config/palisade/config.yaml. Client commands use the current context, or the one
    /// --context names; each of --url, --token and --ca-file (and PALISADE_URL,
    /// PALISADE_TOKEN, PALISADE_CA_FILE) still wins over the context's.
    #[command(after_help = help::CONFIG)]
    Config {
        #[command(subcommand)]
        command: client::ConfigCommand,
    },
    /// Print the client's version, and the server's when PALISADE_URL (or --url) is set.
    #[command(after_help = help::VERSION)]
    Version(client::VersionArgs),
    /// Print a shell completion script for bash, zsh or fish.
    #[command(after_help = help::COMPLETION)]
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: Shell,
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

fn completion(shell: Shell) -> ExitCode {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "palisade", &mut script);
    // A reader that stops early (`| head`) is not an error.
    match std::io::stdout().write_all(&script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("error: cannot write the completion script: {e}");
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(argv::hoisted(std::env::args_os().collect()));
    match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Test(args) => policy_test::run(&args),
        Command::Serve(args) => match serve::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::FAILURE
            }
        },
        Command::Apply(args) => match client::apply(&args) {
            Ok(Some(verdict)) => verdict.exit_code(),
            Ok(None) => ExitCode::SUCCESS,
            Err(client::Failure(message)) => {
                eprintln!("error: {message}");
                // With --dry-run, 1 means "would deny"; a failure is 2 (as for check).
                if args.dry_run {
                    ExitCode::from(2)
                } else {
                    ExitCode::FAILURE
                }
            }
        },
        Command::Preview(args) => client::preview(&args),
        Command::Rollback(args) => finish(client::rollback(&args)),
        Command::Rollout { command } => finish(client::rollout(&command)),
        Command::Diff(args) => client::diff(&args),
        Command::Get {
            kind,
            watch,
            connection,
        } => finish(client::get(&connection, &kind, watch)),
        Command::Describe { kind, connection } => finish(client::describe(&connection, &kind)),
        Command::Delete { kind, connection } => finish(client::delete(&connection, &kind)),
        Command::Resource {
            command,
            connection,
        } => finish(client::resource(&connection, &command)),
        Command::Token {
            command,
            connection,
        } => finish(client::token(&connection, &command)),
        Command::Exception {
            command,
            connection,
        } => finish(client::exception(&connection, &command)),
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
        Command::Config { command } => finish(client::config(&command)),
        Command::Version(args) => finish(client::version(&args)),
        Command::Completion { shell } => completion(shell),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Every command has examples after its help, and every option and positional has a
    /// help text (clap's own `--help`/`--version` aside).
    fn undocumented(command: &clap::Command, path: &str, seen: &mut usize, out: &mut Vec<String>) {
        *seen += 1;
        let here = format!("{path} {}", command.get_name());
        let examples = command
            .get_after_help()
            .is_some_and(|h| h.to_string().contains("Examples:\n  "));
        if !examples {
            out.push(format!("{here}: no Examples: block"));
        }
        if command.get_about().is_none() {
            out.push(format!("{here}: no about"));
        }
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if id != "help" && id != "version" && arg.get_help().is_none() {
                out.push(format!("{here}: argument {id} has no help"));
            }
        }
        for sub in command.get_subcommands() {
            if sub.get_name() != "help" {
                undocumented(sub, &here, seen, out);
            }
        }
    }

    #[test]
    fn every_command_and_argument_is_documented() {
        let mut command = Cli::command();
        command.build();
        let (mut seen, mut out) = (0, Vec::new());
        undocumented(&command, "", &mut seen, &mut out);
        assert!(out.is_empty(), "{}", out.join("\n"));
        // palisade, its 20 commands, check plan, 12 under get, 4 under describe, 6 under
        // delete, and resource, token, exception, boundary, namespace, cluster (add, attach,
        // rbac, kubeconfig), config (set-context, use-context, view, get-contexts) and
        // rollout (status, promote, abort) subcommands.
        assert_eq!(
            seen,
            1 + 20 + 1 + 12 + 4 + 6 + 2 + 3 + 2 + 1 + 2 + 4 + 4 + 3
        );
    }
}
