//! The simulated cluster's API side, served by the real control plane (issue 12).
//!
//! [`real`] starts etcd, kube-apiserver and kube-controller-manager and seeds them; [`up`] holds
//! `agent-day2-sim up`'s options and the parts it runs besides (file server, registry, cluster
//! 0's database); [`cp_kubelet`] plays the control-plane nodes' kubelets, a scheduler and a volume
//! provisioner; [`exec`] is the container stand-in behind pod exec; [`mcs`] the machine-config
//! server stand-in; [`authz`] the scenario's `forbidden` switches and the identities' intended
//! permissions; [`registry`] the permissive CRDs for kinds no public module defines.

pub mod authz;
pub mod client;
pub mod cp_kubelet;
pub mod exec;
pub mod mcs;
pub mod real;
pub mod registry;
pub mod up;
