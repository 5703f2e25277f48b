//! ISO9660 level-1 identifiers (8.3, d-characters) for long names.

fn dchars(s: &str) -> String {
    s.chars()
        .map(|c| {
            let u = c.to_ascii_uppercase();
            if u.is_ascii_uppercase() || u.is_ascii_digit() || u == '_' {
                u
            } else {
                '_'
            }
        })
        .collect()
}

/// The 8.3 file identifier genisoimage records for `name` (without the `;1` version):
/// uppercase, characters outside `A-Z0-9_` replaced by `_`, the part before the last dot cut
/// to 8 characters and the part after it to 3, always with the dot.
/// `igninfo.json` → `IGNINFO.JSO`, `vmlinuz` → `VMLINUZ.`, `config.gz` → `CONFIG.GZ`.
pub fn iso_file_name(name: &str) -> String {
    let (base, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i + 1..]),
        _ => (name, ""),
    };
    let base: String = dchars(base).chars().take(8).collect();
    let ext: String = dchars(ext).chars().take(3).collect();
    format!("{base}.{ext}")
}

/// The level-1 directory identifier for `name`: uppercase d-characters, at most 8.
/// `pxeboot` → `PXEBOOT`, `EFI` → `EFI`.
pub fn iso_dir_name(name: &str) -> String {
    dchars(name).chars().take(8).collect()
}

/// A recorded identifier with its `;version` and a trailing `.` removed, as coreos-installer
/// and the Linux kernel present it: `VMLINUZ.;1` → `VMLINUZ`.
pub(crate) fn strip_version(id: &str) -> &str {
    let id = match id.rfind(';') {
        Some(i) => &id[..i],
        None => id,
    };
    id.strip_suffix('.').unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coreos_names() {
        assert_eq!(iso_file_name("igninfo.json"), "IGNINFO.JSO");
        assert_eq!(iso_file_name("kargs.json"), "KARGS.JSO");
        assert_eq!(iso_file_name("ignition.img"), "IGNITION.IMG");
        assert_eq!(iso_file_name("vmlinuz"), "VMLINUZ.");
        assert_eq!(iso_file_name("features.json"), "FEATURES.JSO");
        assert_eq!(iso_file_name("rhcos-4.iso"), "RHCOS_4.ISO");
        assert_eq!(iso_file_name(".cmdline"), "_CMDLINE.");
        assert_eq!(iso_dir_name("pxeboot"), "PXEBOOT");
        assert_eq!(iso_dir_name("a.b"), "A_B");
        assert_eq!(strip_version("VMLINUZ.;1"), "VMLINUZ");
        assert_eq!(strip_version("IGNINFO.JSO;1"), "IGNINFO.JSO");
        assert_eq!(strip_version("COREOS"), "COREOS");
    }
}
