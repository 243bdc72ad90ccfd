//! `/metrics` of a `palisade serve` that has done nothing yet: every series that can exist
//! before a cluster is known or a request is answered is there, at 0, so that an alert on
//! `rate(...) > 0` or `increase(...)` has a series to watch from the start (issue 45, item 4).
//! The per-cluster series appear at a cluster's first pass (`cluster_access.rs` shows them
//! at 0 for a cluster just added).

use crate::common::serve;

/// One sample of the Prometheus text format: the metric's name, its labels as written
/// (`{a="x",b="y"}`, empty without), and its value.
#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: String,
    pub value: f64,
}

/// The samples of a Prometheus text exposition (comments and blank lines skipped).
pub fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample line has a value");
            let (name, labels) = match series.find('{') {
                Some(at) => (&series[..at], &series[at..]),
                None => (series, ""),
            };
            Sample {
                name: name.to_owned(),
                labels: labels.to_owned(),
                value: value.parse().expect("a sample's value is a number"),
            }
        })
        .collect()
}

/// `GET {url}/metrics`, as text.
pub fn scrape(url: &str) -> String {
    let answer = reqwest::blocking::get(format!("{url}/metrics")).unwrap();
    assert_eq!(answer.status(), 200);
    answer.text().unwrap()
}

#[test]
fn every_series_that_needs_no_cluster_or_request_is_there_at_zero_from_the_start() {
    use palisade_reconciler::metrics as reconciler;
    use palisade_server::metrics as server;

    let palisade = serve(&[]);
    // The very first request palisade answers.
    let text = scrape(&palisade.url);
    let samples = samples(&text);
    let of = |name: &str| -> Vec<&Sample> { samples.iter().filter(|s| s.name == name).collect() };

    for name in reconciler::FROM_START.iter().chain(&server::FROM_START) {
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "{name} is not described:\n{text}"
        );
        let series = of(name);
        assert!(!series.is_empty(), "no {name} series:\n{text}");
        // Nothing has happened: every counter is at 0, and so is every gauge but whether the
        // replica reconciles (and the replicas it saw), which its loop may have set already.
        if name.ends_with("_total") {
            for sample in series {
                assert_eq!(sample.value, 0.0, "{sample:?}");
            }
        }
    }
    for change in ["taken", "released", "lost"] {
        assert!(
            of(reconciler::HANDOVERS)
                .iter()
                .any(|s| s.labels == format!("{{change=\"{change}\"}}")),
            "no handovers {{change={change}}}:\n{text}"
        );
    }
    let decisions = of(server::PLAN_DECISIONS);
    for (ty, outcome) in server::plan_decision_labels() {
        let labels = format!("{{type=\"{ty}\",outcome=\"{outcome}\"}}");
        assert!(
            decisions.iter().any(|s| s.labels == labels),
            "no {} {labels}:\n{text}",
            server::PLAN_DECISIONS
        );
    }
    // No cluster is known: no per-cluster series yet.
    for name in reconciler::PER_CLUSTER {
        assert!(of(name).is_empty(), "{name} before any cluster:\n{text}");
    }
}
