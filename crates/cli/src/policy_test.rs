//! `palisade test PATH...` (SPEC 4.2 v3): runs the cases of `PolicyTest` documents offline,
//! with `palisade check`'s evaluation, and says which give the verdict and message they
//! expect. Exit 0 all pass, 1 a case fails, 2 bad input (2 wins over 1).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use palisade_api_types::nesting::MAX_MANIFEST_DEPTH;
use palisade_api_types::policy_test::{
    Expectation, PolicyTestDocument, TestCase, TestResource, KIND,
};
use palisade_api_types::yaml::each_document_within;
use palisade_policy::{compute_plan, Catalog, Exception, PlanName, Policy, ResourceType};
use serde::Serialize;

use crate::check::{
    catalog_from, evaluate_object, except_decision, exit_code, load_exceptions_from, load_policies,
    parse_at, print_errors,
};
use crate::input::{located, read_text, shown};

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum TestOutput {
    /// One line per case (`PASS`/`FAIL`), what a failing case got, and a summary.
    #[default]
    Text,
    /// An array with one element per case.
    Json,
    /// JUnit XML, for CI systems' test reports.
    Junit,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Files or directories holding PolicyTest documents (directories are searched
    /// recursively; of their YAML files, those that mention PolicyTest are read, and their
    /// other documents skipped), or `-` for standard input.
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<PathBuf>,
    /// `text`, `json`, or `junit` (JUnit XML on standard output).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = TestOutput::Text)]
    output: TestOutput,
}

/// The outcome of one case.
#[derive(Debug, Serialize)]
struct CaseResult {
    test: String,
    file: String,
    /// The test document's 0-based index in its file.
    index: usize,
    case: String,
    /// The case's JSON Pointer in the test document.
    pointer: String,
    passed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<CaseFailure>,
    #[serde(skip)]
    time: Duration,
}

/// Why a case failed: a one-line summary and what the policies gave instead.
#[derive(Debug, Serialize)]
struct CaseFailure {
    message: String,
    details: Vec<String>,
}

/// What the policies gave an object or a resource, in the words a case compares.
#[derive(Debug, Default)]
struct Got {
    admitted: bool,
    /// (policy, message) of each denial.
    denials: Vec<(String, String)>,
    warnings: Vec<String>,
    /// Names of the exceptions that let it past a policy.
    excepted_by: Vec<String>,
    /// Said when the verdict is not what was expected, e.g. that a kind is not checked.
    note: Option<String>,
}

/// What loading files gave: the value, or every error found.
type Loading<T> = Result<T, Vec<String>>;
/// The policy files and catalog file a test names.
type PolicyFiles = (Vec<PathBuf>, Option<PathBuf>);
/// The policy files, exception files and time a test names.
type ExceptionFiles = (Vec<PathBuf>, Vec<PathBuf>, Option<String>);

/// The policies, exceptions and catalog of a test, loaded once per distinct set of files.
#[derive(Default)]
struct Loaded {
    catalogs: HashMap<Option<PathBuf>, Result<Catalog, String>>,
    policies: HashMap<PolicyFiles, Loading<Vec<Policy>>>,
    exceptions: HashMap<ExceptionFiles, Loading<Vec<Exception>>>,
    /// The documents of manifest files named by `file` cases.
    manifests: HashMap<PathBuf, Result<Vec<serde_json::Value>, String>>,
}

pub fn run(args: &TestArgs) -> ExitCode {
    let started = Instant::now();
    let mut errors = Vec::new();
    let mut results = Vec::new();
    let mut loaded = Loaded::default();
    let mut tests = 0;
    for path in &args.paths {
        let files = match test_files(path) {
            Ok(files) => files,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for file in files {
            tests += run_file(&file, &mut loaded, &mut results, &mut errors);
        }
    }
    if tests == 0 && errors.is_empty() {
        let named: Vec<String> = args.paths.iter().map(|p| shown(p)).collect();
        errors.push(format!(
            "no {KIND} document in {} (a document whose kind is {KIND})",
            named.join(", ")
        ));
    }
    let failed = results.iter().filter(|r| !r.passed).count();
    let mut stdout = std::io::stdout().lock();
    match args.output {
        TestOutput::Text => {
            for result in &results {
                let verdict = if result.passed { "PASS" } else { "FAIL" };
                let _ = writeln!(stdout, "{verdict}  {} / {}", result.test, result.case);
                if let Some(failure) = &result.failure {
                    let _ = writeln!(
                        stdout,
                        "      {}:{} {}",
                        result.file, result.index, result.pointer
                    );
                    let _ = writeln!(stdout, "      {}", failure.message);
                    for detail in &failure.details {
                        let _ = writeln!(stdout, "      {detail}");
                    }
                }
            }
            let _ = writeln!(
                stdout,
                "{} in {tests} {}: {} passed, {failed} failed",
                plural(results.len(), "case", "cases"),
                if tests == 1 { "test" } else { "tests" },
                results.len() - failed,
            );
        }
        TestOutput::Json => {
            let text = serde_json::to_string_pretty(&results).unwrap_or_else(|_| "[]".to_owned());
            let _ = writeln!(stdout, "{text}");
        }
        TestOutput::Junit => match junit(&results, &errors, started.elapsed()) {
            Ok(xml) => {
                let _ = stdout.write_all(&xml);
            }
            Err(e) => errors.push(format!("writing the JUnit report: {e}")),
        },
    }
    let _ = stdout.flush();
    drop(stdout);
    print_errors(&errors);
    exit_code(&errors, failed > 0)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The files to read: a file itself; in a directory, recursively, every `*.yaml`/`*.yml`
/// file that mentions the kind (not following symbolic links, skipping hidden entries).
fn test_files(path: &Path) -> Result<Vec<PathBuf>, String> {
    if crate::input::is_stdin(path) || !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut pending = vec![path.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries.flatten() {
            let entry_path = entry.path();
            let hidden = entry.file_name().to_string_lossy().starts_with('.');
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if hidden {
                continue;
            }
            if kind.is_dir() {
                pending.push(entry_path);
            } else if kind.is_file()
                && entry_path
                    .extension()
                    .is_some_and(|x| x == "yaml" || x == "yml")
                && std::fs::read_to_string(&entry_path).is_ok_and(|text| text.contains(KIND))
            {
                files.push(entry_path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Runs every test document of a file; returns how many there were.
fn run_file(
    file: &Path,
    loaded: &mut Loaded,
    results: &mut Vec<CaseResult>,
    errors: &mut Vec<String>,
) -> usize {
    let text = match read_text(file) {
        Ok(text) => text,
        Err(e) => {
            errors.push(e);
            return 0;
        }
    };
    let base = if crate::input::is_stdin(file) {
        PathBuf::new()
    } else {
        file.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let mut tests = 0;
    for (index, document) in each_document_within::<serde_json::Value>(&text, MAX_MANIFEST_DEPTH) {
        let here = format!("{}:{index}", shown(file));
        let value = match document {
            Ok(value) => value,
            Err(e) => {
                errors.push(located(&shown(file), &e, index));
                continue;
            }
        };
        if value.get("kind").and_then(|k| k.as_str()) != Some(KIND) {
            continue;
        }
        tests += 1;
        let document = match palisade_api_types::json::typed::<PolicyTestDocument>(&value) {
            Ok(document) => document,
            Err(e) => {
                errors.push(format!("{here}: {e}"));
                continue;
            }
        };
        if let Err(e) = document.validate() {
            errors.push(format!("{here}: {e}"));
            continue;
        }
        let test = Test {
            document: &document,
            file: shown(file),
            index,
            base: &base,
        };
        test.run(loaded, results, errors);
    }
    tests
}

/// One test document, with where it was read.
struct Test<'a> {
    document: &'a PolicyTestDocument,
    file: String,
    index: usize,
    base: &'a Path,
}

impl Test<'_> {
    fn here(&self) -> String {
        format!("{}:{}", self.file, self.index)
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.base.join(relative)
    }

    /// What the files of `/spec/<field>` hold, or `None` with each of their errors in `errors`.
    fn read<T>(
        &self,
        loading: Result<T, Vec<String>>,
        field: &str,
        errors: &mut Vec<String>,
    ) -> Option<T> {
        match loading {
            Ok(value) => Some(value),
            Err(e) => {
                for e in e {
                    errors.push(format!("{}: /spec/{field}: {e}", self.here()));
                }
                None
            }
        }
    }

    fn run(&self, loaded: &mut Loaded, results: &mut Vec<CaseResult>, errors: &mut Vec<String>) {
        let spec = &self.document.spec;
        let catalog_path = spec.catalog.as_deref().map(|c| self.path(c));
        let catalog = loaded
            .catalogs
            .entry(catalog_path.clone())
            .or_insert_with(|| catalog_from(catalog_path.as_deref()))
            .clone();
        let catalog = match catalog {
            Ok(catalog) => catalog,
            Err(e) => {
                errors.push(format!("{}: /spec/catalog: {e}", self.here()));
                return;
            }
        };
        let policy_paths: Vec<PathBuf> = spec.policies.iter().map(|p| self.path(p)).collect();
        let policies = loaded
            .policies
            .entry((policy_paths.clone(), catalog_path))
            .or_insert_with(|| load_policies(&policy_paths, &catalog))
            .clone();
        let Some(policies) = self.read(policies, "policies", errors) else {
            return;
        };
        let at = match spec.at.as_deref().map(parse_at).transpose() {
            Ok(at) => at,
            Err(e) => {
                errors.push(format!("{}: /spec/at: {e}", self.here()));
                return;
            }
        };
        let exception_paths: Vec<PathBuf> = spec.exceptions.iter().map(|p| self.path(p)).collect();
        let exceptions = if exception_paths.is_empty() {
            Ok(Vec::new())
        } else {
            loaded
                .exceptions
                .entry((policy_paths.clone(), exception_paths.clone(), at.clone()))
                .or_insert_with(|| {
                    load_exceptions_from(&policy_paths, &exception_paths, at.clone())
                })
                .clone()
        };
        let Some(exceptions) = self.read(exceptions, "exceptions", errors) else {
            return;
        };
        let at =
            at.unwrap_or_else(|| palisade_api_types::exception::stored_time(chrono::Utc::now()));
        let subjects = Subjects {
            policies: &policies,
            exceptions: &exceptions,
            catalog: &catalog,
            at: &at,
        };
        for (i, case) in spec.cases.iter().enumerate() {
            let started = Instant::now();
            let got = match self.judge(&subjects, case, i, loaded) {
                Ok(got) => got,
                Err(e) => {
                    errors.push(format!("{}: {e}", self.here()));
                    continue;
                }
            };
            let failure = compare(&case.expect, &got);
            results.push(CaseResult {
                test: self.document.metadata.name.clone(),
                file: self.file.clone(),
                index: self.index,
                case: case.name.clone(),
                pointer: format!("/spec/cases/{i}"),
                passed: failure.is_none(),
                failure,
                time: started.elapsed(),
            });
        }
    }

    /// What the policies give the case's object or resource; bad input names the field.
    fn judge(
        &self,
        subjects: &Subjects<'_>,
        case: &TestCase,
        i: usize,
        loaded: &mut Loaded,
    ) -> Result<Got, String> {
        let at = format!("/spec/cases/{i}");
        if let Some(resource) = &case.resource {
            return judge_resource(subjects, resource, &format!("{at}/resource"));
        }
        let (object, file, document) = match (&case.object, &case.file) {
            (Some(object), _) => (object.clone(), PathBuf::from(&self.file), self.index),
            (None, Some(file)) => {
                let path = self.path(file);
                let documents = loaded
                    .manifests
                    .entry(path.clone())
                    .or_insert_with(|| manifest_documents(&path))
                    .as_ref()
                    .map_err(|e| format!("{at}/file: {e}"))?;
                let index = case.document.unwrap_or(0);
                let object = documents.get(index).cloned().ok_or_else(|| {
                    format!(
                        "{at}/document: {file} has {}, there is no document {index}",
                        plural(documents.len(), "document", "documents")
                    )
                })?;
                (object, path, index)
            }
            (None, None) => {
                return Err(format!(
                    "{at}: give exactly one of object, file or resource"
                ))
            }
        };
        let out = evaluate_object(
            subjects.policies,
            subjects.exceptions,
            &file,
            document,
            &object,
        )
        .map_err(|e| {
            if case.object.is_some() {
                // Located in the test document: the object's fields under the case.
                let prefix = format!("{}:{}: ", self.file, self.index);
                let rest = e.strip_prefix(&prefix).unwrap_or(&e);
                format!("{at}/object{rest}")
            } else {
                format!("{at}/file: {e}")
            }
        })?;
        let name = out.name.as_deref().unwrap_or("<unnamed>");
        Ok(Got {
            admitted: out.admitted,
            denials: out
                .denials
                .iter()
                .map(|d| (d.policy.clone(), d.message.clone()))
                .collect(),
            warnings: out.warnings.iter().map(|w| w.message.clone()).collect(),
            excepted_by: out.excepted.iter().map(|x| x.exception.clone()).collect(),
            note: (!out.checked).then(|| {
                format!(
                    "{}/{name}: palisade's rules do not check the kind {} ({})",
                    out.kind, out.kind, out.api_version
                )
            }),
        })
    }
}

/// What a test's cases are judged against.
struct Subjects<'a> {
    policies: &'a [Policy],
    exceptions: &'a [Exception],
    catalog: &'a Catalog,
    /// When exceptions are in force (stored form).
    at: &'a str,
}

/// The plan decision the API would make on a create of the resource.
fn judge_resource(
    subjects: &Subjects<'_>,
    resource: &TestResource,
    at: &str,
) -> Result<Got, String> {
    let resource_type =
        ResourceType::parse(&resource.resource_type).map_err(|e| format!("{at}/type: {e}"))?;
    let plan = PlanName::parse(&resource.plan).map_err(|e| format!("{at}/plan: {e}"))?;
    let decision = compute_plan::decide(subjects.policies, subjects.catalog, resource_type, &plan)
        .map_err(|e| format!("{at}/plan: {e}"))?;
    let mut warnings: Vec<String> = decision
        .audit_warnings
        .iter()
        .map(ToString::to_string)
        .collect();
    let (decision, used) = except_decision(
        decision,
        subjects.exceptions,
        resource.name.as_deref(),
        subjects.at,
    );
    let enforced = resource_type.is_plan_checked();
    if !enforced && !decision.allowed {
        // What the API answers a function on a disallowed plan: created, with a warning.
        warnings.push(
            palisade_policy::Warning::FunctionPlanNotEnforced {
                plan: plan.to_string(),
                policies: decision.denied_by.iter().map(ToString::to_string).collect(),
            }
            .to_string(),
        );
    }
    Ok(Got {
        admitted: decision.allowed || !enforced,
        denials: match decision.message() {
            Some(message) if enforced => decision
                .denied_by
                .iter()
                .map(|policy| (policy.to_string(), message.clone()))
                .collect(),
            _ => Vec::new(),
        },
        warnings,
        excepted_by: used.iter().map(|x| x.name.to_string()).collect(),
        note: (!enforced).then(|| format!("the API does not enforce plans of {resource_type}")),
    })
}

/// The documents of a manifest file, in order (`palisade check`'s reading).
fn manifest_documents(path: &Path) -> Result<Vec<serde_json::Value>, String> {
    let text = read_text(path)?;
    each_document_within::<serde_json::Value>(&text, MAX_MANIFEST_DEPTH)
        .map(|(index, document)| document.map_err(|e| located(&shown(path), &e, index)))
        .collect()
}

/// `None` when the case got what it expects; otherwise why not, and what it got.
fn compare(expect: &Expectation, got: &Got) -> Option<CaseFailure> {
    let verdict = |admitted: bool| if admitted { "admitted" } else { "denied" };
    let mut wrong = Vec::new();
    if expect.verdict.passes() != got.admitted {
        wrong.push(format!(
            "expected {}, got {}",
            verdict(expect.verdict.passes()),
            verdict(got.admitted)
        ));
    }
    if let Some(message) = &expect.message {
        if got.admitted || !got.denials.iter().any(|(_, m)| m == message) {
            wrong.push(format!("expected the message: {message}"));
        }
    }
    if let Some(policy) = &expect.policy {
        if !got.denials.iter().any(|(p, _)| p == policy) {
            wrong.push(format!("expected a denial by policy '{policy}'"));
        }
    }
    if let Some(warnings) = &expect.warnings {
        if warnings != &got.warnings {
            wrong.push(if warnings.is_empty() {
                "expected no warning".to_owned()
            } else {
                format!("expected the warnings: {}", warnings.join(" | "))
            });
        }
    }
    if let Some(exception) = &expect.excepted_by {
        if !got.excepted_by.iter().any(|e| e == exception) {
            wrong.push(format!(
                "expected to be let past by exception '{exception}'"
            ));
        }
    }
    if wrong.is_empty() {
        return None;
    }
    let mut details = Vec::new();
    for (policy, message) in &got.denials {
        details.push(format!("got: denied by policy '{policy}': {message}"));
    }
    if got.admitted {
        details.push("got: admitted".to_owned());
    }
    for warning in &got.warnings {
        details.push(format!("got warning: {warning}"));
    }
    for exception in &got.excepted_by {
        details.push(format!("got: let past by exception '{exception}'"));
    }
    if let Some(note) = &got.note {
        details.push(format!("note: {note}"));
    }
    let message = wrong.remove(0);
    wrong.extend(details);
    Some(CaseFailure {
        message,
        details: wrong,
    })
}

/// The JUnit XML report: one `testsuite` per test document, one `testcase` per case, a
/// `failure` with what the case got; input errors as one `testsuite` of `error`s.
fn junit(
    results: &[CaseResult],
    errors: &[String],
    elapsed: Duration,
) -> Result<Vec<u8>, quick_xml::Error> {
    use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
    let seconds = |d: Duration| format!("{:.3}", d.as_secs_f64());
    let mut writer = quick_xml::Writer::new_with_indent(Vec::new(), b' ', 2);
    writer.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let failed = results.iter().filter(|r| !r.passed).count();
    let total = (results.len() + errors.len()).to_string();
    let (failures, error_count) = (failed.to_string(), errors.len().to_string());
    writer.write_event(Event::Start(BytesStart::new("testsuites").with_attributes(
        [
            ("name", "palisade test"),
            ("tests", total.as_str()),
            ("failures", failures.as_str()),
            ("errors", error_count.as_str()),
            ("time", seconds(elapsed).as_str()),
        ],
    )))?;
    let mut suites: Vec<(&str, &str, usize, Vec<&CaseResult>)> = Vec::new();
    for result in results {
        match suites.iter_mut().find(|(test, file, index, _)| {
            *test == result.test && *file == result.file && *index == result.index
        }) {
            Some((_, _, _, cases)) => cases.push(result),
            None => suites.push((&result.test, &result.file, result.index, vec![result])),
        }
    }
    for (test, file, _, cases) in &suites {
        let time: Duration = cases.iter().map(|c| c.time).sum();
        let (tests, failures) = (
            cases.len().to_string(),
            cases.iter().filter(|c| !c.passed).count().to_string(),
        );
        writer.write_event(Event::Start(BytesStart::new("testsuite").with_attributes(
            [
                ("name", *test),
                ("tests", tests.as_str()),
                ("failures", failures.as_str()),
                ("errors", "0"),
                ("time", seconds(time).as_str()),
                ("file", *file),
            ],
        )))?;
        for case in cases {
            let element = BytesStart::new("testcase").with_attributes([
                ("name", case.case.as_str()),
                ("classname", *test),
                ("file", *file),
                ("time", seconds(case.time).as_str()),
            ]);
            match &case.failure {
                None => writer.write_event(Event::Empty(element))?,
                Some(failure) => {
                    writer.write_event(Event::Start(element))?;
                    writer.write_event(Event::Start(
                        BytesStart::new("failure").with_attributes([
                            ("message", failure.message.as_str()),
                            ("type", "verdict"),
                        ]),
                    ))?;
                    let mut body = failure.message.clone();
                    for detail in &failure.details {
                        body.push('\n');
                        body.push_str(detail);
                    }
                    writer.write_event(Event::Text(BytesText::new(&body)))?;
                    writer.write_event(Event::End(BytesEnd::new("failure")))?;
                    writer.write_event(Event::End(BytesEnd::new("testcase")))?;
                }
            }
        }
        writer.write_event(Event::End(BytesEnd::new("testsuite")))?;
    }
    if !errors.is_empty() {
        writer.write_event(Event::Start(BytesStart::new("testsuite").with_attributes(
            [
                ("name", "input"),
                ("tests", error_count.as_str()),
                ("failures", "0"),
                ("errors", error_count.as_str()),
                ("time", "0.000"),
            ],
        )))?;
        for (i, error) in errors.iter().enumerate() {
            let name = format!("input error {}", i + 1);
            writer.write_event(Event::Start(BytesStart::new("testcase").with_attributes([
                ("name", name.as_str()),
                ("classname", "input"),
                ("time", "0.000"),
            ])))?;
            writer.write_event(Event::Empty(
                BytesStart::new("error")
                    .with_attributes([("message", error.as_str()), ("type", "input")]),
            ))?;
            writer.write_event(Event::End(BytesEnd::new("testcase")))?;
        }
        writer.write_event(Event::End(BytesEnd::new("testsuite")))?;
    }
    writer.write_event(Event::End(BytesEnd::new("testsuites")))?;
    let mut xml = writer.into_inner();
    xml.push(b'\n');
    Ok(xml)
}
