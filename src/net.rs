//! Address arithmetic (a leaf: imports nothing of this crate).

use std::net::IpAddr;

/// Whether `ip` is inside `net/bits` (IPv4 or IPv6; families must match).
pub fn cidr_contains(net: IpAddr, bits: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) if bits <= 32 => {
            let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) if bits <= 128 => {
            let mask = if bits == 0 { 0 } else { u128::MAX << (128 - bits) };
            u128::from(n) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

/// Why `ip` cannot be a host's address, if it cannot: the unspecified address (`0.0.0.0`,
/// `::`), a multicast group, or the IPv4 limited broadcast. For addresses given on the command
/// line (`--node NAME=IP`, `--ip-addresses`): monitor and approve poll the host there and check
/// its serving certificate's IP SANs against it.
pub fn not_a_host_address(ip: IpAddr) -> Option<&'static str> {
    if ip.is_unspecified() {
        Some("the unspecified address, not a host's")
    } else if ip.is_multicast() {
        Some("a multicast group, not a host's address")
    } else if matches!(ip, IpAddr::V4(v4) if v4.is_broadcast()) {
        Some("the broadcast address, not a host's")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_addresses_are_not_unspecified_multicast_or_broadcast() {
        for bad in ["0.0.0.0", "::", "224.0.0.1", "ff02::1", "255.255.255.255"] {
            assert!(not_a_host_address(bad.parse().unwrap()).is_some(), "{bad}");
        }
        for good in ["192.168.111.30", "fd2e:6f44:5dd8:c956::14", "127.0.0.2"] {
            assert_eq!(not_a_host_address(good.parse().unwrap()), None, "{good}");
        }
    }
}
