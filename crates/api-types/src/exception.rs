//! `BoundaryException` documents (SPEC 7): the serde shape, and their validation into a
//! `palisade_policy::Exception`. Every error names the field by its JSON Pointer.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use palisade_policy::exception::{
    ObjectMatch, ResourceRef, MAX_LIST_ENTRIES, MAX_REASON_CHARS, MAX_SPEC_BYTES,
};
use palisade_policy::label::{LabelKey, LabelValue};
use palisade_policy::{Exception, Name, PlanName, ResourceType, RuleKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::document::{check_header, error, json_value, DocumentError};

pub const KIND: &str = "BoundaryException";

/// A whole exception document, as kept in git and sent to `POST /v1/apply`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExceptionDocument {
    pub api_version: String,
    pub kind: String,
    pub metadata: crate::document::PolicyMetadata,
    pub spec: ExceptionSpec,
}

/// The `spec` of an exception: also the body of `PUT /v1/boundaries/{b}/exceptions/{e}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExceptionSpec {
    pub policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<String>>,
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub object_match: Option<MatchDoc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plans: Option<Vec<String>>,
    pub expires_at: String,
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MatchDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<String>>,
}

/// The time every stored timestamp uses (RFC 3339 UTC, milliseconds), so that times compare
/// as text.
pub fn stored_time(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl ExceptionDocument {
    /// Parses a JSON document; errors carry the pointer of the field.
    pub fn from_json(bytes: &[u8]) -> Result<Self, DocumentError> {
        crate::json::typed(&json_value(bytes)?)
    }

    /// Validates the document at `now` into its boundary and exception.
    pub fn validate(
        &self,
        now: DateTime<Utc>,
        max_days: u32,
    ) -> Result<(Name, Exception), DocumentError> {
        self.validate_in(Some((now, max_days)))
    }

    /// Validates everything but the time of `expiresAt` (it may have passed): what an applied
    /// document that ended is, to be compared with the one stored.
    pub fn validate_ended(&self) -> Result<(Name, Exception), DocumentError> {
        self.validate_in(None)
    }

    fn validate_in(
        &self,
        window: Option<(DateTime<Utc>, u32)>,
    ) -> Result<(Name, Exception), DocumentError> {
        let (name, boundary) = check_header(
            [&self.api_version, &self.kind],
            KIND,
            [&self.metadata.name, &self.metadata.boundary],
        )?;
        let size = serde_json::to_vec(&self.spec).map_or(usize::MAX, |json| json.len());
        if size > MAX_SPEC_BYTES {
            return Err(error(
                "/spec",
                format!("must be at most {MAX_SPEC_BYTES} bytes (16 KiB) as JSON, got {size}"),
            ));
        }
        let exception = self.spec.validate_at("/spec", name, window)?;
        Ok((boundary, exception))
    }
}

impl ExceptionSpec {
    /// Parses a JSON spec (the body of a `PUT`); errors carry the pointer of the field.
    pub fn from_json(bytes: &[u8]) -> Result<Self, DocumentError> {
        Self::check_size(bytes.len())?;
        crate::json::typed(&json_value(bytes)?)
    }

    /// Refuses a spec body of more than [`MAX_SPEC_BYTES`], before anything parses it.
    pub fn check_size(bytes: usize) -> Result<(), DocumentError> {
        if bytes > MAX_SPEC_BYTES {
            return Err(error(
                "",
                format!(
                    "must be at most {MAX_SPEC_BYTES} bytes (16 KiB) for an exception's spec, \
                     got {bytes}"
                ),
            ));
        }
        Ok(())
    }

    /// The first list of the spec with more than [`MAX_LIST_ENTRIES`] entries, as the error
    /// naming it (pointers under `base`).
    fn check_lists(&self, base: &str) -> Result<(), DocumentError> {
        let object_match = self.object_match.as_ref();
        let lists = [
            ("/rules", self.rules.as_ref().map(Vec::len)),
            (
                "/match/clusters",
                object_match.and_then(|m| m.clusters.as_ref().map(Vec::len)),
            ),
            (
                "/match/namespaces",
                object_match.and_then(|m| m.namespaces.as_ref().map(Vec::len)),
            ),
            (
                "/match/labels",
                object_match.and_then(|m| m.labels.as_ref().map(BTreeMap::len)),
            ),
            (
                "/match/images",
                object_match.and_then(|m| m.images.as_ref().map(Vec::len)),
            ),
            ("/resources", self.resources.as_ref().map(Vec::len)),
            ("/plans", self.plans.as_ref().map(Vec::len)),
        ];
        for (field, len) in lists {
            if let Some(len) = len.filter(|&n| n > MAX_LIST_ENTRIES) {
                return Err(error(
                    format!("{base}{field}"),
                    format!("must have at most {MAX_LIST_ENTRIES} entries, got {len}"),
                ));
            }
        }
        Ok(())
    }

    /// Validates the spec of exception `name` at `now`: `expiresAt` must be after `now` and
    /// at most `max_days` ahead. Pointers are relative to the spec, under `base`.
    pub fn validate(
        &self,
        name: Name,
        now: DateTime<Utc>,
        max_days: u32,
    ) -> Result<Exception, DocumentError> {
        self.validate_at("", name, Some((now, max_days)))
    }

    /// A stored spec, as validated when it was saved: its time is not judged again (it may
    /// have ended since).
    pub fn decode_stored(&self, name: Name) -> Result<Exception, DocumentError> {
        self.validate_at("", name, None)
    }

    /// `window`: the time of the save and the most days ahead `expiresAt` may be.
    pub(crate) fn validate_at(
        &self,
        base: &str,
        name: Name,
        window: Option<(DateTime<Utc>, u32)>,
    ) -> Result<Exception, DocumentError> {
        let at = |field: &str| format!("{base}{field}");
        self.check_lists(base)?;
        let policy = Name::parse(&self.policy).map_err(|e| error(at("/policy"), e))?;
        let mut rules = std::collections::BTreeSet::new();
        if let Some(list) = &self.rules {
            if list.is_empty() {
                return Err(error(
                    at("/rules"),
                    "must name at least one rule kind, or be left out for every rule",
                ));
            }
            for (i, text) in list.iter().enumerate() {
                let kind = [
                    RuleKind::AllowedComputePlans,
                    RuleKind::RequiredLabels,
                    RuleKind::AllowedRegistries,
                    RuleKind::DisallowLatestTag,
                ]
                .into_iter()
                .find(|k| k.as_str() == text)
                .ok_or_else(|| {
                    error(
                        at(&format!("/rules/{i}")),
                        format!(
                            "unknown rule kind '{text}'; expected AllowedComputePlans, \
                             RequiredLabels, AllowedRegistries or DisallowLatestTag"
                        ),
                    )
                })?;
                rules.insert(kind);
            }
        }
        let object_match = match &self.object_match {
            None => None,
            Some(doc) => Some(doc.validate(&at("/match"))?),
        };
        let mut resources = Vec::new();
        for (i, text) in self.resources.iter().flatten().enumerate() {
            let pointer = at(&format!("/resources/{i}"));
            let (ty, resource) = text.split_once('/').ok_or_else(|| {
                error(
                    pointer.clone(),
                    format!("must be <type>/<name>, e.g. app/reports, got '{text}'"),
                )
            })?;
            let resource_type = ResourceType::parse(ty).map_err(|e| error(pointer.clone(), e))?;
            if !resource_type.is_plan_checked() {
                return Err(error(
                    pointer,
                    format!(
                        "the plans of type '{resource_type}' are not checked; nothing to except"
                    ),
                ));
            }
            let name = Name::parse(resource).map_err(|e| error(pointer, e))?;
            resources.push(ResourceRef {
                resource_type,
                name,
            });
        }
        let mut plans = Vec::new();
        for (i, text) in self.plans.iter().flatten().enumerate() {
            plans.push(PlanName::parse(text).map_err(|e| error(at(&format!("/plans/{i}")), e))?);
        }
        match (resources.is_empty(), plans.is_empty()) {
            (false, true) => {
                return Err(error(
                    at("/plans"),
                    "is required with resources: the plans those resources may use",
                ))
            }
            (true, false) => {
                return Err(error(
                    at("/resources"),
                    "is required with plans: the resources (<type>/<name>) that may use them",
                ))
            }
            (true, true) if object_match.is_none() => {
                return Err(error(
                    at("/match"),
                    "an exception needs match (admission rules) or resources and plans \
                     (compute plans), or both",
                ))
            }
            _ => {}
        }
        if !rules.is_empty() {
            if object_match.is_none() && rules.iter().any(|k| k.is_admission()) {
                return Err(error(
                    at("/match"),
                    "is required when rules names an admission rule",
                ));
            }
            if !resources.is_empty() && !rules.contains(&RuleKind::AllowedComputePlans) {
                return Err(error(
                    at("/rules"),
                    "must name AllowedComputePlans when resources and plans are given",
                ));
            }
        }
        let expires = DateTime::parse_from_rfc3339(&self.expires_at)
            .map_err(|e| {
                error(
                    at("/expiresAt"),
                    format!(
                        "must be an RFC 3339 time such as 2027-01-31T00:00:00Z, got '{}': {e}",
                        self.expires_at
                    ),
                )
            })?
            .with_timezone(&Utc);
        if let Some((now, max_days)) = window {
            check_window(expires, &self.expires_at, &at("/expiresAt"), now, max_days)?;
        }
        let reason = self.reason.trim();
        if let Some((position, found)) = reason.chars().enumerate().find(|(_, c)| c.is_control()) {
            return Err(error(
                at("/reason"),
                format!(
                    "must contain no control characters, found U+{:04X} at character {}",
                    u32::from(found),
                    position + 1
                ),
            ));
        }
        let chars = reason.chars().count();
        if chars == 0 || chars > MAX_REASON_CHARS {
            return Err(error(
                at("/reason"),
                format!("must be 1 to {MAX_REASON_CHARS} characters, got {chars}"),
            ));
        }
        Ok(Exception {
            name,
            policy,
            rules,
            object_match,
            resources,
            plans,
            expires_at: stored_time(expires),
            reason: reason.to_owned(),
        })
    }
}

fn check_window(
    expires: DateTime<Utc>,
    given: &str,
    pointer: &str,
    now: DateTime<Utc>,
    max_days: u32,
) -> Result<(), DocumentError> {
    if expires <= now {
        return Err(error(
            pointer,
            format!("must be in the future, got '{given}'"),
        ));
    }
    if expires > now + chrono::Duration::days(i64::from(max_days)) {
        return Err(error(
            pointer,
            format!(
                "must be at most {max_days} days ahead (serve --max-exception-days), got '{given}'"
            ),
        ));
    }
    Ok(())
}

impl MatchDoc {
    fn validate(&self, base: &str) -> Result<ObjectMatch, DocumentError> {
        let names = |field: &str, list: &Option<Vec<String>>| {
            list.iter()
                .flatten()
                .enumerate()
                .map(|(i, text)| {
                    Name::parse(text).map_err(|e| error(format!("{base}/{field}/{i}"), e))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let clusters = names("clusters", &self.clusters)?;
        let namespaces = names("namespaces", &self.namespaces)?;
        let mut labels = Vec::new();
        for (key, value) in self.labels.iter().flatten() {
            let pointer = format!("{base}/labels/{}", crate::pointer::escape(key));
            let key = LabelKey::parse(key).map_err(|e| error(pointer.clone(), e))?;
            let value = LabelValue::parse(value).map_err(|e| error(pointer, e))?;
            labels.push((key, value));
        }
        let mut images = Vec::new();
        for (i, image) in self.images.iter().flatten().enumerate() {
            palisade_policy::ImageRef::parse(image)
                .map_err(|e| error(format!("{base}/images/{i}"), e))?;
            images.push(image.clone());
        }
        if namespaces.is_empty()
            && self.labels.as_ref().is_none_or(BTreeMap::is_empty)
            && self.images.as_ref().is_none_or(Vec::is_empty)
        {
            return Err(error(
                base,
                "must name namespaces, labels or images: an exception lets known objects past, \
                 not the whole boundary",
            ));
        }
        Ok(ObjectMatch {
            clusters,
            namespaces,
            labels,
            images,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2027-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn validate(body: serde_json::Value) -> Result<Exception, String> {
        let spec =
            ExceptionSpec::from_json(body.to_string().as_bytes()).map_err(|e| e.to_string())?;
        spec.validate(Name::parse("legacy").unwrap(), now(), 90)
            .map_err(|e| e.to_string())
    }

    /// Every refusal names its field (case, body, the error).
    #[test]
    fn refusals_name_the_field() {
        use serde_json::json;
        let ok = |extra: serde_json::Value| {
            let mut body = json!({"policy": "size", "resources": ["app/reports"], "plans": ["large"],
                "expiresAt": "2027-01-31T00:00:00Z", "reason": "OPS-1234"});
            for (k, v) in extra.as_object().unwrap() {
                if v.is_null() {
                    body.as_object_mut().unwrap().remove(k);
                } else {
                    body[k] = v.clone();
                }
            }
            body
        };
        let cases = [
            (
                "no policy",
                ok(json!({"policy": null})),
                "/policy: is required",
            ),
            ("bad policy", ok(json!({"policy": "Size"})), "/policy: "),
            (
                "resources without plans",
                ok(json!({"plans": null})),
                "/plans: is required with resources",
            ),
            (
                "plans without resources",
                ok(json!({"resources": null})),
                "/resources: is required with plans",
            ),
            (
                "nothing excepted",
                ok(json!({"plans": null, "resources": null})),
                "/match: an exception needs match",
            ),
            (
                "bad resource",
                ok(json!({"resources": ["reports"]})),
                "/resources/0: must be <type>/<name>",
            ),
            (
                "unknown type",
                ok(json!({"resources": ["vm/reports"]})),
                "/resources/0: ",
            ),
            (
                "unchecked type",
                ok(json!({"resources": ["function/f"]})),
                "/resources/0: the plans of type 'function' are not checked",
            ),
            (
                "unknown rule",
                ok(json!({"rules": ["NoLatest"]})),
                "/rules/0: unknown rule kind 'NoLatest'",
            ),
            (
                "empty rules",
                ok(json!({"rules": []})),
                "/rules: must name at least one rule kind",
            ),
            (
                "admission rule without match",
                ok(json!({"rules": ["AllowedComputePlans", "RequiredLabels"]})),
                "/match: is required when rules names an admission rule",
            ),
            (
                "not a time",
                ok(json!({"expiresAt": "tomorrow"})),
                "/expiresAt: must be an RFC 3339 time",
            ),
            (
                "past",
                ok(json!({"expiresAt": "2026-12-31T00:00:00Z"})),
                "/expiresAt: must be in the future",
            ),
            (
                "too far",
                ok(json!({"expiresAt": "2027-04-02T00:00:00Z"})),
                "/expiresAt: must be at most 90 days ahead",
            ),
            (
                "empty reason",
                ok(json!({"reason": "  "})),
                "/reason: must be 1 to 500 characters, got 0",
            ),
            (
                "long reason",
                ok(json!({"reason": "é".repeat(501)})),
                "/reason: must be 1 to 500 characters, got 501",
            ),
            ("unknown field", ok(json!({"expires": "x"})), "/expires"),
            (
                "bad label",
                ok(json!({"match": {"labels": {"a b": "x"}}})),
                "/match/labels/a b: ",
            ),
        ];
        for (case, body, expected) in cases {
            let got = validate(body).expect_err(case);
            assert!(got.contains(expected), "{case}: {got}");
        }
    }

    /// SPEC 7 v3.2: each list holds at most 64 entries; the 65th is a 400 naming the list
    /// in the words of the policy lists' bounds.
    #[test]
    fn every_list_holds_at_most_64_entries() {
        use serde_json::json;
        let many = |n: usize, f: &dyn Fn(usize) -> String| (0..n).map(f).collect::<Vec<_>>();
        let base = || {
            json!({"policy": "size", "match": {"namespaces": ["web"]},
                "expiresAt": "2027-01-31T00:00:00Z", "reason": "OPS-1234"})
        };
        let images = |n| many(n, &|i| format!("ghcr.io/acme/app:{i}"));
        let labels = |n: usize| {
            (0..n)
                .map(|i| (format!("k{i}"), json!("v")))
                .collect::<serde_json::Map<_, _>>()
        };
        let cases: Vec<(&str, serde_json::Value, serde_json::Value)> = vec![
            (
                "/match/clusters",
                json!({"namespaces": ["web"], "clusters": many(65, &|i| format!("c{i}"))}),
                json!(null),
            ),
            (
                "/match/namespaces",
                json!({"namespaces": many(65, &|i| format!("n{i}"))}),
                json!(null),
            ),
            ("/match/labels", json!({"labels": labels(65)}), json!(null)),
            ("/match/images", json!({"images": images(65)}), json!(null)),
            (
                "/rules",
                json!({"namespaces": ["web"]}),
                json!({"rules": many(65, &|_| "RequiredLabels".to_owned())}),
            ),
            (
                "/resources",
                json!({"namespaces": ["web"]}),
                json!({"resources": many(65, &|i| format!("app/r{i}")), "plans": ["large"]}),
            ),
            (
                "/plans",
                json!({"namespaces": ["web"]}),
                json!({"resources": ["app/r"], "plans": many(65, &|i| format!("p{i}"))}),
            ),
        ];
        for (field, object_match, extra) in cases {
            let mut body = base();
            body["match"] = object_match.clone();
            for (k, v) in extra.as_object().into_iter().flatten() {
                body[k] = v.clone();
            }
            assert_eq!(
                validate(body.clone()),
                Err(format!("{field}: must have at most 64 entries, got 65")),
                "{field}"
            );
        }
        // 64 of each is fine.
        let mut body = base();
        body["match"] = json!({"namespaces": many(64, &|i| format!("n{i}")),
            "images": images(64), "labels": labels(64)});
        assert!(validate(body).is_ok());
    }

    #[test]
    fn a_spec_holds_at_most_16_kib() {
        let big = serde_json::json!({"policy": "size", "match": {"namespaces": ["web"]},
            "expiresAt": "2027-01-31T00:00:00Z", "reason": "x".repeat(17 * 1024)})
        .to_string();
        assert_eq!(
            ExceptionSpec::from_json(big.as_bytes()).map_err(|e| e.to_string()),
            Err(format!(
                "the body must be at most 16384 bytes (16 KiB) for an exception's spec, got {}",
                big.len()
            ))
        );
        let document = format!(
            "apiVersion: palisade.dev/v1\nkind: BoundaryException\n\
             metadata: {{name: legacy, boundary: shop}}\nspec: {big}\n"
        );
        let document: ExceptionDocument = serde_yaml_ng::from_str(&document).unwrap();
        let error = document.validate(now(), 90).unwrap_err().to_string();
        assert!(
            error.starts_with("/spec: must be at most 16384 bytes (16 KiB) as JSON, got "),
            "{error}"
        );
    }

    #[test]
    fn a_reason_holds_no_control_characters() {
        let body = serde_json::json!({"policy": "size", "match": {"namespaces": ["web"]},
            "expiresAt": "2027-01-31T00:00:00Z", "reason": "OPS-1234\u{1b}[2J ok"});
        assert_eq!(
            validate(body),
            Err("/reason: must contain no control characters, found U+001B at character 9".into())
        );
    }

    #[test]
    fn a_valid_exception_keeps_its_time_in_the_stored_form() {
        let exception = validate(
            serde_json::json!({"policy": "size", "resources": ["app/reports"],
            "plans": ["large"], "expiresAt": "2027-01-31T01:00:00+01:00", "reason": " OPS-1234 "}),
        )
        .unwrap();
        assert_eq!(exception.expires_at, "2027-01-31T00:00:00.000Z");
        assert_eq!(exception.reason, "OPS-1234");
        assert_eq!(exception.resources[0].to_string(), "app/reports");
        assert!(exception.rules.is_empty());
    }
}
