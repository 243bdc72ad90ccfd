//! `palisade check`: offline evaluation of manifests (SPEC 4.2), and `check plan`.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use palisade_api_types::nesting::MAX_MANIFEST_DEPTH;
use palisade_api_types::yaml::{documents, each_document_within};
use palisade_api_types::{ExceptionDocument, PolicyDocument};
use palisade_policy::admission::{evaluate_excepted, AdmissionObject, AdmissionRequest};
use palisade_policy::compute_plan::PlanDecision;
use palisade_policy::{compute_plan, Catalog, Exception, Name, PlanName, Policy, ResourceType};
use serde::Serialize;

use crate::input::{located, read_text, shown, yaml_files};
use crate::sarif::Finding;

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum Output {
    #[default]
    Text,
    Json,
    /// SARIF 2.1.0, for code-scanning tools.
    Sarif,
}

#[derive(Debug, Args)]
#[command(
    subcommand_negates_reqs = true,
    override_usage = "palisade check [-p POLICY_FILE]... [-e EXCEPTION_FILE]... [--at TIME] [-o text|json|sarif] [--catalog FILE] MANIFEST...\n       \
        palisade check plan [-p POLICY_FILE]... [-e EXCEPTION_FILE]... --type TYPE --plan PLAN [--name NAME] [--at TIME] [--catalog FILE]"
)]
pub struct CheckArgs {
    #[command(subcommand)]
    command: Option<CheckCommand>,
    /// A BoundaryPolicy file, a directory whose *.yaml/*.yml files are all read, or `-` for
    /// standard input. Repeatable; every policy must belong to one boundary.
    #[arg(
        short = 'p',
        long = "policy",
        value_name = "POLICY_FILE",
        global = true
    )]
    policies: Vec<PathBuf>,
    /// A BoundaryException file or directory (repeatable): the exceptions of the policies'
    /// boundary in force at `--at` let the objects they match past (SPEC 7).
    #[arg(
        short = 'e',
        long = "exception",
        value_name = "EXCEPTION_FILE",
        global = true
    )]
    exceptions: Vec<PathBuf>,
    /// The time that decides which exceptions are in force (RFC 3339; default: now).
    #[arg(long = "at", value_name = "TIME", global = true)]
    at: Option<String>,
    /// A plan catalog file (YAML: type -> [{name, cpu, memory}]) instead of the built-in one.
    #[arg(long = "catalog", value_name = "FILE", global = true)]
    catalog: Option<PathBuf>,
    /// `text`: one line per denial, `<file>:<doc> <Kind>/<name>: <message>`. `json`: an
    /// array with one element per object. `sarif`: one SARIF 2.1.0 log (denials are errors,
    /// audit warnings warnings; each located at its document's first line).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Manifest files or directories (every *.yaml/*.yml file in it), or `-` for standard
    /// input. A file named `plan` is written `./plan`.
    #[arg(value_name = "MANIFEST", required = true)]
    manifests: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum CheckCommand {
    /// Decide a compute plan offline: prints `allowed`, or the exact message the API's 422
    /// would carry.
    ///
    /// Decide a compute plan offline, as the API would on a create: prints `allowed`, or the
    /// exact message of the API's 422 `compute_plan_not_allowed`. Policies in audit mode
    /// never deny; their warnings go to standard error. Plans of functions are never enforced
    /// by the API: a disallowed one prints `allowed` (exit 0) with the API's warning on standard
    /// error; static web apps take no plan.
    #[command(after_help = crate::help::CHECK_PLAN)]
    Plan(PlanArgs),
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The resource type.
    #[arg(long = "type", value_name = "TYPE", value_parser = crate::help::resource_types())]
    resource_type: String,
    /// The plan's name, e.g. small or memory-optimized (the catalog lists each type's).
    #[arg(long = "plan", value_name = "PLAN")]
    plan: String,
    /// The resource's name: exceptions (`-e`) that list `<type>/<name>` and the plan let it
    /// past the policies they except (SPEC 7).
    #[arg(long = "name", value_name = "NAME")]
    name: Option<String>,
}

const EXIT_DENIED: u8 = 1;
const EXIT_BAD_INPUT: u8 = 2;

/// Bad input: printed as one line, exit 2.
struct BadInput(String);

fn read(path: &Path) -> Result<String, BadInput> {
    read_text(path).map_err(BadInput)
}

/// Hands each YAML file of `paths` and its text to `visit`, in order, with `errors`; a path
/// or a file that cannot be read is an error there, and the next one is read.
fn for_each_yaml_file(
    paths: &[PathBuf],
    errors: &mut Vec<String>,
    mut visit: impl FnMut(&Path, &str, &mut Vec<String>),
) {
    for path in paths {
        match yaml_files(path) {
            Ok(files) => {
                for file in files {
                    match read(&file) {
                        Ok(text) => visit(&file, &text, errors),
                        Err(BadInput(e)) => errors.push(e),
                    }
                }
            }
            Err(e) => errors.push(e),
        }
    }
}

/// Loads every policy; all errors are collected so one run reports them all.
pub(crate) fn load_policies(
    paths: &[PathBuf],
    catalog: &Catalog,
) -> Result<Vec<Policy>, Vec<String>> {
    let mut errors = Vec::new();
    let mut policies: Vec<(Name, Policy, String)> = Vec::new();
    for_each_yaml_file(paths, &mut errors, |file, text, errors| {
        for (index, document) in documents::<PolicyDocument>(text) {
            let valid = document
                .map_err(|e| located(&shown(file), &e, index))
                .and_then(|d| {
                    d.validate(catalog)
                        .map_err(|e| format!("{}:{index}: {e}", shown(file)))
                });
            match valid {
                Ok(valid) => {
                    let here = format!("{}:{index}", shown(file));
                    if let Some((_, _, first)) = policies
                        .iter()
                        .find(|(b, p, _)| *b == valid.boundary && p.name() == valid.policy.name())
                    {
                        errors.push(format!(
                            "{here}: policy {}/{} is also defined at {first}",
                            valid.boundary,
                            valid.policy.name()
                        ));
                    } else {
                        policies.push((valid.boundary, valid.policy, here));
                    }
                }
                Err(e) => errors.push(e),
            }
        }
    });
    let mut boundaries: Vec<&Name> = policies.iter().map(|(b, _, _)| b).collect();
    boundaries.sort();
    boundaries.dedup();
    if boundaries.len() > 1 {
        let list: Vec<String> = boundaries.iter().map(|b| b.to_string()).collect();
        errors.push(format!(
            "the policies belong to several boundaries ({}); check one boundary at a time",
            list.join(", ")
        ));
    }
    if errors.is_empty() {
        Ok(policies.into_iter().map(|(_, p, _)| p).collect())
    } else {
        Err(errors)
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct DenialOut {
    pub(crate) policy: String,
    pub(crate) rule: String,
    pub(crate) message: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct WarningOut {
    pub(crate) policy: String,
    pub(crate) message: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExceptedOut {
    pub(crate) policy: String,
    pub(crate) exception: String,
    pub(crate) expires_at: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObjectOut {
    pub(crate) file: String,
    pub(crate) index: usize,
    pub(crate) api_version: String,
    pub(crate) kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) checked: bool,
    pub(crate) admitted: bool,
    pub(crate) denials: Vec<DenialOut>,
    pub(crate) warnings: Vec<WarningOut>,
    /// The exceptions that let the object past a policy (absent when none did).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) excepted: Vec<ExceptedOut>,
}

pub(crate) fn evaluate_object(
    policies: &[Policy],
    exceptions: &[Exception],
    file: &Path,
    index: usize,
    value: &serde_json::Value,
) -> Result<ObjectOut, String> {
    let object =
        AdmissionObject::from_json(value).map_err(|e| format!("{}:{index}: {e}", shown(file)))?;
    let exceptions: Vec<&Exception> = exceptions.iter().collect();
    let (verdict, used) =
        evaluate_excepted(policies, &object, &AdmissionRequest::default(), &exceptions);
    Ok(ObjectOut {
        file: shown(file),
        index,
        api_version: object.api_version.clone(),
        kind: object.kind.clone(),
        namespace: object.namespace.clone(),
        name: object.name.clone(),
        checked: verdict.checked,
        admitted: verdict.admitted(),
        denials: verdict
            .denials
            .into_iter()
            .map(|d| DenialOut {
                policy: d.policy.to_string(),
                rule: d.rule.to_string(),
                message: d.message,
            })
            .collect(),
        warnings: verdict
            .warnings
            .into_iter()
            .map(|d| WarningOut {
                policy: d.policy.to_string(),
                message: d.message,
            })
            .collect(),
        excepted: used
            .into_iter()
            .map(|x| ExceptedOut {
                policy: x.policy.to_string(),
                exception: x.name.to_string(),
                expires_at: x.expires_at.replace(".000Z", "Z"),
            })
            .collect(),
    })
}

fn check_manifests(
    policies: &[Policy],
    exceptions: &[Exception],
    paths: &[PathBuf],
    errors: &mut Vec<String>,
    lines: &mut HashMap<String, Vec<usize>>,
) -> Vec<ObjectOut> {
    let mut out = Vec::new();
    for_each_yaml_file(paths, errors, |file, text, errors| {
        lines.insert(shown(file), crate::sarif::document_lines(text));
        // Manifests may nest as deeply as the YAML parser reads (128 levels); policy
        // files as deeply as palisade reads a policy (64).
        for (index, document) in each_document_within::<serde_json::Value>(text, MAX_MANIFEST_DEPTH)
        {
            let value = match document {
                Ok(value) => value,
                Err(e) => {
                    errors.push(located(&shown(file), &e, index));
                    continue;
                }
            };
            let is_list = value
                .get("kind")
                .and_then(|k| k.as_str())
                .is_some_and(|k| k.ends_with("List"))
                && value.get("items").is_some();
            if is_list {
                match value.get("items").and_then(|i| i.as_array()) {
                    Some(items) => {
                        for (item_index, item) in items.iter().enumerate() {
                            match evaluate_object(policies, exceptions, file, index, item) {
                                Ok(o) => out.push(o),
                                Err(e) => errors.push(e.replacen(
                                    ": /",
                                    &format!(": /items/{item_index}/"),
                                    1,
                                )),
                            }
                        }
                    }
                    None => errors.push(format!("{}:{index}: /items: must be a list", shown(file))),
                }
            } else {
                match evaluate_object(policies, exceptions, file, index, &value) {
                    Ok(o) => out.push(o),
                    Err(e) => errors.push(e),
                }
            }
        }
    });
    out
}

pub(crate) fn print_errors(errors: &[String]) {
    let mut stderr = std::io::stderr().lock();
    for e in errors {
        let _ = writeln!(stderr, "error: {e}");
    }
}

/// Said on standard error when no policy was read: nothing can be denied.
fn warn_no_policies(args: &CheckArgs, outcome: &str) {
    let why = if args.policies.is_empty() {
        "no policy given (-p POLICY_FILE)"
    } else {
        "the policy files hold no policy"
    };
    eprintln!("warning: {why}: {outcome}");
}

pub fn run(args: &CheckArgs) -> ExitCode {
    if let Some(CheckCommand::Plan(plan)) = &args.command {
        return run_plan(args, plan);
    }
    let catalog = match load_catalog(args) {
        Ok(c) => c,
        Err(e) => {
            print_errors(&[e]);
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let (policies, mut errors) = match load_policies(&args.policies, &catalog) {
        Ok(p) => (p, Vec::new()),
        Err(errors) => (Vec::new(), errors),
    };
    if !errors.is_empty() {
        print_errors(&errors);
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    if policies.is_empty() {
        warn_no_policies(args, "every object is admitted");
    }
    let exceptions = match load_exceptions(args) {
        Ok(exceptions) => exceptions,
        Err(errors) => {
            print_errors(&errors);
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let mut lines = HashMap::new();
    let objects = check_manifests(
        &policies,
        &exceptions,
        &args.manifests,
        &mut errors,
        &mut lines,
    );
    let denied = objects.iter().filter(|o| !o.admitted).count();
    let mut stdout = std::io::stdout().lock();
    match args.output {
        Output::Json => {
            let text = serde_json::to_string_pretty(&objects).unwrap_or_else(|_| "[]".to_owned());
            let _ = writeln!(stdout, "{text}");
        }
        Output::Sarif => {
            let findings: Vec<Finding<'_>> = objects
                .iter()
                .flat_map(|o| {
                    let object = format!("{}/{}", o.kind, o.name.as_deref().unwrap_or("<unnamed>"));
                    let denials = o.denials.iter().map({
                        let object = object.clone();
                        move |d| Finding {
                            file: &o.file,
                            document: o.index,
                            object: object.clone(),
                            policy: &d.policy,
                            rule: Some(&d.rule),
                            message: &d.message,
                            denial: true,
                        }
                    });
                    let warnings = o.warnings.iter().map(move |w| Finding {
                        file: &o.file,
                        document: o.index,
                        object: object.clone(),
                        policy: &w.policy,
                        rule: None,
                        message: &w.message,
                        denial: false,
                    });
                    denials.chain(warnings)
                })
                .collect();
            let log = crate::sarif::log(&findings, &lines);
            let text = serde_json::to_string_pretty(&log).unwrap_or_else(|_| "{}".to_owned());
            let _ = writeln!(stdout, "{text}");
        }
        Output::Text => {
            let mut stderr = std::io::stderr().lock();
            for o in &objects {
                let name = o.name.as_deref().unwrap_or("<unnamed>");
                for d in &o.denials {
                    let _ = writeln!(
                        stdout,
                        "{}:{} {}/{}: {}",
                        o.file, o.index, o.kind, name, d.message
                    );
                }
                for w in &o.warnings {
                    let _ = writeln!(
                        stderr,
                        "warning: {}:{} {}/{}: {}",
                        o.file, o.index, o.kind, name, w.message
                    );
                }
                for x in &o.excepted {
                    let _ = writeln!(
                        stderr,
                        "note: {}:{} {}/{}: let past policy '{}' by exception '{}' (until {})",
                        o.file, o.index, o.kind, name, x.policy, x.exception, x.expires_at
                    );
                }
            }
        }
    }
    let _ = stdout.flush();
    drop(stdout);
    print_errors(&errors);
    eprintln!("checked {} objects: {denied} denied", objects.len());
    exit_code(&errors, denied > 0)
}

/// 2 (bad input) when there are `errors`, else 1 when something was `denied` (a denial, a
/// failed case), else 0; `check` and `test` alike.
pub(crate) fn exit_code(errors: &[String], denied: bool) -> ExitCode {
    if !errors.is_empty() {
        ExitCode::from(EXIT_BAD_INPUT)
    } else if denied {
        ExitCode::from(EXIT_DENIED)
    } else {
        ExitCode::SUCCESS
    }
}

/// The exceptions of `-e` in force at `--at` (default now). Each must belong to the
/// policies' boundary; errors are collected so one run reports them all.
fn load_exceptions(args: &CheckArgs) -> Result<Vec<Exception>, Vec<String>> {
    if args.exceptions.is_empty() {
        return Ok(Vec::new());
    }
    let at = match args.at.as_deref().map(parse_at).transpose() {
        Ok(at) => at,
        Err(e) => return Err(vec![format!("--at: {e}")]),
    };
    load_exceptions_from(&args.policies, &args.exceptions, at)
}

/// An RFC 3339 time, as exceptions' times are compared (the error does not name the field).
pub(crate) fn parse_at(text: &str) -> Result<String, String> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|at| palisade_api_types::exception::stored_time(at.with_timezone(&chrono::Utc)))
        .map_err(|e| {
            format!("must be an RFC 3339 time such as 2027-01-31T00:00:00Z, got '{text}': {e}")
        })
}

/// The exceptions of the files `exception_paths` in force at `at` (stored form; default
/// now), each of the boundary of the policies in `policy_paths`.
pub(crate) fn load_exceptions_from(
    policy_paths: &[PathBuf],
    exception_paths: &[PathBuf],
    at: Option<String>,
) -> Result<Vec<Exception>, Vec<String>> {
    let at = at.unwrap_or_else(|| palisade_api_types::exception::stored_time(chrono::Utc::now()));
    let mut errors = Vec::new();
    let mut out: Vec<Exception> = Vec::new();
    let mut boundary_of_policies: Option<Name> = None;
    // The policies' boundary is not kept on a Policy: read it again from their files.
    for path in policy_paths {
        for file in yaml_files(path).unwrap_or_default() {
            if let Ok(text) = read(&file) {
                for (_, document) in documents::<PolicyDocument>(&text) {
                    if let Ok(document) = document {
                        boundary_of_policies = Name::parse(&document.metadata.boundary).ok();
                    }
                }
            }
        }
    }
    for_each_yaml_file(exception_paths, &mut errors, |file, text, errors| {
        for (index, document) in documents::<ExceptionDocument>(text) {
            let here = format!("{}:{index}", shown(file));
            let document = match document {
                Ok(document) => document,
                Err(e) => {
                    errors.push(located(&shown(file), &e, index));
                    continue;
                }
            };
            let decoded = Name::parse(&document.metadata.name)
                .map_err(|e| format!("{here}: /metadata/name: {e}"))
                .and_then(|name| {
                    document
                        .spec
                        .decode_stored(name)
                        .map_err(|e| format!("{here}: /spec{}: {}", e.pointer, e.message))
                });
            match decoded {
                Ok(exception) => {
                    if let Some(boundary) = &boundary_of_policies {
                        if document.metadata.boundary != boundary.as_str() {
                            errors.push(format!(
                                "{here}: exception of boundary '{}', the policies are of '{boundary}'",
                                document.metadata.boundary
                            ));
                            continue;
                        }
                    }
                    if exception.active_at(&at) {
                        out.push(exception);
                    }
                }
                Err(e) => errors.push(e),
            }
        }
    });
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn load_catalog(args: &CheckArgs) -> Result<Catalog, String> {
    catalog_from(args.catalog.as_deref())
}

/// The plan catalog of a file, or the built-in one.
pub(crate) fn catalog_from(path: Option<&Path>) -> Result<Catalog, String> {
    match path {
        None => Ok(Catalog::builtin()),
        Some(path) => {
            let text = read(path).map_err(|BadInput(e)| e)?;
            palisade_api_types::catalog_file::parse(&text)
                .map_err(|e| format!("{}: {e}", shown(path)))
        }
    }
}

fn run_plan(args: &CheckArgs, plan_args: &PlanArgs) -> ExitCode {
    let bad = |message: String| {
        print_errors(&[message]);
        ExitCode::from(EXIT_BAD_INPUT)
    };
    let catalog = match load_catalog(args) {
        Ok(c) => c,
        Err(e) => return bad(e),
    };
    let resource_type = match ResourceType::parse(&plan_args.resource_type) {
        Ok(t) => t,
        Err(e) => return bad(format!("--type: {e}")),
    };
    let plan = match PlanName::parse(&plan_args.plan) {
        Ok(p) => p,
        Err(e) => return bad(format!("--plan: {e}")),
    };
    let policies = match load_policies(&args.policies, &catalog) {
        Ok(p) => p,
        Err(errors) => {
            print_errors(&errors);
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let decision = match compute_plan::decide(&policies, &catalog, resource_type, &plan) {
        Ok(d) => d,
        Err(e) => return bad(format!("--plan: {e}")),
    };
    if policies.is_empty() {
        warn_no_policies(args, "every plan is allowed");
    }
    let mut stderr = std::io::stderr().lock();
    for warning in &decision.audit_warnings {
        let _ = writeln!(stderr, "warning: {warning}");
    }
    if !resource_type.is_plan_checked() {
        let _ = writeln!(
            stderr,
            "note: the API does not enforce plans of {resource_type}"
        );
    }
    let exceptions = match load_exceptions(args) {
        Ok(exceptions) => exceptions,
        Err(errors) => {
            print_errors(&errors);
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let at = match args.at.as_deref().map(parse_at).transpose() {
        Ok(at) => {
            at.unwrap_or_else(|| palisade_api_types::exception::stored_time(chrono::Utc::now()))
        }
        Err(e) => return bad(format!("--at: {e}")),
    };
    let (decision, used) = except_decision(decision, &exceptions, plan_args.name.as_deref(), &at);
    for exception in &used {
        let _ = writeln!(
            stderr,
            "warning: {}",
            palisade_policy::Warning::PlanAllowedByException {
                plan: plan.to_string(),
                exception: exception.name.to_string(),
                until: exception.expires_at.clone(),
            }
        );
    }
    if plan_args.name.is_none() && !args.exceptions.is_empty() {
        let _ = writeln!(
            stderr,
            "note: exceptions name resources: give --name to apply them"
        );
    }
    let mut stdout = std::io::stdout().lock();
    match decision.message() {
        None => {
            let _ = writeln!(stdout, "allowed");
            ExitCode::SUCCESS
        }
        // SPEC 2.2: the API creates a function whatever its plan, with this warning.
        Some(_) if !resource_type.is_plan_checked() => {
            let _ = writeln!(
                stderr,
                "warning: {}",
                palisade_policy::Warning::FunctionPlanNotEnforced {
                    plan: plan.to_string(),
                    policies: decision.denied_by.iter().map(ToString::to_string).collect(),
                }
            );
            let _ = writeln!(stdout, "allowed");
            ExitCode::SUCCESS
        }
        Some(message) => {
            let _ = writeln!(stdout, "{message}");
            ExitCode::from(EXIT_DENIED)
        }
    }
}

/// A plan's decision with the exceptions in force at `at` for resource `name` applied: the
/// decision as they leave it (`allowed`, `denied_by`), and the exceptions that were used.
pub(crate) fn except_decision<'a>(
    mut decision: PlanDecision,
    exceptions: &'a [Exception],
    name: Option<&str>,
    at: &str,
) -> (PlanDecision, Vec<&'a Exception>) {
    match name {
        Some(name) if !decision.allowed => {
            let excepted = palisade_policy::exception::except_plan(&decision, exceptions, name, at);
            decision.allowed = excepted.allowed();
            decision.denied_by = excepted.still_denied_by;
            (decision, excepted.used)
        }
        _ => (decision, Vec::new()),
    }
}
