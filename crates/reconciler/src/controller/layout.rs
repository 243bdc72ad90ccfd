//! The layout of each cluster (`--admission-layout`, `auto`) and what the cluster shows of it.

use super::memory::ClusterMemory;
use super::*;

/// What the controller knows of a cluster's layout between passes.
#[derive(Debug, Default)]
pub(super) struct LayoutState {
    /// The layout every boundary's objects are in since the last pass that completed a switch
    /// (`None`: not known yet).
    current: Option<Layout>,
    /// The etag of each (boundary, policy) applied, to notice changes.
    etags: HashMap<(String, String), String>,
    /// When the changes of the last hour were seen.
    changes: std::collections::VecDeque<Instant>,
    last_change: Option<Instant>,
    /// What the cluster shows (layout, reason), as last recorded.
    shown: Option<(Layout, String)>,
}

impl LayoutState {
    /// Counts the policies whose etag changed since the last pass.
    pub(super) fn observe(&mut self, policies: impl Iterator<Item = ((String, String), String)>) {
        let now = Instant::now();
        for (key, etag) in policies {
            if let Some(before) = self.etags.insert(key, etag.clone()) {
                if before != etag {
                    self.changes.push_back(now);
                    self.last_change = Some(now);
                }
            }
        }
        while self
            .changes
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(3600))
        {
            self.changes.pop_front();
        }
    }

    pub(super) fn facts(&self, minor: u32, boundaries: usize) -> ClusterFacts {
        ClusterFacts {
            kubernetes_minor: minor,
            boundaries,
            policy_changes_last_hour: self.changes.len(),
            since_last_change: self.last_change.map(|t| t.elapsed()),
        }
    }
}

impl ClusterMemory {
    /// The layout of `cluster` for this pass, from `--admission-layout` or, for `auto`, from
    /// its version, its boundaries and how often its policies changed (counted here).
    pub(super) fn choose_layout(
        &mut self,
        cluster: &ClusterRecord,
        minor: u32,
        attached: &[&BoundaryState],
        settings: &Settings,
    ) -> Choice {
        let cluster_name = Name::parse(&cluster.name).ok();
        let state = self.layout.get_or_insert_with(|| LayoutState {
            // What an earlier process recorded: the layout the cluster's objects are in.
            current: cluster
                .admission_layout
                .as_deref()
                .and_then(|l| l.parse().ok()),
            ..LayoutState::default()
        });
        if let Some(cluster_name) = &cluster_name {
            state.observe(attached.iter().flat_map(|boundary| {
                wanted(boundary, cluster_name).map(|(record, _)| {
                    (
                        (boundary.name.to_string(), record.name.clone()),
                        record.etag.clone(),
                    )
                })
            }));
        }
        choose(
            settings.layout,
            &state.facts(minor, attached.len()),
            state.current,
            &settings.thresholds,
        )
    }

    /// Remembers the layout once no boundary is still switching; what the cluster should
    /// show of it when that differs from what it shows.
    pub(super) fn layout_to_show(
        &mut self,
        choice: &Choice,
        switches_left: usize,
    ) -> Option<(Layout, String)> {
        let state = self.layout.get_or_insert_with(LayoutState::default);
        if switches_left == 0 {
            state.current = Some(choice.layout);
        }
        let shown = match state.current {
            Some(layout) if layout != choice.layout => (
                layout,
                format!("switching to {}: {}", choice.layout, choice.reason),
            ),
            _ => (choice.layout, choice.reason.clone()),
        };
        (state.shown.as_ref() != Some(&shown)).then(|| {
            state.shown = Some(shown.clone());
            shown
        })
    }
}

impl Part<'_> {
    /// Remembers the layout once no boundary is still switching, and shows it on the cluster
    /// (`GET /v1/clusters/{c}`, `palisade get clusters`) when it changed.
    pub(super) async fn record_layout(&mut self, choice: &Choice, switches_left: usize) {
        let (ctl, cluster) = (self.ctl, self.name.as_str());
        let changed = self.memory.layout_to_show(choice, switches_left);
        let Some(shown) = changed else {
            return;
        };
        let (layout, reason) = shown;
        tracing::info!(cluster, layout = %layout, reason, "admission layout");
        metrics::layout(cluster, layout);
        let result = ctl
            .records
            .record_cluster_layout(cluster, layout.as_str(), &reason)
            .await
            .map_err(ControllerError::ClusterStatus);
        if !pass::recorded(cluster, "the admission layout", result) {
            if let Some(state) = &mut self.memory.layout {
                state.shown = None;
            }
        }
    }
}
