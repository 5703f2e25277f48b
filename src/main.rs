//! `kubectl-agent_day2`: serves `kubectl agent-day2` and `oc agent-day2`.
fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(agent_day2::run(std::env::args_os()))
}
