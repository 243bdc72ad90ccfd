//! Reading what users name on the command line: files, directories of YAML files, and `-`
//! for standard input (read at most once per run).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// True for the path `-`, which names standard input (a file named `-` is written `./-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// How a path is shown in messages and `check` output: standard input is `<stdin>`.
pub fn shown(path: &Path) -> String {
    if is_stdin(path) {
        "<stdin>".to_owned()
    } else {
        path.display().to_string()
    }
}

/// Where a YAML error is, as `check`, `apply` and `preview` name it: `<file>:<line>:<column>:
/// <message>` when the parser gave a position (a syntax error), `<file>:<doc>: <pointer>:
/// <message>` otherwise (`doc`: the document's 0-based index in the file). `file` as [`shown`].
pub fn located(file: &str, error: &palisade_api_types::yaml::YamlError, index: usize) -> String {
    match (error.line, error.column) {
        (Some(line), Some(column)) => format!("{file}:{line}:{column}: {}", error.message),
        _ => format!("{file}:{index}: {error}"),
    }
}

/// The file itself, or every `*.yaml`/`*.yml` file in a directory, sorted (shared by `check`
/// and `apply`); `-` stays `-`. The error names the path.
pub fn yaml_files(path: &Path) -> Result<Vec<PathBuf>, String> {
    if !is_stdin(path) && path.is_dir() {
        let entries = std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        Ok(files)
    } else {
        Ok(vec![path.to_path_buf()])
    }
}

static STDIN_READ: AtomicBool = AtomicBool::new(false);

/// The text of a file, or of standard input for `-`. Standard input can be named once.
pub fn read_text(path: &Path) -> Result<String, String> {
    if is_stdin(path) {
        if STDIN_READ.swap(true, Ordering::SeqCst) {
            return Err("standard input (-) can be read only once".to_owned());
        }
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("<stdin>: {e}"))?;
        Ok(text)
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
    }
}
