//! `kubectl-agent_day2`: serves `kubectl agent-day2` and `oc agent-day2`.
fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `--version` alone prints the version, as kubectl plugins commonly do (`-v` stays
    // kubectl's verbosity); clap's own version flag is off so the word stays free elsewhere.
    if args.len() == 2 && args[1] == "--version" {
        return std::process::ExitCode::from(agent_day2::run([args[0].clone(), "version".into()]));
    }
    std::process::ExitCode::from(agent_day2::run(args))
}
