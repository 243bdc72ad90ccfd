//! The published JSON Schemas of `BoundaryPolicy` and `BoundaryException` documents
//! (`docs/schemas/boundarypolicy.schema.json`, `docs/schemas/boundaryexception.schema.json`),
//! generated from the types that read them, for editors (yaml-language-server, IDEs) and CI
//! linters. It describes the document's shape; what only the validation can say (a plan the
//! catalog lacks, a registry prefix that is not one) stays the API's and `palisade check`'s.

use serde_json::{json, Value};

use crate::document::{PolicyDocument, API_VERSION, KIND};

/// Where the schema is published in the repository.
pub const PATH: &str = "docs/schemas/boundarypolicy.schema.json";
/// Where the exceptions' schema is published in the repository.
pub const EXCEPTION_PATH: &str = "docs/schemas/boundaryexception.schema.json";

/// Where the policy tests' schema is published in the repository.
pub const POLICY_TEST_PATH: &str = "docs/schemas/policytest.schema.json";

/// The JSON Schema (draft 2020-12) of a `PolicyTest` document (`palisade test`).
pub fn policy_test() -> Value {
    let mut schema = schemars::schema_for!(crate::policy_test::PolicyTestDocument).to_value();
    schema["title"] = json!(crate::policy_test::KIND);
    schema["description"] = json!(
        "A palisade PolicyTest document (`palisade test`): cases of objects and resources \
         with the verdict and exact message a boundary's policies must give them. Generated \
         from the types palisade reads it with."
    );
    schema["properties"]["apiVersion"] = json!({"const": API_VERSION});
    schema["properties"]["kind"] = json!({"const": crate::policy_test::KIND});
    // A case is one object, file or resource.
    if let Some(case) = schema.pointer_mut("/$defs/TestCase") {
        case["oneOf"] = json!([
            {"required": ["object"]},
            {"required": ["file"]},
            {"required": ["resource"]}
        ]);
    }
    schema
}

/// The JSON Schema (draft 2020-12) of a `BoundaryException` document (SPEC 7).
pub fn boundary_exception() -> Value {
    let mut schema = schemars::schema_for!(crate::exception::ExceptionDocument).to_value();
    schema["title"] = json!(crate::exception::KIND);
    schema["description"] = json!(
        "A palisade BoundaryException document (SPEC 7): one workload or resource let past \
         one policy of its boundary until expiresAt, with a reason. Generated from the types \
         palisade reads it with."
    );
    schema["properties"]["apiVersion"] = json!({"const": API_VERSION});
    schema["properties"]["kind"] = json!({"const": crate::exception::KIND});
    schema
}

/// The JSON Schema (draft 2020-12) of a `BoundaryPolicy` document.
pub fn boundary_policy() -> Value {
    let mut schema = schemars::schema_for!(PolicyDocument).to_value();
    schema["title"] = json!(KIND);
    schema["description"] = json!(
        "A palisade BoundaryPolicy document (SPEC 1): the rules a boundary's resources and \
         workloads must keep. Generated from the types palisade reads it with."
    );
    // What the types read as plain strings, the validation holds to one value.
    schema["properties"]["apiVersion"] = json!({"const": API_VERSION});
    schema["properties"]["kind"] = json!({"const": KIND});
    // A rule is exactly one of its kinds.
    if let Some(rule) = schema.pointer_mut("/$defs/RuleDoc") {
        rule["minProperties"] = json!(1);
        rule["maxProperties"] = json!(1);
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exception_schema_holds_the_document_s_shape() {
        let schema = boundary_exception();
        assert_eq!(schema["properties"]["kind"]["const"], "BoundaryException");
        assert_eq!(schema["additionalProperties"], false);
        let spec = &schema["$defs"]["ExceptionSpec"];
        let fields: Vec<&String> = spec["properties"].as_object().unwrap().keys().collect();
        assert_eq!(
            fields,
            [
                "policy",
                "rules",
                "match",
                "resources",
                "plans",
                "expiresAt",
                "reason"
            ]
        );
        assert_eq!(spec["required"], json!(["policy", "expiresAt", "reason"]));
    }

    #[test]
    fn the_schema_holds_the_document_s_shape() {
        let schema = boundary_policy();
        assert_eq!(schema["properties"]["kind"]["const"], "BoundaryPolicy");
        assert_eq!(
            schema["properties"]["apiVersion"]["const"],
            "palisade.dev/v1"
        );
        assert_eq!(schema["additionalProperties"], false);
        let rule = &schema["$defs"]["RuleDoc"];
        assert_eq!(rule["maxProperties"], 1);
        let kinds: Vec<&String> = rule["properties"].as_object().unwrap().keys().collect();
        assert_eq!(
            kinds,
            [
                "allowedComputePlans",
                "requiredLabels",
                "allowedRegistries",
                "disallowLatestTag"
            ]
        );
        assert_eq!(
            schema["required"],
            json!(["apiVersion", "kind", "metadata", "spec"])
        );
    }
}
