//! Durations as kubectl takes them (a leaf: imports nothing of this crate).

use std::time::Duration;

/// Parses kubectl's `--request-timeout`: a Go duration (`1h2m3s`, `500ms`) or a bare number of
/// seconds. `0` means no limit (`None`).
pub fn parse_duration(s: &str) -> std::result::Result<Option<Duration>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    // All digits but past u64: a bare number of seconds, far out of range (not a missing unit).
    if s.bytes().all(|b| b.is_ascii_digit()) && s.parse::<u64>().is_err() {
        return Err(out_of_range());
    }
    if let Ok(secs) = s.parse::<u64>() {
        let d = Duration::from_secs(secs);
        if d > MAX_DURATION {
            return Err(out_of_range());
        }
        return Ok((secs > 0).then_some(d));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err("expected a number, e.g. 30s, 1m, 1h".into());
        }
        let num: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("bad number {:?}", &rest[..num_len]))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err("missing unit (ns, us, ms, s, m, h)".into()),
            u => return Err(format!("unknown unit {u:?} (use ns, us, ms, s, m, h)")),
        };
        rest = &rest[unit_len..];
        // Checked: a user's `9999999999999999h` must be an error, not a panic in
        // Duration::from_secs_f64 or in the addition.
        total = Duration::try_from_secs_f64(num * factor)
            .ok()
            .and_then(|d| total.checked_add(d))
            .filter(|t| *t <= MAX_DURATION)
            .ok_or_else(out_of_range)?;
    }
    Ok((!total.is_zero()).then_some(total))
}

/// The longest duration accepted: Go's `time.Duration` is an int64 of nanoseconds, so kubectl
/// refuses anything above 2562047h47m16.854775807s; staying below also keeps `Instant + d` from
/// overflowing.
pub const MAX_DURATION: Duration = Duration::from_nanos(i64::MAX as u64);

/// [`parse_duration`] of the value of flag `flag`, its error naming the flag and the value as
/// given (`--timeout "10x": expected a number, e.g. 30s, 1m, 1h`): the one wording of a bad
/// duration flag, which callers wrap in their usage error (exit 2). What zero means is the
/// caller's (`None` here).
pub fn parse_flag(flag: &str, value: &str) -> std::result::Result<Option<Duration>, String> {
    parse_duration(value).map_err(|e| format!("{flag} {value:?}: {e}"))
}

fn out_of_range() -> String {
    "out of range: at most 2562047h (the longest duration kubectl accepts), e.g. 30s, 48h".into()
}
