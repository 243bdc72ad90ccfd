//! End-to-end tests of palisade-reconciler against real control planes (etcd + kube-apiserver
//! from `testenv/`, Kubernetes 1.30.14 and 1.37.2): the API server, not a CEL library, is the
//! oracle. One test binary, so each version's control plane is started once and shared;
//! every test works in its own boundaries and namespaces. Tests that need a differently
//! configured API server (no ValidatingAdmissionPolicy API, kube-controller-manager) start a
//! private one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly"
)]

mod support;

mod audit;
mod causes;
mod corpus;
mod drift;
mod exceptions;
mod fencing;
mod generated;
mod guard;
mod kwok;
mod lifecycle;
mod namespaces;
mod per_boundary;
mod platform;
mod preview;
mod probe;
mod rbac;
mod rbac_verbs;
mod reconcile;
mod rollout;
mod serve;
mod shared;
mod soak;
mod stages;
mod tenant;
mod workers;
mod workloads;
