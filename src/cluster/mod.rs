//! What agent-day2 reads from the cluster: the read-only cluster model.
//!
//! [`ClusterObjects`] holds the raw objects (docs/design.md "What the cluster tells us"), as JSON;
//! [`ClusterModel::from_objects`] turns them into the facts add-nodes, approve and info use,
//! purely (no I/O, unit-tested on fixtures). [`fetch`] (`read.rs`) is the thin async layer that reads the
//! objects with the user's own credentials.

pub use facts::{cluster_name_and_domain, major_minor, NameAndDomain};
pub use model::*;
pub use objects::ClusterObjects;
pub use read::{fetch, fetch_all};

mod facts;
mod model;
mod objects;
mod read;
