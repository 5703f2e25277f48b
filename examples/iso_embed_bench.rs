//! Benchmark driver for `benches/iso_embed.sh`: embeds an Ignition config and `fips=1` into a
//! CoreOS live ISO the way `add-nodes` does, and prints what it wrote.
//!
//! Usage: `iso_embed_bench BASE.iso OUT.iso CONFIG.ign [--sha256]`

use std::path::PathBuf;
use std::time::Instant;

use agent_day2::iso::embed::{ignition_archive, plan_file, write_node_iso, WriteOptions};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: iso_embed_bench BASE.iso OUT.iso CONFIG.ign [--sha256]");
        std::process::exit(2);
    }
    let (base, out, cfg) = (
        PathBuf::from(&args[0]),
        PathBuf::from(&args[1]),
        PathBuf::from(&args[2]),
    );
    let sha256 = args.iter().any(|a| a == "--sha256");
    let t = Instant::now();
    let run = || -> Result<(), agent_day2::iso::IsoError> {
        let plan = plan_file(&base)?;
        let cfg = std::fs::read(&cfg)
            .map_err(|e| agent_day2::iso::IsoError::Invalid(format!("{}: {e}", cfg.display())))?;
        let archive = ignition_archive(&cfg, &[])?;
        let kargs = if plan.karg_areas.is_empty() {
            None
        } else {
            plan.kargs_appending(&["fips=1".into()])?
        };
        let w = write_node_iso(
            &base,
            &out,
            &plan,
            &archive,
            kargs.as_deref(),
            WriteOptions { force: false, sha256 },
        )?;
        println!(
            "wrote {} ({} bytes, archive {} of {} bytes, sha256 {}) in {:.3} s",
            out.display(),
            w.size,
            archive.len(),
            plan.ignition_area.length,
            w.sha256.as_deref().unwrap_or("not computed"),
            t.elapsed().as_secs_f64()
        );
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
