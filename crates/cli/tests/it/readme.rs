//! The README's walkthroughs, run as written: its cluster walkthrough is read from README.md,
//! and the guides that go on from it from docs/ (admission-walkthrough.md, workloads.md,
//! exceptions.md), and its tour and offline checks against `serve --demo` alone;
//! every `$ ` command of their `console` blocks runs in bash,
//! in order, against the first set-up command (`palisade serve --demo`, on a free port, in a
//! fresh directory) and a control plane started as the README says (`START_WORKLOADS=1`,
//! 1.37). Each command's output (standard output and error) must be the lines the README
//! shows after it; `...` in a shown line stands for any text (times, generated names), and a
//! command the README marks with a comment (`# a moment later`) is repeated until it shows
//! them (at most 90 s). `/tmp/k8s` is the test's control-plane directory.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::free_port;
use palisade_testkit::control_plane::{ControlPlane, Options};

const BIN: &str = env!("CARGO_BIN_EXE_palisade");

/// One command of a console block and the lines the README shows after it.
#[derive(Debug)]
struct Step {
    command: String,
    expected: Vec<String>,
    /// The README says the output comes "a moment later": repeat until it matches.
    repeat: bool,
}

/// The text of README.md from the heading `from` up to the heading `to`.
fn section<'a>(readme: &'a str, from: &str, to: &str) -> &'a str {
    let start = readme
        .find(from)
        .unwrap_or_else(|| panic!("README has no heading {from}"));
    let end = readme[start..]
        .find(to)
        .map_or(readme.len(), |offset| start + offset);
    &readme[start..end]
}

/// Every `$ ` command of the section's ```` ```console ```` blocks, in order.
fn steps(section: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut in_console = false;
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if !in_console {
            in_console = line.trim() == "```console";
            continue;
        }
        if line.trim() == "```" {
            in_console = false;
            continue;
        }
        let Some(first) = line.strip_prefix("$ ") else {
            if let Some(step) = steps.last_mut() {
                step.expected.push(line.trim_end().to_owned());
            }
            continue;
        };
        let mut command = first.to_owned();
        // Continuation lines, and a here-document's body up to its end marker.
        while command.ends_with('\\') {
            command.push('\n');
            command.push_str(lines.next().unwrap_or_default());
        }
        let repeat = command.contains("# a ");
        if let Some(marker) = heredoc_marker(&command) {
            for body in lines.by_ref() {
                command.push('\n');
                command.push_str(body);
                if body.trim() == marker {
                    break;
                }
            }
        }
        steps.push(Step {
            command,
            expected: Vec::new(),
            repeat,
        });
    }
    steps
}

/// `YAML` of `cat > f <<'YAML'`.
fn heredoc_marker(command: &str) -> Option<String> {
    let rest = command.split("<<").nth(1)?;
    let marker: String = rest
        .trim_start()
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!marker.is_empty()).then_some(marker)
}

/// Whether `actual` is what `expected` shows, `...` standing for any text.
fn line_matches(expected: &str, actual: &str) -> bool {
    let parts: Vec<&str> = expected.split("...").collect();
    let pattern = parts
        .iter()
        .map(|p| regex::escape(p))
        .collect::<Vec<_>>()
        .join(".*");
    regex::Regex::new(&format!("^{pattern}$"))
        .unwrap()
        .is_match(actual.trim_end())
}

fn output_matches(expected: &[String], actual: &str) -> bool {
    let actual: Vec<&str> = actual.trim_end().lines().collect();
    let expected: Vec<&String> = expected.iter().collect();
    let expected_len = expected
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    actual.len() == expected_len
        && expected
            .iter()
            .zip(&actual)
            .all(|(e, a)| line_matches(e, a))
}

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first set-up command, in `dir`: `palisade serve --demo` (its data in `./.palisade`).
fn first_setup_command(dir: &Path, port: u16) -> (Serve, String) {
    let child = Command::new(BIN)
        .args(["serve", "--demo", "--listen", &format!("127.0.0.1:{port}")])
        .current_dir(dir)
        .env_remove("PALISADE_DATABASE_URL")
        .env_remove("PALISADE_PUBLIC_URL")
        .env_remove("PALISADE_ADMIN_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let serve = Serve(child);
    let token_file = dir.join(".palisade/admin.token");
    let started = Instant::now();
    while !(token_file.exists() && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "palisade serve --demo did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let token = std::fs::read_to_string(token_file)
        .unwrap()
        .trim()
        .to_owned();
    (serve, token)
}

#[test]
fn the_readme_and_its_guides_run_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap();
    let readme = read("README.md");
    // The README from its tour to the portal (the tour, the offline checks, the cluster
    // walkthrough), then the guides that go on from it, in the order a reader follows them:
    // the walkthrough in depth (drift), platform workloads, exceptions, the CLI's reference
    // and the cluster's RBAC.
    let walkthrough = format!(
        "{}{}{}{}{}{}",
        section(&readme, "## A five-minute tour", "## The portal"),
        read("docs/admission-walkthrough.md"),
        read("docs/workloads.md"),
        read("docs/exceptions.md"),
        read("docs/cli.md"),
        read("docs/cluster-rbac.md"),
    );
    let steps = steps(&walkthrough);
    assert!(steps.len() >= 40, "{steps:#?}");
    assert!(
        walkthrough.contains("START_WORKLOADS=1 bash testenv/start.sh 1.37 /tmp/k8s"),
        "the README starts the plane this test starts"
    );

    let plane = ControlPlane::start_with(
        "1.37",
        &Options {
            workloads: true,
            ..Options::default()
        },
    );
    let workdir = plane.workdir().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    // The offline checks read the repository's examples, from where the commands run.
    copy_dir(&root.join("examples"), &dir.path().join("examples"));
    let started = Instant::now();
    run_steps(&steps, dir.path(), &[("/tmp/k8s", &workdir)]);
    eprintln!(
        "{} commands of the README and its guides ran as written in {:.1?}",
        steps.len(),
        started.elapsed()
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs `steps` in bash, in order, in `dir`, against the first set-up command started there
/// (`127.0.0.1:8080` in a command stands for its port), each command's text with `replace`'s
/// pairs replaced; every output must be the one shown. `export`, `source` and `alias` lines
/// hold for the commands after them, as in one shell.
fn run_steps(steps: &[Step], dir: &Path, replace: &[(&str, &str)]) {
    let port = free_port();
    let (_serve, token) = first_setup_command(dir, port);
    let bin_dir = Path::new(BIN).parent().unwrap().display().to_string();
    let path = format!("{bin_dir}:{}", std::env::var("PATH").unwrap_or_default());
    let address = format!("127.0.0.1:{port}");
    let mut prelude = String::from("shopt -s expand_aliases\n");
    for step in steps {
        let mut command = step.command.replace("127.0.0.1:8080", &address);
        for (from, to) in replace {
            command = command.replace(from, to);
        }
        let script = format!("{prelude}\n{command}");
        let run = || {
            let output = Command::new("bash")
                .args(["-c", &format!("exec 2>&1\n{script}")])
                .current_dir(dir)
                .env("PATH", &path)
                .env("PALISADE_URL", format!("http://{address}"))
                .env("PALISADE_TOKEN", &token)
                .env_remove("PALISADE_CA_FILE")
                .output()
                .unwrap();
            String::from_utf8_lossy(&output.stdout).into_owned()
        };
        let started = Instant::now();
        let mut actual = run();
        while step.repeat
            && !output_matches(&step.expected, &actual)
            && started.elapsed() < Duration::from_secs(90)
        {
            std::thread::sleep(Duration::from_millis(500));
            actual = run();
        }
        assert!(
            output_matches(&step.expected, &actual),
            "README command\n$ {}\nshows\n{}\nbut printed\n{}",
            step.command,
            step.expected.join("\n"),
            actual
        );
        if ["source ", "export ", "alias "]
            .iter()
            .any(|start| command.starts_with(start))
        {
            prelude.push_str(&command);
            prelude.push('\n');
        }
    }
}

#[test]
fn the_matcher_takes_dots_for_any_text_and_nothing_else() {
    assert!(line_matches(
        "app    web    small   ...   running",
        "app    web    small   2026-12-04T08:10:44.530Z   running"
    ));
    assert!(!line_matches("a ... b", "a x c"));
    assert!(!line_matches("cluster local saved", "cluster local saved!"));
    assert!(output_matches(
        &["one".into(), "two".into(), String::new()],
        "one\ntwo\n"
    ));
    assert!(!output_matches(&["one".into()], "one\ntwo\n"));
    let parsed = steps(
        "```console\n$ echo a \\\n  b   # a moment later\na b\n$ cat > f <<'YAML'\nx: 1\nYAML\n```\n",
    );
    assert_eq!(parsed.len(), 2);
    assert!(parsed[0].repeat);
    assert_eq!(parsed[0].expected, ["a b"]);
    assert_eq!(parsed[1].command, "cat > f <<'YAML'\nx: 1\nYAML");
    assert!(parsed[1].expected.is_empty());
}
