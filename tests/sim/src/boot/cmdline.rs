//! The kernel command line as its readers parse it: the kernel itself (`kernel_params`),
//! dracut's `getarg`, bash's words, `ignition-generator` and systemd. Shared by the boot
//! source checks ([`super::source`]) and the live PXE boot (`noderun::livepxe`); a leaf.

/// Platform names Ignition accepts for `--platform` (coreos/ignition `internal/providers/*`,
/// registered in `internal/register/providers.go`).
pub const IGNITION_PLATFORMS: &[&str] = &[
    "akamai",
    "aliyun",
    "applehv",
    "aws",
    "azure",
    "azurestack",
    "brightbox",
    "cloudstack",
    "digitalocean",
    "exoscale",
    "file",
    "gcp",
    "hetzner",
    "hyperv",
    "ibmcloud",
    "kubevirt",
    "metal",
    "nutanix",
    "nvidiabluefield",
    "openstack",
    "oraclecloud",
    "packet",
    "powervs",
    "proxmoxve",
    "qemu",
    "scaleway",
    "upcloud",
    "virtualbox",
    "vmware",
    "vultr",
    "zvm",
];

/// The kernel's `isspace` (lib/ctype.c): space, \t \n \v \f \r and the Latin-1 hard space 0xA0.
fn kernel_isspace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0xa0)
}

fn skip_spaces(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| kernel_isspace(**c)).count();
    &b[n..]
}

/// One step of the kernel's `next_arg` (lib/cmdline.c; dracut's `dracut-util` carries a copy):
/// `"` groups blanks into a word and cannot be escaped; a value's surrounding quotes are
/// dropped, as is the closing quote of a word that starts with one. Returns (param, value,
/// rest after the blanks that follow).
fn next_arg(args: &[u8]) -> (String, Option<String>, &[u8]) {
    let (a, quoted) = match args.first() {
        Some(b'"') => (&args[1..], true),
        _ => (args, false),
    };
    let mut in_quote = quoted;
    let mut equals = 0usize;
    let mut i = 0usize;
    while i < a.len() && a[i] != 0 {
        if kernel_isspace(a[i]) && !in_quote {
            break;
        }
        if equals == 0 && a[i] == b'=' {
            equals = i;
        }
        if a[i] == b'"' {
            in_quote = !in_quote;
        }
        i += 1;
    }
    let last_is_quote = i > 0 && a[i - 1] == b'"';
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let (param, val) = if equals == 0 {
        let end = if quoted && last_is_quote { i - 1 } else { i };
        (s(&a[..end]), None)
    } else {
        let mut start = equals + 1;
        let mut end = i;
        let mut cleared = false;
        if start < i && a[start] == b'"' {
            start += 1;
            if last_is_quote {
                end = i - 1;
                cleared = true;
            }
        }
        if quoted && !cleared && last_is_quote {
            end = i - 1;
        }
        (s(&a[..equals]), Some(s(&a[start.min(end)..end])))
    };
    let next = if i < a.len() { &a[i + 1..] } else { &a[i..] };
    (param, val, skip_spaces(next))
}

/// Every parameter of `cmdline` as the kernel's `next_arg` splits it, in order (including
/// `--` and what follows it).
pub fn kernel_params(cmdline: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut rest = skip_spaces(cmdline.as_bytes());
    while !rest.is_empty() && rest[0] != 0 {
        let (p, v, r) = next_arg(rest);
        out.push((p, v));
        rest = r;
    }
    out
}

/// dracut's `getarg KEY=` (`dracut-getarg`, dracut `src/util/util.c`): the last occurrence of
/// `key` decides; `Some(value)`, `Some("")` for a bare flag (found, prints nothing), `None` when
/// absent. Names compare exactly; it reads past `--`.
pub fn dracut_getarg(cmdline: &str, key: &str) -> Option<String> {
    let mut found = None;
    for (p, v) in kernel_params(cmdline) {
        if p == key {
            found = Some(v.unwrap_or_default());
        }
    }
    found
}

/// The words bash makes of `$(</proc/cmdline)` (default IFS: space, tab, newline; quotes are
/// not special).
pub fn bash_words(cmdline: &str) -> Vec<String> {
    cmdline
        .split([' ', '\t', '\n'])
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect()
}

/// `ignition-generator`'s `cmdline_arg NAME DEFAULT`: for each word, `${arg%%=*}` == NAME
/// sets the value to `${arg#*=}` (the whole word when it has no `=`); the last one wins.
pub fn ignition_cmdline_arg(cmdline: &str, name: &str, default: &str) -> String {
    let mut value = default.to_string();
    for w in bash_words(cmdline) {
        let key = w.split('=').next().unwrap_or("");
        if key == name {
            value = w.split_once('=').map(|(_, v)| v.to_string()).unwrap_or(w.clone());
        }
    }
    value
}

/// `ignition-generator`'s `cmdline_bool`: false for "", 0, no, off.
pub fn ignition_cmdline_bool(cmdline: &str, name: &str, default: &str) -> bool {
    !matches!(
        ignition_cmdline_arg(cmdline, name, default).as_str(),
        "" | "0" | "no" | "off"
    )
}

/// The kernel's `simple_strtol(s, NULL, 0)`: optional `-`, base from the prefix (`0x` 16, `0`
/// 8, else 10), digits up to the first that does not belong; no digits give 0.
pub fn simple_strtol(s: &str) -> i64 {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let b = s.as_bytes();
    let (base, digits) =
        if (s.starts_with("0x") || s.starts_with("0X")) && b.get(2).is_some_and(|c| c.is_ascii_hexdigit()) {
            (16, &s[2..])
        } else if s.starts_with('0') {
            (8, s)
        } else {
            (10, s)
        };
    let mut v: i64 = 0;
    for c in digits.chars() {
        match c.to_digit(base) {
            Some(d) => v = v.wrapping_mul(base as i64).wrapping_add(d as i64),
            None => break,
        }
    }
    if neg {
        -v
    } else {
        v
    }
}

/// FIPS mode as the kernel sets it from the command line: each `fips=VAL` before `--` calls
/// the `__setup("fips=")` handler (`fips_enabled = !!simple_strtol(VAL, NULL, 0)`), so the last
/// one wins; a bare `fips` matches no handler. None: no `fips=`.
pub fn kernel_fips(cmdline: &str) -> Option<bool> {
    let mut fips = None;
    for (p, v) in kernel_params(cmdline) {
        if p == "--" && v.is_none() {
            break;
        }
        if p == "fips" {
            if let Some(v) = v {
                fips = Some(simple_strtol(&v) != 0);
            }
        }
    }
    fips
}

/// systemd's `ConditionKernelCommandLine=` word test for a name without `=`: some word (split
/// with quotes removed, as `proc_cmdline_strv` does) is `name` or starts with `name=`.
pub fn systemd_cmdline_has(cmdline: &str, name: &str) -> bool {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    for c in cmdline.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words.iter().any(|w| {
        w.strip_prefix(name)
            .is_some_and(|r| r.is_empty() || r.starts_with('='))
    })
}
