//! `palisade diff`, contexts, list output and `--watch`, end to end: `palisade serve` as a
//! real process on a free port, driven by the `palisade` client commands; exact output and
//! exit codes.

use crate::common::{command, free_port, palisade_with_stdin, serve, text, write, Server};

use std::process::{Child, Output, Stdio};
use std::time::Duration;

fn palisade(server: &Server, args: &[&str]) -> Output {
    command(server.dir.path())
        .args(args)
        .env("PALISADE_URL", &server.url)
        .env("PALISADE_TOKEN", &server.token)
        .output()
        .unwrap()
}

/// (exit code, standard output, standard error).
fn outcome(out: &Output) -> (Option<i32>, String, String) {
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

const SIZE_LIMITS: &str = "\
apiVersion: palisade.dev/v1
kind: BoundaryPolicy
metadata: {name: size-limits, boundary: shop}
spec:
  rules:
    - allowedComputePlans: {plans: [small]}
    - allowedRegistries: {registries: [docker.io/library/]}
";

/// The document as the server stores it, every line added.
const SIZE_LIMITS_ADDED: &str = "\
@@ -0,0 +1,14 @@
+apiVersion: palisade.dev/v1
+kind: BoundaryPolicy
+metadata:
+  name: size-limits
+  boundary: shop
+spec:
+  mode: enforce
+  rules:
+  - allowedComputePlans:
+      plans:
+      - small
+  - allowedRegistries:
+      registries:
+      - docker.io/library
";

#[test]
fn diff_shows_what_apply_would_change_and_exits_as_kubectl_diff() {
    let server = serve(&[]);
    palisade(&server, &["boundary", "create", "shop"]);
    let file = write(&server.dir, "size-limits.yaml", SIZE_LIMITS);
    let shown = format!("{}:0", file.display());

    // Not stored yet: every line added, with the save warnings of what would change.
    let out = palisade(&server, &["diff", "-f", path(&file)]);
    assert_eq!(
        outcome(&out),
        (
            Some(1),
            format!(
                "--- boundarypolicy shop/size-limits (not stored)\n\
                 +++ boundarypolicy shop/size-limits ({shown})\n{SIZE_LIMITS_ADDED}"
            ),
            "warning: boundarypolicy shop/size-limits: registry prefix 'docker.io/library/' saved as 'docker.io/library'\n".to_owned()
        )
    );

    // Stored: the file that apply reports unchanged diffs as nothing (the trailing / and the
    // omitted mode are the server's normalisations, not differences).
    let out = palisade(&server, &["apply", "-f", path(&file)]);
    assert_eq!(
        text(&out.stdout),
        "boundarypolicy shop/size-limits created\n"
    );
    let out = palisade(&server, &["diff", "-f", path(&file)]);
    assert_eq!(outcome(&out), (Some(0), String::new(), String::new()));
    let out = palisade(&server, &["apply", "-f", path(&file), "--dry-run"]);
    assert!(
        text(&out.stdout).starts_with("boundarypolicy shop/size-limits unchanged (dry run)\n"),
        "{}",
        text(&out.stdout)
    );

    // A changed file: the stored document first, the file's second.
    let changed = write(
        &server.dir,
        "changed.yaml",
        &SIZE_LIMITS.replace("[small]", "[small, medium]"),
    );
    let out = palisade(&server, &["diff", "-f", path(&changed)]);
    assert_eq!(
        outcome(&out),
        (
            Some(1),
            format!(
                "--- boundarypolicy shop/size-limits (live)\n\
                 +++ boundarypolicy shop/size-limits ({}:0)\n\
                 @@ -9,6 +9,7 @@\n   \
                 - allowedComputePlans:\n       \
                 plans:\n       \
                 - small\n\
                 +      - medium\n   \
                 - allowedRegistries:\n       \
                 registries:\n       \
                 - docker.io/library\n",
                changed.display()
            ),
            "warning: boundarypolicy shop/size-limits: registry prefix 'docker.io/library/' saved as 'docker.io/library'\n".to_owned()
        )
    );

    // What `get policy -o yaml` prints diffs as nothing, from standard input too.
    let yaml = text(
        &palisade(
            &server,
            &["get", "policy", "shop/size-limits", "-o", "yaml"],
        )
        .stdout,
    );
    let out = palisade_with_stdin(&server, &["diff", "-f", "-"], &yaml);
    assert_eq!(outcome(&out), (Some(0), String::new(), String::new()));
}

#[test]
fn diff_compares_exceptions_and_says_when_apply_would_approve_a_request() {
    let server = serve(&[]);
    palisade(&server, &["boundary", "create", "shop"]);
    let expires = (chrono::Utc::now() + chrono::Duration::days(30))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let exception = format!(
        "apiVersion: palisade.dev/v1\nkind: BoundaryException\nmetadata: {{name: legacy, boundary: shop}}\n\
         spec:\n  policy: size-limits\n  resources: [app/reports]\n  plans: [large]\n  expiresAt: \"{expires}\"\n  reason: moving to small\n"
    );
    let file = write(&server.dir, "legacy.yaml", &exception);
    let out = palisade(&server, &["diff", "-f", path(&file)]);
    assert_eq!(
        outcome(&out),
        (
            Some(1),
            format!(
                "--- boundaryexception shop/legacy (not stored)\n\
                 +++ boundaryexception shop/legacy ({}:0)\n\
                 @@ -0,0 +1,13 @@\n\
                 +apiVersion: palisade.dev/v1\n\
                 +kind: BoundaryException\n\
                 +metadata:\n\
                 +  name: legacy\n\
                 +  boundary: shop\n\
                 +spec:\n\
                 +  policy: size-limits\n\
                 +  resources:\n\
                 +  - app/reports\n\
                 +  plans:\n\
                 +  - large\n\
                 +  expiresAt: {expires}\n\
                 +  reason: moving to small\n",
                file.display()
            ),
            String::new()
        )
    );

    // A developer's request of the same document: apply would approve it.
    let out = palisade(
        &server,
        &[
            "token",
            "create",
            "--role",
            "developer",
            "--boundary",
            "shop",
            "-o",
            "json",
        ],
    );
    let secret: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let developer = secret["secret"].as_str().unwrap();
    let out = command(server.dir.path())
        .args(["exception", "request", "-f", path(&file)])
        .env("PALISADE_URL", &server.url)
        .env("PALISADE_TOKEN", developer)
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout),
        "boundaryexception shop/legacy requested\n",
        "{}",
        text(&out.stderr)
    );
    let out = palisade(&server, &["diff", "-f", path(&file)]);
    assert_eq!(
        outcome(&out),
        (
            Some(1),
            "boundaryexception shop/legacy: the same document; apply would approve the request\n"
                .to_owned(),
            String::new()
        )
    );
    let out = palisade(&server, &["apply", "-f", path(&file)]);
    assert_eq!(
        text(&out.stdout),
        "boundaryexception shop/legacy configured\n"
    );
    let out = palisade(&server, &["diff", "-f", path(&file)]);
    assert_eq!(outcome(&out), (Some(0), String::new(), String::new()));

    // The developer may not ask what apply would do.
    let out = command(server.dir.path())
        .args(["diff", "-f", path(&file)])
        .env("PALISADE_URL", &server.url)
        .env("PALISADE_TOKEN", developer)
        .output()
        .unwrap();
    assert_eq!(
        outcome(&out),
        (
            Some(2),
            String::new(),
            "error: this needs the role admin or boundary-admin; the token is a developer token [forbidden]\n".to_owned()
        )
    );
}

#[test]
fn diff_exits_2_on_bad_input_or_an_unreachable_server() {
    let server = serve(&[]);
    palisade(&server, &["boundary", "create", "shop"]);
    let missing = server.dir.path().join("missing.yaml");
    let out = palisade(&server, &["diff", "-f", path(&missing)]);
    assert_eq!(
        outcome(&out),
        (
            Some(2),
            String::new(),
            format!(
                "error: {}: No such file or directory (os error 2)\n",
                missing.display()
            )
        )
    );

    let broken = write(
        &server.dir,
        "broken.yaml",
        &SIZE_LIMITS.replace("[small]", "[small, small]"),
    );
    let out = palisade(&server, &["diff", "-f", path(&broken)]);
    assert_eq!(
        outcome(&out),
        (
            Some(2),
            String::new(),
            format!(
                "error: {}:0: /spec/rules/0/allowedComputePlans/plans/1: duplicates entry 0 [invalid_request]\n",
                broken.display()
            )
        )
    );

    let file = write(&server.dir, "size-limits.yaml", SIZE_LIMITS);
    let out = palisade(&server, &["diff", "-f", path(&file), "-o", "json"]);
    assert_eq!(
        outcome(&out),
        (
            Some(2),
            String::new(),
            "error: diff prints unified diffs only; -o json|yaml is not supported\n".to_owned()
        )
    );

    let port = free_port();
    let out = command(server.dir.path())
        .args(["diff", "-f", path(&file)])
        .env("PALISADE_URL", format!("http://127.0.0.1:{port}"))
        .env("PALISADE_TOKEN", "x")
        .output()
        .unwrap();
    assert_eq!(
        outcome(&out),
        (
            Some(2),
            String::new(),
            format!(
                "error: cannot reach palisade at http://127.0.0.1:{port}: connection refused\n"
            )
        )
    );
}

/// `palisade` with only the config file to go by (no PALISADE_URL or PALISADE_TOKEN), its
/// config directory under `home`.
fn with_config(home: &std::path::Path, args: &[&str]) -> Output {
    command(home).args(args).output().unwrap()
}

#[test]
fn contexts_are_kept_in_the_config_file_and_picked_by_name() {
    let server = serve(&[]);
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("config/palisade/config.yaml");
    let run = |args: &[&str]| outcome(&with_config(home.path(), args));
    let ok = |stdout: &str| (Some(0), stdout.to_owned(), String::new());

    // No file yet: an empty config, and the default server.
    assert_eq!(run(&["config", "view"]), ok("contexts: {}\n"));
    assert_eq!(
        run(&["get", "boundaries"]),
        (
            Some(1),
            String::new(),
            "error: cannot reach palisade at http://127.0.0.1:8080: connection refused\n"
                .to_owned()
        )
    );

    assert_eq!(
        run(&[
            "config",
            "set-context",
            "local",
            "--url",
            &server.url,
            "--token",
            &server.token
        ]),
        ok("context local created\n")
    );
    let dead = format!("http://127.0.0.1:{}", free_port());
    assert_eq!(
        run(&["config", "set-context", "dead", "--url", &dead]),
        ok("context dead created\n")
    );
    assert_eq!(
        run(&["config", "set-context", "dead", "--token", "pal_x"]),
        ok("context dead updated\n")
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!(
            "contexts:\n  dead:\n    url: {dead}\n    token: pal_x\n  local:\n    url: {}\n    token: {}\n",
            server.url, server.token
        )
    );

    // No current context yet: the default server still.
    assert_eq!(run(&["get", "boundaries"]).0, Some(1));
    assert_eq!(
        run(&["config", "use-context", "local"]),
        ok("switched to context local\n")
    );
    assert_eq!(
        run(&["config", "view"]),
        ok(&format!(
            "current-context: local\ncontexts:\n  dead:\n    url: {dead}\n    token: REDACTED\n  local:\n    url: {}\n    token: REDACTED\n",
            server.url
        ))
    );
    let width = dead.len().max(server.url.len());
    assert_eq!(
        run(&["config", "get-contexts"]),
        ok(&format!(
            "CURRENT   NAME    {:w$}   TOKEN      CA FILE\n          dead    {dead:w$}   REDACTED   -\n*         local   {:w$}   REDACTED   -\n",
            "URL",
            server.url,
            w = width
        ))
    );
    assert_eq!(
        run(&["boundary", "create", "shop"]),
        ok("boundary shop created\n")
    );
    assert_eq!(run(&["get", "boundaries", "-o", "json"]).0, Some(0));

    // --context picks another; the variables and flags win over any context.
    let refused = |url: &str| {
        (
            Some(1),
            String::new(),
            format!("error: cannot reach palisade at {url}: connection refused\n"),
        )
    };
    assert_eq!(
        run(&["get", "boundaries", "--context", "dead"]),
        refused(&dead)
    );
    let out = command(home.path())
        .args(["get", "boundaries", "--context", "local"])
        .env("PALISADE_URL", &dead)
        .output()
        .unwrap();
    assert_eq!(outcome(&out), refused(&dead));
    let out = command(home.path())
        .args(["get", "boundaries", "--url", &server.url])
        .env("PALISADE_URL", &dead)
        .output()
        .unwrap();
    assert_eq!(outcome(&out).0, Some(0), "{}", text(&out.stderr));
    // A context's token goes only to its own URL.
    let out = command(home.path())
        .args([
            "get",
            "boundaries",
            "--context",
            "dead",
            "--url",
            &server.url,
        ])
        .output()
        .unwrap();
    assert_eq!(
        outcome(&out),
        (
            Some(1),
            String::new(),
            "error: missing Authorization: Bearer <token> header [unauthorized] (set PALISADE_TOKEN)\n"
                .to_owned()
        )
    );
    let out = command(home.path())
        .args([
            "get",
            "boundaries",
            "--context",
            "dead",
            "--url",
            &server.url,
        ])
        .env("PALISADE_TOKEN", &server.token)
        .output()
        .unwrap();
    assert_eq!(outcome(&out).0, Some(0), "{}", text(&out.stderr));

    // The version command asks the current context's server.
    let out = run(&["version"]);
    assert_eq!(out.0, Some(0), "{}", out.2);
    assert!(out.1.contains("Server Version: "), "{}", out.1);

    // Unknown names and bad settings.
    assert_eq!(
        run(&["config", "use-context", "prod"]),
        (
            Some(1),
            String::new(),
            format!(
                "error: no context 'prod' in {} (contexts: dead, local)\n",
                file.display()
            )
        )
    );
    assert_eq!(
        run(&["get", "boundaries", "--context", "prod"]),
        (
            Some(1),
            String::new(),
            format!(
                "error: no context 'prod' in {} (contexts: dead, local)\n",
                file.display()
            )
        )
    );
    assert_eq!(
        run(&["config", "set-context", "prod", "--url", "palisade.example"]),
        (
            Some(1),
            String::new(),
            "error: --url: 'palisade.example' is not an http:// or https:// URL\n".to_owned()
        )
    );
    let missing = home.path().join("ca.pem");
    assert_eq!(
        run(&["config", "set-context", "prod", "--ca-file", path(&missing)]),
        (
            Some(1),
            String::new(),
            format!("error: --ca-file: {}: no such file\n", missing.display())
        )
    );
    assert_eq!(
        run(&["config", "set-context", "a b"]),
        (
            Some(1),
            String::new(),
            "error: context name 'a b': use letters, digits, '.', '_' and '-' (at most 253)\n"
                .to_owned()
        )
    );
    // An empty value removes a setting.
    assert_eq!(
        run(&["config", "set-context", "dead", "--token", ""]),
        ok("context dead updated\n")
    );
    assert!(!std::fs::read_to_string(&file).unwrap().contains("pal_x"));
}

#[test]
fn the_config_file_is_found_by_variable_and_a_malformed_one_is_named() {
    let home = tempfile::tempdir().unwrap();
    let own = home.path().join("elsewhere/palisade.yaml");
    let out = command(home.path())
        .args([
            "config",
            "set-context",
            "ci",
            "--url",
            "https://palisade.example",
        ])
        .env("PALISADE_CONFIG", &own)
        .output()
        .unwrap();
    assert_eq!(
        outcome(&out),
        (Some(0), "context ci created\n".to_owned(), String::new())
    );
    assert_eq!(
        std::fs::read_to_string(&own).unwrap(),
        "contexts:\n  ci:\n    url: https://palisade.example\n"
    );
    // Without XDG_CONFIG_HOME: ~/.config/palisade/config.yaml.
    let out = command(home.path())
        .args(["config", "set-context", "h"])
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    assert_eq!(outcome(&out).0, Some(0));
    assert!(home.path().join(".config/palisade/config.yaml").is_file());

    let file = home.path().join("config/palisade/config.yaml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    for (content, problem) in [
        (
            "contexts:\n  prod: {uri: https://x}\n",
            "not a palisade config file: contexts.prod: unknown field `uri`, expected one of `url`, `token`, `ca-file` at line 2 column 10",
        ),
        (
            "current-context: prod\ncontexts: {}\n",
            "current-context 'prod' names no context in it",
        ),
        (
            "contexts:\n\tprod: {}\n",
            "not a palisade config file: found character that cannot start any token at line 2 column 1, while scanning for the next token",
        ),
    ] {
        std::fs::write(&file, content).unwrap();
        for args in [&["get", "boundaries"][..], &["config", "view"][..]] {
            let out = with_config(home.path(), args);
            assert_eq!(
                outcome(&out),
                (
                    Some(1),
                    String::new(),
                    format!("error: {}: {problem}\n", file.display())
                ),
                "{args:?}"
            );
        }
    }
}

/// The cells of a table's lines (columns are three or more spaces apart).
fn cells(table: &str) -> Vec<Vec<String>> {
    let gap = regex::Regex::new(" {3,}").unwrap();
    table
        .lines()
        .map(|line| gap.split(line).map(str::to_owned).collect())
        .collect()
}

#[test]
fn lists_print_names_wide_tables_and_select_by_label() {
    let server = serve(&[]);
    let run = |args: &[&str]| outcome(&palisade(&server, args));
    let ok = |stdout: &str| (Some(0), stdout.to_owned(), String::new());
    assert_eq!(
        run(&["boundary", "create", "shop"]),
        ok("boundary shop created\n")
    );
    let policy = write(&server.dir, "size-limits.yaml", SIZE_LIMITS);
    palisade(&server, &["apply", "-f", path(&policy)]);
    for (name, labels) in [
        ("web", "team=web,tier=front"),
        ("api", "team=web,tier=back"),
    ] {
        let mut args = vec![
            "resource",
            "create",
            "shop",
            "--type",
            "app",
            "--name",
            name,
            "--plan",
            "small",
            "--image",
            "ghcr.io/acme/web:1.4",
        ];
        for label in labels.split(',') {
            args.extend(["--label", label]);
        }
        assert_eq!(run(&args).0, Some(0));
    }
    assert_eq!(
        run(&[
            "resource",
            "create",
            "shop",
            "--type",
            "postgresql",
            "--name",
            "db",
            "--plan",
            "small"
        ])
        .0,
        Some(0)
    );

    assert_eq!(
        run(&["get", "boundaries", "-o", "name"]),
        ok("boundary/shop\n")
    );
    assert_eq!(
        run(&["get", "policies", "shop", "-o", "name"]),
        ok("shop/size-limits\n")
    );
    assert_eq!(
        run(&["get", "policy", "shop/size-limits", "-o", "name"]),
        ok("shop/size-limits\n")
    );
    let tokens = run(&["get", "tokens", "-o", "name"]).1;
    assert!(
        tokens.lines().count() == 1 && tokens.starts_with("token/"),
        "{tokens}"
    );
    assert_eq!(
        run(&["get", "resources", "shop", "-o", "name"]),
        ok("shop/app/api\nshop/app/web\nshop/postgresql/db\n")
    );

    // Selectors.
    for (selector, names) in [
        ("team=web", "shop/app/api\nshop/app/web\n"),
        ("team==web,tier!=back", "shop/app/web\n"),
        ("tier!=back", "shop/app/web\nshop/postgresql/db\n"),
        ("!team", "shop/postgresql/db\n"),
        ("tier", "shop/app/api\nshop/app/web\n"),
        ("team=db", ""),
    ] {
        assert_eq!(
            run(&["get", "resources", "shop", "-l", selector, "-o", "name"]),
            ok(names),
            "{selector}"
        );
    }
    let out = palisade(
        &server,
        &["get", "resources", "shop", "-l", "tier=front", "-o", "json"],
    );
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["items"].as_array().unwrap().len(), 1);
    assert_eq!(body["items"][0]["name"], "web");
    let table = run(&["get", "resources", "shop", "--selector", "tier=front"]).1;
    let rows = cells(&table);
    assert_eq!(rows[0], ["TYPE", "NAME", "PLAN", "UPDATED", "STATUS"]);
    assert_eq!(rows.len(), 2, "{table}");
    assert_eq!(rows[1][..3], ["app", "web", "small"]);

    // Wide tables.
    let table = run(&["get", "resources", "shop", "-o", "wide", "-l", "team"]).1;
    let rows = cells(&table);
    assert_eq!(
        rows[0],
        [
            "TYPE",
            "NAME",
            "PLAN",
            "UPDATED",
            "STATUS",
            "IMAGE",
            "PLACEMENT",
            "REPLICAS",
            "LABELS"
        ]
    );
    assert_eq!(
        rows[2][5..],
        ["ghcr.io/acme/web:1.4", "-", "-", "team=web,tier=front"],
        "{table}"
    );
    let table = run(&["get", "policies", "shop", "-o", "wide"]).1;
    let rows = cells(&table);
    assert_eq!(
        rows[0],
        [
            "NAME",
            "VERSION",
            "MODE",
            "SCOPE",
            "RULES",
            "STATUS",
            "UPDATED",
            "UPDATED BY",
            "LABELS"
        ]
    );
    assert_eq!(
        rows[1][7..],
        [
            "token:".to_owned() + &server.token[4..20] + " (admin)",
            "-".to_owned()
        ]
    );
    let table = run(&["get", "boundaries", "-o", "wide"]).1;
    assert_eq!(cells(&table)[0], ["NAME", "DISPLAY NAME", "CREATED"]);

    // Where they do not apply, and a malformed selector (exit 2, as clap's usage errors).
    assert_eq!(
        run(&["delete", "policy", "shop/size-limits", "-o", "name"]),
        (
            Some(1),
            String::new(),
            "error: -o name and -o wide are for the lists of palisade get; use table, json or yaml\n"
                .to_owned()
        )
    );
    assert_eq!(
        run(&["get", "plans", "shop", "--type", "app", "-o", "wide"]),
        (
            Some(1),
            String::new(),
            "error: -o name and -o wide are for lists (and one policy, exception or resource); use table, json or yaml\n"
                .to_owned()
        )
    );
    for (selector, problem) in [
        (
            "team=a=b",
            "'team=a=b': only =, == and != are understood (key=value, key!=value, key, !key)",
        ),
        (
            "team in (web)",
            "'team in (web)': only =, == and != are understood (key=value, key!=value, key, !key)",
        ),
        ("team=web,", "'team=web,' is empty between commas"),
        (
            "Team_=web",
            "'Team_=web': label key name 'Team_' must be at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        ),
    ] {
        assert_eq!(
            run(&["get", "resources", "shop", "-l", selector]),
            (
                Some(2),
                String::new(),
                format!(
                    "error: invalid value '{selector}' for '-l <SELECTOR>': {problem}\n\nFor more information, try '--help'.\n"
                )
            ),
            "{selector}"
        );
    }
}

/// A running `palisade ... --watch`: its standard output, line by line.
struct Watch {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Watch {
    fn start(server: &Server, args: &[&str]) -> Watch {
        let mut child = command(server.dir.path())
            .args(args)
            .env("PALISADE_URL", &server.url)
            .env("PALISADE_TOKEN", &server.token)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Watch { child, lines }
    }

    /// The next line printed, within 10 seconds.
    fn next(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the watch printed no line within 10 s")
    }

    /// True when nothing more is printed within `wait`.
    fn quiet_for(&self, wait: Duration) -> bool {
        self.lines.recv_timeout(wait).is_err()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn watch_prints_the_table_then_a_row_for_each_change() {
    let server = serve(&[]);
    palisade(&server, &["boundary", "create", "shop"]);
    let create = |name: &str, plan: &str| {
        let out = palisade(
            &server,
            &[
                "resource",
                "create",
                "shop",
                "--type",
                "postgresql",
                "--name",
                name,
                "--plan",
                plan,
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    };
    create("orders", "small");

    let watch = Watch::start(&server, &["get", "resources", "shop", "--watch"]);
    let header = cells(&watch.next());
    assert_eq!(header[0], ["TYPE", "NAME", "PLAN", "UPDATED", "STATUS"]);
    assert_eq!(
        cells(&watch.next())[0][..3],
        ["postgresql", "orders", "small"]
    );
    // Nothing changes: nothing more is printed.
    assert!(watch.quiet_for(Duration::from_millis(2500)));

    create("billing", "medium");
    let billing = watch.next();
    assert_eq!(
        cells(&billing)[0][..3],
        ["postgresql", "billing", "medium"],
        "{billing}"
    );
    let out = palisade(
        &server,
        &[
            "resource",
            "update",
            "shop/postgresql/orders",
            "--plan",
            "large",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let row = watch.next();
    assert_eq!(
        cells(&row)[0][..3],
        ["postgresql", "orders", "large"],
        "{row}"
    );
    // The first table's column widths; a wider cell (`billing`) widens only its own line.
    assert!(row.starts_with("postgresql   orders   large   2"), "{row}");
    assert!(
        billing.starts_with("postgresql   billing   medium   2"),
        "{billing}"
    );
    assert!(watch.quiet_for(Duration::from_millis(1500)));
    drop(watch);

    // -o json: one item per line.
    let watch = Watch::start(&server, &["get", "boundaries", "-w", "-o", "json"]);
    let first: serde_json::Value = serde_json::from_str(&watch.next()).unwrap();
    assert_eq!(first["name"], "shop");
    palisade(&server, &["boundary", "create", "web-team"]);
    let next: serde_json::Value = serde_json::from_str(&watch.next()).unwrap();
    assert_eq!(next["name"], "web-team");
    drop(watch);

    // Not a list.
    let out = palisade(
        &server,
        &["get", "plans", "shop", "--type", "app", "--watch"],
    );
    assert_eq!(
        outcome(&out),
        (
            Some(1),
            String::new(),
            "error: --watch is for lists (boundaries, clusters, policies, exceptions, resources, namespaces, tokens)\n"
                .to_owned()
        )
    );
}

/// `get resource B/TYPE/NAME` prints the list's row for one resource (wide too), its name, or
/// the API's body; the client flags may also come before the subcommand, as kubectl's do.
#[test]
fn get_resource_shows_one_row_and_flags_may_precede_the_subcommand() {
    let server = serve(&[]);
    let run = |args: &[&str]| outcome(&palisade(&server, args));
    assert_eq!(run(&["boundary", "create", "shop"]).0, Some(0));
    let created = run(&[
        "resource",
        "create",
        "shop",
        "--type",
        "app",
        "--name",
        "web",
        "--plan",
        "small",
        "--image",
        "ghcr.io/acme/web:1.4",
        "--label",
        "team=web",
    ]);
    assert_eq!(created.0, Some(0), "{created:?}");

    let (code, table, stderr) = run(&["get", "resource", "shop/app/web"]);
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let rows = cells(&table);
    assert_eq!(rows[0], ["TYPE", "NAME", "PLAN", "UPDATED", "STATUS"]);
    assert_eq!(rows.len(), 2, "{table}");
    assert_eq!(&rows[1][..3], ["app", "web", "small"]);
    // Unplaced (the boundary has no cluster): the status says why nothing runs.
    assert_eq!(
        rows[1][4],
        "not deployed: no cluster given, and boundary 'shop' has no single attached cluster and namespace to run it in"
    );
    let (_, wide, _) = run(&["get", "resource", "shop/app/web", "-o", "wide"]);
    let rows = cells(&wide);
    assert_eq!(&rows[0][5..], ["IMAGE", "PLACEMENT", "REPLICAS", "LABELS"]);
    assert_eq!(rows[1][5], "ghcr.io/acme/web:1.4");
    assert_eq!(rows[1][8], "team=web");
    assert_eq!(
        run(&["get", "resource", "shop/app/web", "-o", "name"]),
        (Some(0), "shop/app/web\n".to_owned(), String::new())
    );
    // -o json, before the subcommand: the API's body.
    let (code, json, _) = run(&["-o", "json", "get", "resource", "shop/app/web"]);
    assert_eq!(code, Some(0));
    let body: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(body["name"], "web");
    assert_eq!(body["labels"]["team"], "web");
    assert_eq!(
        run(&["--output=name", "get", "boundaries"]),
        (Some(0), "boundary/shop\n".to_owned(), String::new())
    );
    // Named as the others are: not found, and a target of the wrong shape.
    let (code, _, stderr) = run(&["get", "resource", "shop/app/nope"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        "error: app 'nope' not found in boundary 'shop' [not_found]\n"
    );
    let (code, _, stderr) = run(&["get", "resource", "shop/web"]);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("BOUNDARY/TYPE/NAME"), "{stderr}");
}

/// `palisade rollback B/P --to N` (SPEC 8): the line it prints, the version it makes, the
/// versions `describe policy` shows, and what it says when it cannot.
#[test]
fn rollback_saves_an_earlier_version_as_the_next_and_describe_shows_the_versions() {
    let server = serve(&[]);
    palisade(&server, &["boundary", "create", "shop"]);
    let small = "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: size, boundary: shop}\nspec:\n  rules:\n    - allowedComputePlans: {plans: [small]}\n";
    let medium = small.replace("[small]", "[small, medium]");
    for document in [small, medium.as_str()] {
        let out = palisade_with_stdin(&server, &["apply", "-f", "-"], document);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }

    assert_eq!(
        outcome(&palisade(&server, &["rollback", "shop/size", "--to", "1"])),
        (
            Some(0),
            "boundarypolicy shop/size rolled back to version 1: now version 3\n".to_owned(),
            String::new()
        )
    );
    assert_eq!(
        outcome(&palisade(&server, &["rollback", "shop/size", "--to", "1"])),
        (
            Some(0),
            "boundarypolicy shop/size unchanged: version 3 has the spec of version 1 already\n"
                .to_owned(),
            String::new()
        )
    );
    assert_eq!(
        outcome(&palisade(&server, &["rollback", "shop/size", "--to", "9"])),
        (
            Some(1),
            String::new(),
            "error: policy 'size' of boundary 'shop' has no version 9: its latest is version 3 [not_found]\n"
                .to_owned()
        )
    );
    assert_eq!(
        outcome(&palisade(&server, &["rollback", "shop/size", "--to", "0"])),
        (
            Some(1),
            String::new(),
            "error: --to: must be a version of the policy (1 or more), got 0 [invalid_request]\n"
                .to_owned()
        )
    );

    let out = palisade(&server, &["describe", "policy", "shop/size"]);
    let described = text(&out.stdout);
    assert!(
        described.starts_with("Name:      size\nBoundary:  shop\nVersion:   3\n"),
        "{described}"
    );
    let history: Vec<&str> = described
        .split("History:\n")
        .nth(1)
        .unwrap()
        .lines()
        .collect();
    assert!(history[0].starts_with("  VERSION   AT"), "{described}");
    let versions: Vec<&str> = history[1..]
        .iter()
        .map(|line| line.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(versions, ["1", "2", "3"], "{described}");
    assert!(history[2].ends_with("   changed"), "{described}");
    assert!(
        history[3].ends_with("   rollback to version 1"),
        "{described}"
    );

    let out = palisade(&server, &["get", "policies", "shop"]);
    let table = text(&out.stdout);
    assert!(table.starts_with("NAME   VERSION   MODE"), "{table}");
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("size   3         "),
        "{table}"
    );
}
