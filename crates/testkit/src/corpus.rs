//! The shared corpus in `testdata/`: admission, compute-plan and policy-document cases.

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
    pub policies: Vec<PolicyDocument>,
    pub object: serde_json::Value,
    pub expect: AdmissionExpect,
    #[serde(skip)]
    pub file: String,
}

fn yes() -> bool {
    true
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
