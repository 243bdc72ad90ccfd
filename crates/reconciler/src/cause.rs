//! Why a request to a server failed, in words a person can act on: connection refused, name
//! not resolved, timed out, TLS verification failed, or the HTTP status the server answered
//! with its message. Never a library's wrapper text (`ServiceError: client error (Connect)`,
//! `ApiError: ... (Status {...})`).

use std::error::Error;
use std::io::ErrorKind;

/// Why `error` (any error, e.g. kube's or reqwest's) failed, found by walking its
/// [`Error::source`] chain down to the I/O, DNS or TLS error beneath; the innermost message
/// when none is recognised.
pub fn transport(error: &(dyn Error + 'static)) -> String {
    let mut chain: Vec<&(dyn Error + 'static)> = vec![error];
    let mut current = error;
    while let Some(next) = current.source() {
        chain.push(next);
        current = next;
    }
    // The deepest recognised cause wins: it is the most specific.
    for cause in chain.iter().rev() {
        if let Some(words) = recognise(*cause) {
            return words;
        }
    }
    chain
        .last()
        .map(|e| e.to_string())
        .unwrap_or_else(|| error.to_string())
}

/// Words for one error of a chain, when it is one palisade knows.
fn recognise(error: &(dyn Error + 'static)) -> Option<String> {
    let text = error.to_string();
    if let Some(tls) = tls_words(&text) {
        return Some(tls);
    }
    if text.starts_with("dns error") || text.contains("failed to lookup address") {
        return Some("name not resolved".to_owned());
    }
    if let Some(io) = error.downcast_ref::<std::io::Error>() {
        let words = match io.kind() {
            ErrorKind::ConnectionRefused => "connection refused",
            ErrorKind::ConnectionReset => "connection reset by the server",
            ErrorKind::ConnectionAborted => "connection aborted",
            ErrorKind::TimedOut => "timed out",
            ErrorKind::NotConnected | ErrorKind::BrokenPipe | ErrorKind::UnexpectedEof => {
                "the connection was closed"
            }
            ErrorKind::HostUnreachable => "host unreachable",
            ErrorKind::NetworkUnreachable => "network unreachable",
            ErrorKind::AddrNotAvailable => "address not available",
            _ => return None,
        };
        return Some(words.to_owned());
    }
    if text == "deadline has elapsed" || text.ends_with("timed out") {
        return Some("timed out".to_owned());
    }
    None
}

/// rustls' errors, in words (they reach us as text inside an `io::Error`).
fn tls_words(text: &str) -> Option<String> {
    let detail = if let Some(reason) = text.strip_prefix("invalid peer certificate: ") {
        match reason {
            "UnknownIssuer" => {
                "the server's certificate is not signed by a trusted certificate authority"
                    .to_owned()
            }
            "Expired" => "the server's certificate has expired".to_owned(),
            "NotValidYet" => "the server's certificate is not valid yet".to_owned(),
            "Revoked" => "the server's certificate is revoked".to_owned(),
            "BadSignature" => "the server's certificate has a bad signature".to_owned(),
            other if other.starts_with("NotValidForName") => {
                "the server's certificate is not valid for its address".to_owned()
            }
            // webpki's words for a self-signed certificate marked CA:TRUE (what `openssl req
            // -x509` makes by default) that is also the trusted CA.
            other if other.contains("CaUsedAsEndEntity") => {
                "the server's certificate is a CA certificate (CA:TRUE), which TLS does not \
                 accept as a server's: sign the server's certificate with a CA and trust that CA"
                    .to_owned()
            }
            other => format!("the server's certificate is not accepted ({other})"),
        }
    } else if let Some(alert) = text.strip_prefix("received fatal alert: ") {
        format!("the server ended the TLS handshake ({alert}; is the client certificate accepted?)")
    } else if text.starts_with("peer is incompatible")
        || text.starts_with("peer misbehaved")
        || text.starts_with("invalid certificate")
    {
        text.to_owned()
    } else if text.contains("InvalidContentType") || text.contains("corrupt message") {
        "the server does not speak TLS".to_owned()
    } else {
        return None;
    };
    Some(format!("TLS verification failed: {detail}"))
}

/// An HTTP status with its reason phrase, e.g. `404 Not Found`.
pub fn http_status(code: u16) -> String {
    match http::StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason())
    {
        Some(reason) => format!("{code} {reason}"),
        None => code.to_string(),
    }
}

/// A request that did not reach the API server, and why (from [`transport`]).
pub fn unreachable(cause: &str) -> String {
    format!("cannot reach the API server: {cause}")
}

/// A kube-rs error in words: `the API server answered 404 Not Found: <message>`, or
/// `cannot reach the API server: connection refused` (name not resolved, timed out, TLS
/// verification failed: ...).
pub fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let code = if status.code == 0 {
                "an error".to_owned()
            } else {
                http_status(status.code)
            };
            let message = status.message.trim();
            if message.is_empty() {
                format!("the API server answered {code}")
            } else {
                format!("the API server answered {code}: {message}")
            }
        }
        kube::Error::SerdeError(e) => {
            format!("the API server's answer cannot be read: {e}")
        }
        kube::Error::FromUtf8(_) | kube::Error::LinesCodecMaxLineLengthExceeded => {
            "the API server's answer cannot be read".to_owned()
        }
        kube::Error::BuildRequest(e) => format!("the request cannot be built: {e}"),
        kube::Error::HttpError(e) => format!("the request cannot be built: {e}"),
        other => unreachable(&transport(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    /// An error wrapping another, as hyper's and tower's do.
    #[derive(Debug)]
    struct Wrap(&'static str, Box<dyn Error + Send + Sync>);

    impl fmt::Display for Wrap {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Wrap {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(self.1.as_ref())
        }
    }

    /// kube's error for a failed connection, `ServiceError: client error (Connect)` on top.
    fn service(inner: Box<dyn Error + Send + Sync>) -> kube::Error {
        kube::Error::Service(Box::new(Wrap("client error (Connect)", inner)))
    }

    fn io(kind: ErrorKind, text: &str) -> Box<dyn Error + Send + Sync> {
        Box::new(std::io::Error::new(kind, text.to_owned()))
    }

    #[test]
    fn connection_failures_are_named() {
        let cases: Vec<(Box<dyn Error + Send + Sync>, &str)> = vec![
            (
                io(ErrorKind::ConnectionRefused, "Connection refused (os error 111)"),
                "cannot reach the API server: connection refused",
            ),
            (
                io(ErrorKind::TimedOut, "connection timed out"),
                "cannot reach the API server: timed out",
            ),
            (
                Box::new(Wrap(
                    "dns error",
                    io(
                        ErrorKind::Other,
                        "failed to lookup address information: Name or service not known",
                    ),
                )),
                "cannot reach the API server: name not resolved",
            ),
            (
                io(ErrorKind::InvalidData, "invalid peer certificate: UnknownIssuer"),
                "cannot reach the API server: TLS verification failed: the server's certificate is not signed by a trusted certificate authority",
            ),
            (
                io(
                    ErrorKind::InvalidData,
                    "invalid peer certificate: NotValidForName: expected 'a', got 'b'",
                ),
                "cannot reach the API server: TLS verification failed: the server's certificate is not valid for its address",
            ),
            (
                io(
                    ErrorKind::InvalidData,
                    "invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))",
                ),
                "cannot reach the API server: TLS verification failed: the server's certificate is a CA certificate (CA:TRUE), which TLS does not accept as a server's: sign the server's certificate with a CA and trust that CA",
            ),
            (
                io(ErrorKind::InvalidData, "invalid peer certificate: Expired"),
                "cannot reach the API server: TLS verification failed: the server's certificate has expired",
            ),
            (
                io(ErrorKind::InvalidData, "received fatal alert: CertificateRequired"),
                "cannot reach the API server: TLS verification failed: the server ended the TLS handshake (CertificateRequired; is the client certificate accepted?)",
            ),
            (
                io(ErrorKind::ConnectionReset, "Connection reset by peer (os error 104)"),
                "cannot reach the API server: connection reset by the server",
            ),
            (
                Box::new(Wrap("something odd", io(ErrorKind::Other, "the innermost text"))),
                "cannot reach the API server: the innermost text",
            ),
        ];
        for (inner, expected) in cases {
            let error = service(inner);
            assert_eq!(describe(&error), expected, "{error}");
        }
    }

    #[test]
    fn a_timeout_of_the_whole_request_is_named() {
        let error = kube::Error::Service(Box::new(Wrap(
            "request failed",
            Box::new(Wrap("deadline has elapsed", io(ErrorKind::Other, "x"))),
        )));
        // The recognised cause nearest the bottom wins; "x" is not one.
        assert_eq!(describe(&error), "cannot reach the API server: timed out");
    }

    #[test]
    fn an_http_status_is_its_code_reason_and_message() {
        let status = |code: u16, message: &str| {
            let mut s = kube::core::Status::failure(message, "NotFound");
            s.code = code;
            kube::Error::Api(Box::new(s))
        };
        assert_eq!(
            describe(&status(404, "the server could not find the requested resource")),
            "the API server answered 404 Not Found: the server could not find the requested resource"
        );
        assert_eq!(
            describe(&status(403, "")),
            "the API server answered 403 Forbidden"
        );
        assert_eq!(
            describe(&status(0, "odd")),
            "the API server answered an error: odd"
        );
        assert_eq!(http_status(599), "599");
    }
}
