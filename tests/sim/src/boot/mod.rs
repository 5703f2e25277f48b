//! `agent-day2-sim boot`: simulated day-2 machines booting the node ISO.

pub mod contract;
pub mod cpio;
pub mod csr;
pub mod embed;
pub mod ignition;
pub mod jwt;
pub mod stages;
