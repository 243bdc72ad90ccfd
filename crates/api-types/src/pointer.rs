//! JSON Pointers (RFC 6901) for naming fields in error messages.

/// Escapes one reference token.
pub fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Turns the path `serde_path_to_error` recorded into a JSON Pointer under `base`.
pub fn from_path(base: &str, path: &serde_path_to_error::Path) -> String {
    let mut pointer = base.to_owned();
    for segment in path.iter() {
        match segment {
            serde_path_to_error::Segment::Seq { index } => {
                pointer.push('/');
                pointer.push_str(&index.to_string());
            }
            serde_path_to_error::Segment::Map { key } => {
                pointer.push('/');
                pointer.push_str(&escape(key));
            }
            serde_path_to_error::Segment::Enum { variant } => {
                pointer.push('/');
                pointer.push_str(&escape(variant));
            }
            serde_path_to_error::Segment::Unknown => {}
        }
    }
    pointer
}
