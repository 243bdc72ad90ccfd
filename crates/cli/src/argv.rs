//! The client commands' global flags (`--url`, `--token`, `--ca-file`, `--context`, `-o`)
//! may come before the subcommand, as kubectl takes them (`palisade -o json get boundaries`):
//! they are moved after it before clap reads the command line, where each subcommand defines
//! them.

use std::ffi::OsString;

/// Flags that take a value, by every spelling.
const WITH_VALUE: [&str; 6] = [
    "--url",
    "--token",
    "--ca-file",
    "--context",
    "--output",
    "-o",
];

/// Whether `arg` is one of the flags, and whether its value is the next argument.
fn flag(arg: &str) -> Option<bool> {
    if WITH_VALUE.contains(&arg) {
        return Some(true);
    }
    let joined = WITH_VALUE
        .iter()
        .filter(|f| f.starts_with("--"))
        .any(|f| arg.starts_with(&format!("{f}=")));
    // `-ojson`
    let short = arg.len() > 2 && arg.starts_with("-o") && !arg.starts_with("--");
    (joined || short).then_some(false)
}

/// `args` (the program's name first) with the flags before the subcommand moved after it
/// (before a `--`, if any). Anything else is left as it is.
pub fn hoisted(args: Vec<OsString>) -> Vec<OsString> {
    let mut iter = args.into_iter();
    let mut out: Vec<OsString> = iter.next().into_iter().collect();
    let mut moved = Vec::new();
    let mut rest: Vec<OsString> = Vec::new();
    while let Some(arg) = iter.next() {
        match arg.to_str().and_then(flag) {
            Some(takes_next) => {
                moved.push(arg);
                if takes_next {
                    if let Some(value) = iter.next() {
                        moved.push(value);
                    }
                }
            }
            None => {
                rest.push(arg);
                rest.extend(iter.by_ref());
            }
        }
    }
    if moved.is_empty() || rest.is_empty() {
        // Nothing to move, or no subcommand to move it after (clap says what is missing).
        out.extend(moved);
        out.extend(rest);
        return out;
    }
    let end = rest.iter().position(|a| a == "--").unwrap_or(rest.len());
    let tail = rest.split_off(end);
    out.extend(rest);
    out.extend(moved);
    out.extend(tail);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(line: &str) -> String {
        let args = line.split(' ').map(OsString::from).collect();
        hoisted(args)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn flags_before_the_subcommand_go_after_it() {
        let cases = [
            (
                "palisade -o json get boundaries",
                "palisade get boundaries -o json",
            ),
            (
                "palisade --url http://x --token t get resources shop",
                "palisade get resources shop --url http://x --token t",
            ),
            (
                "palisade --output=yaml -ojson get clusters",
                "palisade get clusters --output=yaml -ojson",
            ),
            (
                "palisade --context prod get policies shop",
                "palisade get policies shop --context prod",
            ),
            // After the subcommand, or none before it: unchanged.
            (
                "palisade get boundaries -o json",
                "palisade get boundaries -o json",
            ),
            ("palisade --version", "palisade --version"),
            ("palisade -o json", "palisade -o json"),
            // Another flag first stops the hoisting: clap judges the rest.
            ("palisade --help -o json get", "palisade --help -o json get"),
            // Before a `--`.
            (
                "palisade -o json apply -f x -- y",
                "palisade apply -f x -o json -- y",
            ),
        ];
        for (given, expected) in cases {
            assert_eq!(run(given), expected, "{given}");
        }
    }
}
