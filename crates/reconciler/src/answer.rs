//! What an API server answered to a (dry-run) write: admitted or refused, with its message and
//! the `Warning` headers that carry audit-mode results.

/// The answer to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionAnswer {
    /// The HTTP status code (201 for an admitted create, 422 for a policy denial).
    pub code: u16,
    /// `Status.message` of a refusal; `None` when admitted.
    pub message: Option<String>,
    /// `Status.reason` of a refusal (`Invalid` for a policy denial).
    pub reason: Option<String>,
    /// The texts of the `Warning` headers, in order.
    pub warnings: Vec<String>,
}

impl AdmissionAnswer {
    pub fn admitted(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// The text after `denied request: ` when a ValidatingAdmissionPolicy denied the request.
    pub fn denial_message(&self) -> Option<&str> {
        let message = self.message.as_deref()?;
        message
            .split_once(DENIED_REQUEST)
            .map(|(_, rest)| rest)
            .filter(|_| !self.admitted())
    }

    /// The name of the ValidatingAdmissionPolicy that denied the request.
    pub fn denying_policy(&self) -> Option<&str> {
        let message = self.message.as_deref()?;
        let (_, rest) = message.split_once("ValidatingAdmissionPolicy '")?;
        rest.split_once('\'').map(|(name, _)| name)
    }

    /// The message a `Warn` action of policy `vap` (binding of the same name) would add.
    pub fn has_policy_warning(&self, vap: &str, message: &str) -> bool {
        self.has_warning(vap, vap, message)
    }

    /// Whether the answer carries the `Warn` text of `vap` with `binding` and `message`.
    pub fn has_warning(&self, vap: &str, binding: &str, message: &str) -> bool {
        let wanted = policy_warning(vap, binding, message);
        self.warnings.contains(&wanted)
    }
}

const DENIED_REQUEST: &str = " denied request: ";

/// Kubernetes' text of a `Warn` validation action.
pub fn policy_warning(vap: &str, binding: &str, message: &str) -> String {
    format!(
        "Validation failed for ValidatingAdmissionPolicy '{vap}' with binding '{binding}': {message}"
    )
}

/// The texts of one `Warning` header value (RFC 7234 5.5: `299 - "text"`, possibly several
/// separated by commas, each possibly followed by a quoted date). Malformed parts are skipped.
pub fn parse_warning_header(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = value;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return out;
        }
        // warn-code SP warn-agent SP warn-text
        let Some((code, after_code)) = rest.split_once(' ') else {
            return out;
        };
        let Some((_agent, after_agent)) = after_code.split_once(' ') else {
            return out;
        };
        if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
            return out;
        }
        let Some((text, after_text)) = quoted(after_agent) else {
            return out;
        };
        out.push(text);
        rest = after_text.trim_start();
        // An optional warn-date.
        if rest.starts_with('"') {
            match quoted(rest) {
                Some((_, after_date)) => rest = after_date,
                None => return out,
            }
        }
    }
}

/// A quoted-string at the start of `text`: its unescaped content and what follows it.
fn quoted(text: &str) -> Option<(String, &str)> {
    let body = text.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((index, c)) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?.1),
            '"' => return Some((out, &body[index + 1..])),
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubernetes_warnings() {
        assert_eq!(
            parse_warning_header(
                r#"299 - "Validation failed: Policy 'w' requires label a=b, found \"\"""#
            ),
            vec![r#"Validation failed: Policy 'w' requires label a=b, found """#.to_owned()]
        );
        assert_eq!(
            parse_warning_header(r#"299 - "one", 299 agent "two" "Sat, 01 Jan 2000 00:00:00 GMT""#),
            vec!["one".to_owned(), "two".to_owned()]
        );
        assert!(parse_warning_header("garbage").is_empty());
    }

    #[test]
    fn reads_the_denial_message() {
        let answer = AdmissionAnswer {
            code: 422,
            message: Some("pods \"web\" is forbidden: ValidatingAdmissionPolicy 'p.shop.palisade.dev' with binding 'p.shop.palisade.dev' denied request: Policy 'p' (DisallowLatestTag) denied image nginx: it is tagged latest or carries no tag.".to_owned()),
            reason: Some("Invalid".to_owned()),
            warnings: vec![],
        };
        assert_eq!(answer.denying_policy(), Some("p.shop.palisade.dev"));
        assert_eq!(
            answer.denial_message(),
            Some("Policy 'p' (DisallowLatestTag) denied image nginx: it is tagged latest or carries no tag.")
        );
    }
}
