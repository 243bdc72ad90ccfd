//! The storage contract, one suite run against both backends: SQLite (a file in a temporary
//! directory) and PostgreSQL (a fresh database on the test server named by
//! `PALISADE_TEST_POSTGRES_URL`; see `palisade_testkit::postgres`). The store's other
//! integration tests (`database_url`, `migrations`, `sqlite_file`) are modules of this binary
//! too, so that the crate's tests link once.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly"
)]

mod backends;
mod boundaries;
mod changes;
mod clusters;
mod exceptions;
mod fencing;
mod guarded_writes;
mod policies;
mod reconciler;
mod resources;
mod support;
mod tokens;
mod turns;
mod uploads;

mod database_url;
mod migrations;
mod sqlite_file;
mod upgrade;

use palisade_store::SharedStore;
use palisade_testkit::postgres::test_database_url;

use backends::{reconnects_to_existing_data, reports_its_backend};
use boundaries::{boundaries, deleting_a_boundary_takes_its_attachments_and_tokens};
use changes::{
    changes_share_one_sequence, history_is_pruned_oldest_first_in_batches,
    history_keeps_each_newest_entry_and_reads_pages,
};
use clusters::{
    audit_reports, cluster_layout, clusters_and_attachments,
    namespace_uids_gone_and_reserved_names, namespaces, policy_statuses,
};
use exceptions::{
    exception_installs, exceptions, exceptions_change_the_policies_version,
    the_snapshot_is_every_boundary_s_own_lists,
};
use fencing::a_fence_holds_while_its_cluster_is_held;
use guarded_writes::{
    a_deadline_passed_before_the_commit_writes_nothing, concurrent_creates_of_one_name_conflict,
    concurrent_edits_of_one_resource_lose_nothing, guarded_creates_race_policy_changes,
};
use policies::{
    apply_policies_in_order, apply_policies_is_all_or_nothing, policies, policy_if_match,
    policy_rollouts, policy_versions,
};
use reconciler::{
    changes_wake_subscribers, installation_id_is_made_once, one_holder_per_cluster,
    the_encryption_key_check_is_made_once,
};
use resources::{
    a_boundary_made_again_starts_at_another_version, a_guard_reads_the_policies_once_per_version,
    create_resource_checks_before_the_guard, create_resource_with_guards, delete_resource,
    pagination, placed_workloads_and_statuses, plan_groups_and_their_pages,
    unchanged_body_writes_nothing, update_resource,
};
use tokens::{
    bootstrap_admin_token, bootstrap_admin_token_concurrently,
    ended_sessions_are_remembered_until_they_expire, the_last_admin_token_stays, tokens,
};
use turns::a_boundarys_queue_holds_up_another_boundarys_write_by_one_turn;
use uploads::{
    unnamed_uploads_are_swept_and_named_ones_stay, uploads_are_stored_from_chunks,
    uploads_count_against_their_boundarys_limit,
};

/// A database for one test: its URL, and the temporary directory of a SQLite file.
#[derive(Debug)]
pub struct TestDb {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("palisade.db").display());
        Self {
            url,
            _dir: Some(dir),
        }
    }

    pub fn postgres() -> Self {
        Self {
            url: test_database_url(),
            _dir: None,
        }
    }

    pub async fn connect(&self) -> SharedStore {
        palisade_store::connect(&self.url).await.unwrap()
    }
}

/// Runs each contract function once per backend: `sqlite::<name>` and `postgres::<name>`.
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::TestDb::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::TestDb::postgres()).await;
                }
            )*
        }
    };
}

contract!(
    reports_its_backend,
    reconnects_to_existing_data,
    boundaries,
    deleting_a_boundary_takes_its_attachments_and_tokens,
    policies,
    exceptions,
    exception_installs,
    the_snapshot_is_every_boundary_s_own_lists,
    exceptions_change_the_policies_version,
    policy_if_match,
    policy_versions,
    policy_rollouts,
    apply_policies_is_all_or_nothing,
    apply_policies_in_order,
    create_resource_with_guards,
    a_guard_reads_the_policies_once_per_version,
    a_boundary_made_again_starts_at_another_version,
    create_resource_checks_before_the_guard,
    update_resource,
    unchanged_body_writes_nothing,
    delete_resource,
    pagination,
    plan_groups_and_their_pages,
    placed_workloads_and_statuses,
    changes_share_one_sequence,
    history_is_pruned_oldest_first_in_batches,
    history_keeps_each_newest_entry_and_reads_pages,
    tokens,
    bootstrap_admin_token,
    bootstrap_admin_token_concurrently,
    clusters_and_attachments,
    cluster_layout,
    guarded_creates_race_policy_changes,
    installation_id_is_made_once,
    the_encryption_key_check_is_made_once,
    the_last_admin_token_stays,
    ended_sessions_are_remembered_until_they_expire,
    namespaces,
    namespace_uids_gone_and_reserved_names,
    policy_statuses,
    audit_reports,
    changes_wake_subscribers,
    one_holder_per_cluster,
    a_fence_holds_while_its_cluster_is_held,
    a_deadline_passed_before_the_commit_writes_nothing,
    concurrent_edits_of_one_resource_lose_nothing,
    concurrent_creates_of_one_name_conflict,
    uploads_are_stored_from_chunks,
    uploads_count_against_their_boundarys_limit,
    unnamed_uploads_are_swept_and_named_ones_stay,
    a_boundarys_queue_holds_up_another_boundarys_write_by_one_turn,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_resource_writes_wait_for_policies_not_for_each_other() {
    guarded_writes::postgres_resource_writes_wait_for_policies_not_for_each_other(
        &TestDb::postgres().url,
    )
    .await;
}
