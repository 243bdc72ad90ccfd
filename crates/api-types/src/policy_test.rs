//! `PolicyTest` documents (SPEC 4.2 v3, `palisade test`): a suite of cases, each an object
//! (inline or from a file) or a resource's plan, with the verdict and the exact message the
//! boundary's policies and exceptions must give it. Kept in git beside the policies and run in
//! CI; paths are relative to the file the document is in.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::document::API_VERSION;

/// The document's `kind`.
pub const KIND: &str = "PolicyTest";

/// A whole test document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyTestDocument {
    pub api_version: String,
    pub kind: String,
    pub metadata: TestMetadata,
    pub spec: PolicyTestSpec,
}

/// A test's name (its JUnit test suite's name).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestMetadata {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// What is tested, and the cases.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyTestSpec {
    /// BoundaryPolicy files or directories (every *.yaml/*.yml file in it), relative to this
    /// file; all of one boundary.
    pub policies: Vec<String>,
    /// BoundaryException files or directories, relative to this file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exceptions: Vec<String>,
    /// The time that decides which exceptions are in force (RFC 3339; default: when the test
    /// runs). Give it when exceptions are tested, so the test does not change with the date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// A plan catalog file instead of the built-in one, relative to this file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<String>,
    /// The cases, each judged on its own.
    pub cases: Vec<TestCase>,
}

/// One case: exactly one of `object`, `file` or `resource`, and what is expected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TestCase {
    /// The case's name (its JUnit test case's name); unique within the test.
    pub name: String,
    /// A Kubernetes object, written inline, judged as the API server would in a namespace of
    /// the policies' boundary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<serde_json::Value>,
    /// A manifest file, relative to this file, whose document `document` is the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Which document of `file` (0-based; default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<usize>,
    /// A resource created through palisade's API, whose compute plan is judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<TestResource>,
    pub expect: Expectation,
}

/// A resource of a plan case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TestResource {
    /// The resource type (`app`, `container_instance`, `postgresql`, ...).
    #[serde(rename = "type")]
    pub resource_type: String,
    /// The resource's name: exceptions name resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub plan: String,
}

/// What a case must give.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expectation {
    pub verdict: Verdict,
    /// The exact message of a denial (of one of the denying policies, for an object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The name of a policy that denies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The exact audit warnings, in the order `palisade check` gives them (by policy name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    /// The name of the exception that lets the object or resource past a policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excepted_by: Option<String>,
}

/// The verdict: `admitted` (objects) and `allowed` (plans) mean the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Admitted,
    Allowed,
    Denied,
}

impl Verdict {
    /// Whether the verdict lets the object or plan through.
    pub fn passes(self) -> bool {
        !matches!(self, Self::Denied)
    }
}

impl PolicyTestDocument {
    /// What the types cannot say: the API version, one subject per case, unique case names,
    /// expectations a verdict can have. The error starts with the field's JSON Pointer.
    pub fn validate(&self) -> Result<(), String> {
        let document = self;
        if document.api_version != API_VERSION {
            return Err(format!(
                "/apiVersion: must be {API_VERSION}, got '{}'",
                document.api_version
            ));
        }
        if document.metadata.name.trim().is_empty() {
            return Err("/metadata/name: must not be empty".to_owned());
        }
        if document.spec.policies.is_empty() {
            return Err(
                "/spec/policies: name at least one BoundaryPolicy file or directory".to_owned(),
            );
        }
        let mut names = BTreeSet::new();
        for (i, case) in document.spec.cases.iter().enumerate() {
            let at = format!("/spec/cases/{i}");
            if case.name.trim().is_empty() {
                return Err(format!("{at}/name: must not be empty"));
            }
            if !names.insert(case.name.as_str()) {
                return Err(format!(
                    "{at}/name: '{}' names an earlier case too; case names are unique in a test",
                    case.name
                ));
            }
            let subjects = [
                case.object.is_some(),
                case.file.is_some(),
                case.resource.is_some(),
            ];
            if subjects.iter().filter(|s| **s).count() != 1 {
                return Err(format!(
                    "{at}: give exactly one of object, file or resource"
                ));
            }
            if case.document.is_some() && case.file.is_none() {
                return Err(format!("{at}/document: only a file case picks a document"));
            }
            let expect = &case.expect;
            if expect.verdict.passes() {
                if expect.message.is_some() {
                    return Err(format!(
                    "{at}/expect/message: only a denial has a message (an audit policy's is a warning: use warnings)"
                ));
                }
                if expect.policy.is_some() {
                    return Err(format!(
                        "{at}/expect/policy: only a denial names a denying policy"
                    ));
                }
            }
        }
        if document.spec.cases.is_empty() {
            return Err("/spec/cases: give at least one case".to_owned());
        }
        Ok(())
    }
}
