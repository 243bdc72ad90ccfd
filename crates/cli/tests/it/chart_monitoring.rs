//! The chart's alert rules and Grafana dashboard (values `monitoring.rules` and
//! `monitoring.dashboard`, off by default): rendered with the values on, the PrometheusRule
//! has the operator's structure (groups of rules, each with alert, expr, for, a severity and a
//! summary), the dashboard ConfigMap carries the Grafana sidecar's label and the dashboard as
//! JSON, and every metric an expression of either names is one palisade describes on
//! `/metrics`. `promtool check rules` and `promtool test rules` (the alerts' unit tests,
//! `testdata/monitoring/alerts_test.yaml`) run too when promtool is there (on PATH,
//! `PALISADE_PROMTOOL`, or in the test cache: `scripts/build-promtool.sh`); without it the
//! test says so and checks the rest.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use palisade_testkit::control_plane;

use crate::helm_chart::helm;
use serde_json::Value;

fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/helm/palisade")
}

/// `helm template` of the chart with `args`; the rendered objects.
fn render(args: &[&str]) -> Vec<Value> {
    let chart = chart_dir().display().to_string();
    let mut all = vec!["template", "rel", chart.as_str(), "--namespace", "platform"];
    all.extend_from_slice(args);
    let out = helm(&all);
    assert!(
        out.status.success(),
        "helm {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split("\n---")
        .filter_map(|doc| serde_yaml_ng::from_str::<Value>(doc).ok())
        .filter(Value::is_object)
        .collect()
}

const ON: [&str; 4] = [
    "--set",
    "monitoring.rules.enabled=true",
    "--set",
    "monitoring.dashboard.enabled=true",
];

/// Every metric palisade describes, as the names its series have on `/metrics` (a histogram's
/// `_bucket`, `_sum` and `_count`).
fn described() -> BTreeSet<String> {
    use palisade_reconciler::metrics as reconciler;
    use palisade_server::metrics as server;
    let histograms: BTreeSet<&str> = reconciler::HISTOGRAMS
        .iter()
        .chain(&server::HISTOGRAMS)
        .copied()
        .collect();
    let mut names = BTreeSet::new();
    for name in reconciler::FROM_START
        .iter()
        .chain(&reconciler::PER_CLUSTER)
        .chain(&reconciler::PER_ROLLOUT)
        .chain(&server::FROM_START)
        .chain(&server::PER_REQUEST)
    {
        if histograms.contains(name) {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{suffix}"));
            }
        } else {
            names.insert((*name).to_owned());
        }
    }
    names
}

/// PromQL's aggregation operators and keywords, with those of `LABEL_LISTS`: words of an
/// expression that are no metric.
const KEYWORDS: [&str; 18] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
    "and",
    "or",
    "unless",
    "bool",
];

/// Words after which a parenthesis holds label names, not an expression.
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names of `expr` (of `what`), which names at least one, each of them one of
/// palisade's (`known`).
fn known_metric_names(expr: &str, known: &BTreeSet<String>, what: &str) -> Vec<String> {
    let names = metric_names(expr);
    assert!(!names.is_empty(), "{what}: no metric in {expr}");
    for name in &names {
        assert!(
            known.contains(name),
            "{what}: {name} is not on palisade's /metrics ({known:?})"
        );
    }
    names
}

/// The metric names a PromQL expression selects: every word outside strings, label matchers
/// (`{...}`), ranges (`[...]`) and label lists (`by (...)`) that is neither a function (a
/// word before `(`), a keyword, a number nor a Grafana variable (`$job`).
fn metric_names(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    let skip_to = |i: usize, close: char| -> usize {
        let mut j = i + 1;
        let mut quote: Option<char> = None;
        while j < chars.len() {
            match (quote, chars[j]) {
                (Some(_), '\\') => j += 1,
                (Some(q), c) if c == q => quote = None,
                (None, '"' | '\'' | '`') => quote = Some(chars[j]),
                (None, c) if c == close => return j + 1,
                _ => {}
            }
            j += 1;
        }
        panic!("unclosed {close} in {expr}")
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '{' => i = skip_to(i, '}'),
            '[' => i = skip_to(i, ']'),
            '"' | '\'' | '`' => {
                let mut j = i + 1;
                while j < chars.len() && chars[j] != c {
                    j += if chars[j] == '\\' { 2 } else { 1 };
                }
                i = j + 1;
            }
            '$' => {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
            c if c.is_ascii_digit() || c == '.' => {
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
            }
            c if c.is_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == ':')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut next = i;
                while next < chars.len() && chars[next].is_whitespace() {
                    next += 1;
                }
                let before_paren = chars.get(next) == Some(&'(');
                if LABEL_LISTS.contains(&word.as_str()) && before_paren {
                    i = skip_to(next, ')');
                } else if !before_paren
                    && !KEYWORDS.contains(&word.as_str())
                    && !LABEL_LISTS.contains(&word.as_str())
                    && !["Inf", "NaN", "inf", "nan"].contains(&word.as_str())
                {
                    names.push(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}

#[test]
fn metric_names_are_read_from_promql() {
    assert_eq!(
        metric_names(
            r#"sum by (namespace, le) (rate(a_bucket{route!~".*/(x|y)", s="}"}[5m])) / on (job) group_left b > 0.5 unless max(c{job=~"$job"}) or vector(0) and topk(10, d[$__rate_interval])"#
        ),
        ["a_bucket", "b", "c", "d"]
    );
}

/// Every rule of the PrometheusRule's spec (or a rule file): `(group, rule)`.
fn rules(spec: &Value) -> Vec<(String, Value)> {
    let groups = spec["groups"].as_array().expect("groups: a list");
    assert!(!groups.is_empty(), "no groups");
    let mut all = Vec::new();
    for group in groups {
        let name = group["name"].as_str().expect("a group has a name");
        let rules = group["rules"].as_array().expect("a group has rules");
        assert!(!rules.is_empty(), "group {name} has no rules");
        all.extend(rules.iter().map(|rule| (name.to_owned(), rule.clone())));
    }
    all
}

/// The PromQL expressions of a Grafana dashboard: each panel's targets (rows' panels too)
/// and the metric of each `label_values(...)` variable.
fn dashboard_exprs(dashboard: &Value) -> Vec<String> {
    fn panels(list: &Value, into: &mut Vec<String>) {
        for panel in list.as_array().into_iter().flatten() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"].as_str().expect("a target has an expr");
                into.push(expr.to_owned());
            }
            panels(&panel["panels"], into);
        }
    }
    let mut exprs = Vec::new();
    panels(&dashboard["panels"], &mut exprs);
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if variable["type"] == "query" {
            let query = variable["query"]["query"]
                .as_str()
                .or_else(|| variable["query"].as_str())
                .expect("a query variable has a query");
            let inner = query
                .strip_prefix("label_values(")
                .and_then(|q| q.rsplit_once(','))
                .map(|(metric, _)| metric)
                .unwrap_or_else(|| panic!("variable query {query}: not label_values(m, l)"));
            exprs.push(inner.to_owned());
        }
    }
    exprs
}

#[test]
fn the_alert_rules_and_dashboard_render_and_name_only_palisade_s_metrics() {
    // Off by default.
    let defaults = render(&[]);
    assert!(
        defaults
            .iter()
            .all(|o| o["kind"] != "PrometheusRule" && o["kind"] != "ConfigMap"),
        "monitoring objects rendered by default"
    );

    let objects = render(&ON);
    let rule = objects
        .iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .expect("a PrometheusRule");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["metadata"]["name"], "rel-palisade");
    // The chart's object is the rule file, as plain Prometheus reads it too.
    let file: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(chart_dir().join("monitoring/alerts.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(rule["spec"], file);

    let known = described();
    let durations = regex::Regex::new("^[0-9]+[smh]$").unwrap();
    let mut alerts = BTreeSet::new();
    let mut used = BTreeSet::new();
    for (group, rule) in rules(&rule["spec"]) {
        let alert = rule["alert"]
            .as_str()
            .unwrap_or_else(|| panic!("a rule of {group} without alert: {rule}"));
        assert!(
            alert.starts_with("Palisade") && alert.chars().all(char::is_alphanumeric),
            "alert name {alert}"
        );
        assert!(alerts.insert(alert.to_owned()), "{alert} twice");
        let expr = rule["expr"].as_str().expect("expr: a string");
        let duration = rule["for"]
            .as_str()
            .unwrap_or_else(|| panic!("{alert}: no `for`"));
        assert!(durations.is_match(duration), "{alert}: for {duration}");
        let severity = rule["labels"]["severity"]
            .as_str()
            .unwrap_or_else(|| panic!("{alert}: no labels.severity"));
        assert!(
            ["critical", "warning", "info"].contains(&severity),
            "{alert}: severity {severity}"
        );
        let summary = rule["annotations"]["summary"]
            .as_str()
            .unwrap_or_else(|| panic!("{alert}: no annotations.summary"));
        assert!(!summary.is_empty());
        used.extend(known_metric_names(expr, &known, alert));
    }
    // What the issue asks the rules to cover.
    for wanted in [
        "palisade_reconcile_passes_total",
        "palisade_reconcile_repairs_total",
        "palisade_exceptions_ended_still_installed",
        "palisade_http_requests_total",
        "palisade_http_request_duration_seconds_bucket",
        "palisade_reconcile_pass_duration_seconds_bucket",
    ] {
        assert!(used.contains(wanted), "no rule uses {wanted}");
    }

    let config_map = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "rel-palisade-dashboard")
        .expect("the dashboard's ConfigMap");
    // Grafana's dashboard sidecar (kube-prometheus-stack's default label).
    assert_eq!(config_map["metadata"]["labels"]["grafana_dashboard"], "1");
    let dashboard: Value =
        serde_json::from_str(config_map["data"]["palisade.json"].as_str().unwrap()).unwrap();
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(chart_dir().join("monitoring/dashboard.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(dashboard, file);
    assert_eq!(dashboard["uid"], "palisade");
    let exprs = dashboard_exprs(&dashboard);
    assert!(exprs.len() >= 20, "{} expressions", exprs.len());
    let mut shown = BTreeSet::new();
    for expr in &exprs {
        shown.extend(known_metric_names(expr, &known, "dashboard"));
    }
    // The dashboard shows every metric palisade has.
    let missing: Vec<&String> = known.difference(&shown).collect();
    let histogram_parts = |name: &&String| name.ends_with("_sum") || name.ends_with("_count");
    let missing: Vec<&String> = missing
        .into_iter()
        .filter(|n| !histogram_parts(n))
        .collect();
    assert!(missing.is_empty(), "the dashboard never shows {missing:?}");
    // Each panel's place is on the grid.
    for panel in dashboard["panels"].as_array().unwrap() {
        let grid = &panel["gridPos"];
        let (x, w) = (grid["x"].as_u64().unwrap(), grid["w"].as_u64().unwrap());
        assert!(x + w <= 24, "{} is off the grid", panel["title"]);
    }
}

/// The labels and namespace of the dashboard's ConfigMap come from the values.
#[test]
fn the_dashboard_goes_where_the_sidecar_looks() {
    let objects = render(&[
        "--set",
        "monitoring.dashboard.enabled=true",
        "--set",
        "monitoring.dashboard.namespace=monitoring",
        "--set",
        "monitoring.dashboard.annotations.grafana_folder=Platform",
        "--set",
        "monitoring.rules.enabled=true",
        "--set",
        "monitoring.rules.labels.release=prometheus",
    ]);
    let config_map = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "rel-palisade-dashboard")
        .unwrap();
    assert_eq!(config_map["metadata"]["namespace"], "monitoring");
    assert_eq!(
        config_map["metadata"]["annotations"]["grafana_folder"],
        "Platform"
    );
    let rule = objects
        .iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .unwrap();
    assert_eq!(rule["metadata"]["labels"]["release"], "prometheus");
}

fn alerts_test_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/monitoring/alerts_test.yaml")
}

/// Every alert has a case in the rules' unit tests (`testdata/monitoring/alerts_test.yaml`,
/// which promtool runs below), one that fires it.
#[test]
fn every_alert_has_a_unit_test_that_fires_it() {
    let file: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(chart_dir().join("monitoring/alerts.yaml")).unwrap(),
    )
    .unwrap();
    let tests: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(alerts_test_file()).unwrap()).unwrap();
    let fired: BTreeSet<&str> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|group| group["alert_rule_test"].as_array().into_iter().flatten())
        .filter(|case| {
            case["exp_alerts"]
                .as_array()
                .is_some_and(|alerts| !alerts.is_empty())
        })
        .filter_map(|case| case["alertname"].as_str())
        .collect();
    for (_, rule) in rules(&file) {
        let alert = rule["alert"].as_str().unwrap();
        assert!(fired.contains(alert), "no unit test fires {alert}");
    }
}

/// `promtool check rules` on the rule file and `promtool test rules` on its unit tests, when
/// promtool is there.
#[test]
fn promtool_accepts_the_rules_when_it_is_there() {
    // `scripts/build-promtool.sh` builds it into the test cache.
    let cached = || {
        let dir = palisade_testkit::cache_dir().join("promtool");
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|version| version.path().join("bin/promtool"))
            .filter(|p| p.is_file())
            .collect();
        found.sort();
        found.pop()
    };
    let promtool = std::env::var_os("PALISADE_PROMTOOL")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join("promtool"))
                    .find(|p| p.is_file())
            })
        })
        .or_else(cached);
    let Some(promtool) = promtool else {
        println!(
            "promtool is not on PATH, in the test cache (scripts/build-promtool.sh) or named by PALISADE_PROMTOOL: `promtool check rules` and `promtool test rules` skipped (the structure, the metric names and that each alert has a unit test are checked by the other tests here)"
        );
        return;
    };
    let passes = |verb: &str, file: &Path| {
        let out = Command::new(&promtool)
            .args([verb, "rules"])
            .arg(file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} {verb} rules:\n{}{}",
            promtool.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    passes("check", &chart_dir().join("monitoring/alerts.yaml"));
    passes("test", &alerts_test_file());
}

/// A monitoring value of the wrong type or an unknown key fails `helm template` naming it.
#[test]
fn bad_monitoring_values_fail_naming_the_key() {
    let chart = chart_dir().display().to_string();
    for (set, named) in [
        ("monitoring.rules.enabled=yes", "enabled"),
        (
            "monitoring.dashboard.namespace=Not_A_Namespace",
            "namespace",
        ),
        ("monitoring.rule.enabled=true", "rule"),
    ] {
        let out = helm(&["template", "rel", &chart, "--set-string", set]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{set} accepted");
        assert!(
            stderr.contains("monitoring") && stderr.contains(named),
            "{set}: {stderr}"
        );
    }
}

/// The dashboard's ConfigMap is one the API server takes (server-side dry run, strict).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_config_map_is_accepted_by_kubernetes() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Patch, PatchParams};

    let plane = tokio::task::spawn_blocking(|| control_plane::shared("1.37"))
        .await
        .unwrap();
    let client = plane.client().await;
    let namespace = control_plane::temp_namespace(&client, None).await;
    let objects = render(&ON);
    let config_map = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "rel-palisade-dashboard")
        .unwrap();
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, &namespace);
    let params = PatchParams::apply("palisade-chart-test")
        .dry_run()
        .validation_strict();
    api.patch("rel-palisade-dashboard", &params, &Patch::Apply(config_map))
        .await
        .unwrap();
}
