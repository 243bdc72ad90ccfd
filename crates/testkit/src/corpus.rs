//! The shared corpus in `testdata/`: admission, compute-plan and policy-document cases, and
//! [`AdmissionHarness`], which runs the admission cases against any evaluator (the Rust
//! evaluator, the rendered CEL, `palisade check`, a real API server) and reports every
//! mismatch at once.

#![allow(
    clippy::panic,
    reason = "the harness is a test: a corpus that cannot load or does not match fails loudly"
)]

use std::path::{Path, PathBuf};

use palisade_api_types::PolicyDocument;
use palisade_policy::{Catalog, Policy};
use serde::Deserialize;

/// The repository's `testdata/` directory.
pub fn testdata_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

#[derive(Clone, Debug, Deserialize)]
pub struct Expectation {
    pub policy: String,
    #[serde(default)]
    pub rule: Option<String>,
    pub message: String,
}

#[derive(Clone, Debug, Deserialize)]
pub struct AdmissionExpect {
    pub checked: bool,
    pub admitted: bool,
    #[serde(default)]
    pub denials: Vec<Expectation>,
    #[serde(default)]
    pub warnings: Vec<Expectation>,
}

/// One admission case: policies, an object, the expected verdict.
#[derive(Clone, Debug, Deserialize)]
pub struct AdmissionCase {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// False when a real API server cannot hold the object as written.
    #[serde(default = "yes")]
    pub live: bool,
    /// The oldest Kubernetes minor (`1.35`) whose API server holds the object as written; older
    /// ones do not know a field it uses and refuse it by validation. `None`: every supported one.
    #[serde(default)]
    pub since: Option<String>,
    pub policies: Vec<PolicyDocument>,
    pub object: serde_json::Value,
    pub expect: AdmissionExpect,
    #[serde(skip)]
    pub file: String,
}

fn yes() -> bool {
    true
}

/// The minor number of `1.35`, `1.35.2` or `v1.35.2`.
fn minor_of(version: &str) -> Option<u32> {
    let mut parts = version.trim_start_matches('v').split('.');
    match (parts.next(), parts.next()) {
        (Some("1"), Some(minor)) => minor.parse().ok(),
        _ => None,
    }
}

impl AdmissionCase {
    /// Whether an API server of `version` (`1.30.14`) can hold the case's object, so a live
    /// replay there compares verdicts.
    pub fn live_on(&self, version: &str) -> bool {
        let Some(since) = &self.since else {
            return self.live;
        };
        let (Some(needed), Some(have)) = (minor_of(since), minor_of(version)) else {
            panic!(
                "case {}: since {since:?} or version {version:?} is no 1.N",
                self.name
            );
        };
        self.live && have >= needed
    }
}

#[derive(Clone, Debug, Deserialize)]
pub struct PlanExpect {
    pub allowed: bool,
    #[serde(default)]
    pub message: Option<String>,
    pub allowed_plans: Vec<String>,
    #[serde(default)]
    pub denied_by: Vec<String>,
    #[serde(default)]
    pub audit_warnings: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct PlanCase {
    pub name: String,
    pub policies: Vec<PolicyDocument>,
    #[serde(rename = "type")]
    pub resource_type: String,
    pub plan: String,
    pub expect: PlanExpect,
    #[serde(skip)]
    pub file: String,
}

#[derive(Clone, Debug, Deserialize)]
pub struct DocumentExpect {
    #[serde(default)]
    pub error_pointer: Option<String>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct DocumentCase {
    pub name: String,
    pub document: serde_json::Value,
    pub expect: DocumentExpect,
    #[serde(skip)]
    pub file: String,
}

/// Why the corpus could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0}: {1}")]
    Yaml(String, serde_yaml_ng::Error),
    #[error("case {0}: {1}")]
    Policy(String, String),
}

fn load<T: for<'de> Deserialize<'de>>(
    dir: &str,
    set_file: impl Fn(&mut T, String),
) -> Result<Vec<T>, CorpusError> {
    let dir = testdata_dir().join(dir);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| CorpusError::Io(dir.display().to_string(), e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    paths.sort();
    let mut cases = Vec::new();
    for path in paths {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|e| CorpusError::Io(shown.clone(), e))?;
        let file_cases: Vec<T> =
            serde_yaml_ng::from_str(&text).map_err(|e| CorpusError::Yaml(shown.clone(), e))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for mut case in file_cases {
            set_file(&mut case, name.clone());
            cases.push(case);
        }
    }
    Ok(cases)
}

pub fn admission_cases() -> Result<Vec<AdmissionCase>, CorpusError> {
    load("admission", |c: &mut AdmissionCase, f| c.file = f)
}

pub fn plan_cases() -> Result<Vec<PlanCase>, CorpusError> {
    load("compute_plans", |c: &mut PlanCase, f| c.file = f)
}

pub fn document_cases() -> Result<Vec<DocumentCase>, CorpusError> {
    load("policy_documents", |c: &mut DocumentCase, f| c.file = f)
}

/// Validates a case's policy documents with the built-in catalog.
pub fn policies_of(
    case_name: &str,
    documents: &[PolicyDocument],
) -> Result<Vec<Policy>, CorpusError> {
    let catalog = Catalog::builtin();
    documents
        .iter()
        .map(|d| {
            d.validate(&catalog)
                .map(|valid| valid.policy)
                .map_err(|e| CorpusError::Policy(case_name.to_owned(), e.to_string()))
        })
        .collect()
}

/// The validated policy `name` of `boundary` with `spec` (JSON), checked against the built-in
/// catalog; panics when it is invalid.
pub fn policy(name: &str, boundary: &str, spec: serde_json::Value) -> Policy {
    let document = serde_json::json!({
        "apiVersion": "palisade.dev/v1", "kind": "BoundaryPolicy",
        "metadata": {"name": name, "boundary": boundary},
        "spec": spec,
    });
    PolicyDocument::from_json(document.to_string().as_bytes())
        .and_then(|d| d.validate(&Catalog::builtin()))
        .map(|valid| valid.policy)
        .unwrap_or_else(|e| panic!("policy {name} of {boundary} is invalid: {e}"))
}

/// One denial or audit warning, as an evaluator reports it or as a case expects it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    pub policy: String,
    /// The rule; `None` when the evaluator does not tell (the rendered CEL, an API server), or,
    /// in an expectation, when any rule will do.
    pub rule: Option<String>,
    pub message: String,
}

impl Finding {
    fn expected(expectation: &Expectation) -> Self {
        Self {
            policy: expectation.policy.clone(),
            rule: expectation.rule.clone(),
            message: expectation.message.clone(),
        }
    }

    /// Whether `got` is this expected finding: the same policy and message, and the same rule
    /// when both name one.
    fn matches(&self, got: &Finding) -> bool {
        self.policy == got.policy
            && self.message == got.message
            && match (&self.rule, &got.rule) {
                (Some(want), Some(got)) => want == got,
                _ => true,
            }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.rule {
            Some(rule) => write!(f, "{} ({rule}): {:?}", self.policy, self.message),
            None => write!(f, "{}: {:?}", self.policy, self.message),
        }
    }
}

/// `[a, b]` with each finding shown as text.
fn shown(findings: &[Finding]) -> String {
    let texts: Vec<String> = findings.iter().map(Finding::to_string).collect();
    format!("[{}]", texts.join(", "))
}

/// What one evaluator answered for one admission case.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the object's kind was judged at all; `None` when the evaluator cannot tell.
    pub checked: Option<bool>,
    pub admitted: bool,
    pub denials: Vec<Finding>,
    pub warnings: Vec<Finding>,
}

/// How much of a verdict an evaluator reports, so the harness asks no more of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reports {
    /// Every denial and warning, in the corpus's order (the Rust evaluator, `palisade check`).
    InOrder,
    /// Every denial and warning, in any order (the rendered CEL, one policy at a time).
    AnyOrder,
    /// One denial, any one of the expected ones (an API server stops at the first denying
    /// policy, SPEC 3.3), and every warning in any order.
    FirstDenial,
}

/// The admission corpus run against one evaluator: every selected case is evaluated, every
/// mismatch collected, and the run fails once, naming each failing case.
#[derive(Clone)]
pub struct AdmissionHarness {
    evaluator: String,
    reports: Reports,
    only: std::sync::Arc<dyn Fn(&AdmissionCase) -> bool + Send + Sync>,
}

impl std::fmt::Debug for AdmissionHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionHarness")
            .field("evaluator", &self.evaluator)
            .field("reports", &self.reports)
            .finish_non_exhaustive()
    }
}

/// What a run that matched the corpus covered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub cases: usize,
    pub admitted: usize,
    pub denied: usize,
    /// Cases with at least one expected audit warning.
    pub warned: usize,
}

impl AdmissionHarness {
    /// Every case of the corpus against `evaluator` (its name in messages).
    pub fn new(evaluator: &str, reports: Reports) -> Self {
        Self {
            evaluator: evaluator.to_owned(),
            reports,
            only: std::sync::Arc::new(|_| true),
        }
    }

    /// Only the cases `filter` keeps (for example the `live` ones on a real API server).
    pub fn only(self, filter: impl Fn(&AdmissionCase) -> bool + Send + Sync + 'static) -> Self {
        Self {
            only: std::sync::Arc::new(filter),
            ..self
        }
    }

    /// The selected cases; panics when the corpus cannot be loaded or none is selected.
    pub fn cases(&self) -> Vec<AdmissionCase> {
        let cases: Vec<AdmissionCase> = admission_cases()
            .unwrap_or_else(|e| panic!("the admission corpus cannot be loaded: {e}"))
            .into_iter()
            .filter(|case| (self.only)(case))
            .collect();
        assert!(
            !cases.is_empty(),
            "{}: no admission case selected",
            self.evaluator
        );
        cases
    }

    /// Evaluates every selected case; panics once, listing every case whose answer (or the
    /// evaluator's error) does not match the corpus.
    pub fn run(
        &self,
        mut evaluate: impl FnMut(&AdmissionCase) -> Result<Verdict, String>,
    ) -> Report {
        let mut tally = Tally::default();
        for case in self.cases() {
            let answer = evaluate(&case);
            tally.record(self, &case, answer);
        }
        tally.finish(self)
    }

    /// `run` for an evaluator that awaits (a real API server); the cases one after another.
    pub async fn run_async<F, Fut>(&self, mut evaluate: F) -> Report
    where
        F: FnMut(AdmissionCase) -> Fut,
        Fut: std::future::Future<Output = Result<Verdict, String>>,
    {
        let mut tally = Tally::default();
        for case in self.cases() {
            let answer = evaluate(case.clone()).await;
            tally.record(self, &case, answer);
        }
        tally.finish(self)
    }

    /// What is wrong with `got` for `case`, if anything.
    fn mismatch(&self, case: &AdmissionCase, got: &Verdict) -> Option<String> {
        let want = &case.expect;
        let want_denials: Vec<Finding> = want.denials.iter().map(Finding::expected).collect();
        let want_warnings: Vec<Finding> = want.warnings.iter().map(Finding::expected).collect();
        let mut wrong = Vec::new();
        if got.checked.is_some_and(|checked| checked != want.checked) {
            wrong.push(format!("checked={:?}, want {}", got.checked, want.checked));
        }
        if got.admitted != want.admitted {
            wrong.push(format!("admitted={}, want {}", got.admitted, want.admitted));
        }
        let (denials_ok, one_of) = match self.reports {
            Reports::InOrder => (same_in_order(&want_denials, &got.denials), ""),
            Reports::AnyOrder => (same_in_any_order(&want_denials, &got.denials), ""),
            Reports::FirstDenial => match got.denials.as_slice() {
                [] => (want_denials.is_empty(), "one of "),
                [denial] => (want_denials.iter().any(|w| w.matches(denial)), "one of "),
                _ => (false, "one of "),
            },
        };
        if !denials_ok {
            wrong.push(format!(
                "denials {}, want {one_of}{}",
                shown(&got.denials),
                shown(&want_denials)
            ));
        }
        let warnings_ok = match self.reports {
            Reports::InOrder => same_in_order(&want_warnings, &got.warnings),
            Reports::AnyOrder | Reports::FirstDenial => {
                same_in_any_order(&want_warnings, &got.warnings)
            }
        };
        if !warnings_ok {
            wrong.push(format!(
                "warnings {}, want {}",
                shown(&got.warnings),
                shown(&want_warnings)
            ));
        }
        (!wrong.is_empty()).then(|| wrong.join("; "))
    }
}

fn same_in_order(want: &[Finding], got: &[Finding]) -> bool {
    want.len() == got.len() && want.iter().zip(got).all(|(w, g)| w.matches(g))
}

fn same_in_any_order(want: &[Finding], got: &[Finding]) -> bool {
    let by_text =
        |a: &&Finding, b: &&Finding| (&a.policy, &a.message).cmp(&(&b.policy, &b.message));
    let mut want: Vec<&Finding> = want.iter().collect();
    let mut got: Vec<&Finding> = got.iter().collect();
    want.sort_by(by_text);
    got.sort_by(by_text);
    want.len() == got.len() && want.iter().zip(&got).all(|(w, g)| w.matches(g))
}

/// The outcomes of one run so far.
#[derive(Debug, Default)]
struct Tally {
    report: Report,
    failures: Vec<String>,
}

impl Tally {
    fn record(
        &mut self,
        harness: &AdmissionHarness,
        case: &AdmissionCase,
        answer: Result<Verdict, String>,
    ) {
        self.report.cases += 1;
        let problem = match &answer {
            Ok(got) => harness.mismatch(case, got),
            Err(error) => Some(format!("the evaluator failed: {error}")),
        };
        if let Some(problem) = problem {
            let failure = format!("{} ({}): {problem}", case.name, case.file);
            self.failures.push(failure);
            return;
        }
        if case.expect.admitted {
            self.report.admitted += 1;
        } else {
            self.report.denied += 1;
        }
        if !case.expect.warnings.is_empty() {
            self.report.warned += 1;
        }
    }

    fn finish(self, harness: &AdmissionHarness) -> Report {
        assert!(
            self.failures.is_empty(),
            "{}: {} of {} admission cases do not match the corpus:\n{}",
            harness.evaluator,
            self.failures.len(),
            self.report.cases,
            self.failures.join("\n")
        );
        self.report
    }
}
