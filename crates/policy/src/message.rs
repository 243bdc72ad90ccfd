//! Every admission denial message, and the post-processing Kubernetes applies to them.
//!
//! The CEL rendered by `palisade-vap` builds the same texts; the corpus proves they agree.

use crate::name::Name;
use crate::policy::RuleKind;

/// Kubernetes replaces a message longer than this many bytes.
pub const MAX_MESSAGE_BYTES: usize = 5120;

/// `Policy 'p' (RequiredLabels) requires the label team.`
pub fn label_missing(policy: &Name, key: &str) -> String {
    format!("Policy '{policy}' (RequiredLabels) requires the label {key}.")
}

/// `Policy 'p' (RequiredLabels) requires label team=web, found api` (no final period).
pub fn label_wrong(policy: &Name, key: &str, want: &str, found: Option<&str>) -> String {
    let found = match found {
        None => "<unset>",
        Some("") => "\"\"",
        Some(value) => value,
    };
    format!("Policy '{policy}' (RequiredLabels) requires label {key}={want}, found {found}")
}

/// `Policy 'p' (AllowedRegistries) denied image nginx:1.27: it is not under a, b.`
pub fn image_not_under(policy: &Name, image: &str, prefixes: &[&str]) -> String {
    format!(
        "Policy '{policy}' (AllowedRegistries) denied image {image}: it is not under {}.",
        prefixes.join(", ")
    )
}

/// `Policy 'p' (DisallowLatestTag) denied image nginx:latest: it is tagged latest or carries no tag.`
pub fn image_latest(policy: &Name, image: &str) -> String {
    format!("Policy '{policy}' (DisallowLatestTag) denied image {image}: it is tagged latest or carries no tag.")
}

/// The static message of an admission rule, used when the dynamic one cannot be shown.
pub fn static_message(policy: &Name, kind: RuleKind) -> String {
    match kind {
        RuleKind::RequiredLabels => {
            format!("Policy '{policy}' (RequiredLabels) requires labels that are missing or wrong.")
        }
        RuleKind::AllowedRegistries => format!(
            "Policy '{policy}' (AllowedRegistries) denied an image that is not under an allowed registry."
        ),
        RuleKind::DisallowLatestTag => format!(
            "Policy '{policy}' (DisallowLatestTag) denied an image that is tagged latest or carries no tag."
        ),
        RuleKind::AllowedComputePlans => {
            format!("Policy '{policy}' (AllowedComputePlans) disallows the compute plan.")
        }
    }
}

/// What a user sees of a raw message: a message with a line feed or over 5,120 bytes becomes
/// the rule's static message; otherwise leading and trailing white space is trimmed.
///
/// The rendered CEL makes the same replacement before Kubernetes sees the message, so
/// Kubernetes' own check (on the trimmed text) never fires and both paths agree.
pub fn finalize(raw: String, policy: &Name, kind: RuleKind) -> String {
    if raw.contains('\n') || raw.len() > MAX_MESSAGE_BYTES {
        static_message(policy, kind)
    } else {
        let trimmed = raw.trim();
        if trimmed.len() == raw.len() {
            raw
        } else {
            trimmed.to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    #[test]
    fn the_four_forms() {
        assert_eq!(
            label_missing(&name("owner-label"), "team"),
            "Policy 'owner-label' (RequiredLabels) requires the label team."
        );
        assert_eq!(
            label_wrong(&name("owner-label"), "team", "web", Some("api")),
            "Policy 'owner-label' (RequiredLabels) requires label team=web, found api"
        );
        assert_eq!(
            label_wrong(&name("owner-label"), "team", "web", None),
            "Policy 'owner-label' (RequiredLabels) requires label team=web, found <unset>"
        );
        assert_eq!(
            label_wrong(&name("owner-label"), "team", "web", Some("")),
            "Policy 'owner-label' (RequiredLabels) requires label team=web, found \"\""
        );
        assert_eq!(
            image_not_under(&name("trusted"), "nginx:1.27", &["ghcr.io/acme", "docker.io/library"]),
            "Policy 'trusted' (AllowedRegistries) denied image nginx:1.27: it is not under ghcr.io/acme, docker.io/library."
        );
        assert_eq!(
            image_latest(&name("no-latest"), "nginx:latest"),
            "Policy 'no-latest' (DisallowLatestTag) denied image nginx:latest: it is tagged latest or carries no tag."
        );
    }

    #[test]
    fn long_or_multi_line_messages_become_static() {
        let p = name("p");
        let long = "x".repeat(MAX_MESSAGE_BYTES + 1);
        assert_eq!(
            finalize(long, &p, RuleKind::AllowedRegistries),
            "Policy 'p' (AllowedRegistries) denied an image that is not under an allowed registry."
        );
        assert_eq!(
            finalize("a\nb".into(), &p, RuleKind::DisallowLatestTag),
            "Policy 'p' (DisallowLatestTag) denied an image that is tagged latest or carries no tag."
        );
        assert_eq!(
            finalize("a\rb ".into(), &p, RuleKind::RequiredLabels),
            "a\rb"
        );
        let exact = "y".repeat(MAX_MESSAGE_BYTES);
        assert_eq!(finalize(exact.clone(), &p, RuleKind::RequiredLabels), exact);
    }
}
