//! kubectl's connection flags and the one place that turns them into a `kube::Client`.
//!
//! Rules copied from client-go (`clientcmd` loading rules, `genericclioptions.ConfigFlags`):
//! `--kubeconfig FILE` reads that file only; otherwise `KUBECONFIG` (colon-separated, merged,
//! first file to set a value wins, missing files skipped); otherwise `~/.kube/config`.
//! `--context` picks the context (default: current-context); `--cluster`/`--user` replace that
//! context's cluster/user; the other flags override single fields. Proxy: the cluster's
//! `proxy-url`, else `HTTPS_PROXY`/`HTTP_PROXY` unless `NO_PROXY` matches the server (Go's
//! `http.ProxyFromEnvironment`). No other module reads kubeconfig files.

use crate::duration::parse_flag;
use std::path::{Path, PathBuf};

use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};
use secrecy::SecretString;

use crate::error::{Error, Result};
pub use crate::kube::KubeTarget;

/// kubectl's global connection flags (cli-runtime `ConfigFlags`). Every field is raw, as typed;
/// [`KubeFlags::resolve`] validates them once.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Kubernetes connection flags (as kubectl's)")]
pub struct KubeFlags {
    /// Path to the kubeconfig file to use (that file only; default: $KUBECONFIG, then
    /// ~/.kube/config), e.g. --kubeconfig ~/ostest/auth/kubeconfig.
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The name of the kubeconfig context to use, e.g. --context admin.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The name of the kubeconfig cluster to use, e.g. --cluster ostest.
    #[arg(long, global = true, value_name = "NAME")]
    pub cluster: Option<String>,
    /// The name of the kubeconfig user to use, e.g. --user admin.
    #[arg(long, global = true, value_name = "NAME")]
    pub user: Option<String>,
    /// The namespace scope for this request, e.g. -n ostest: where `migrate import`, `wait`
    /// and `status` put and look for the migrated objects (default: the cluster's name); the
    /// other commands keep their records in openshift-agent-day2 whatever this says.
    #[arg(short = 'n', long, global = true, value_name = "NS")]
    pub namespace: Option<String>,
    /// The address and port of the Kubernetes API server, e.g. -s https://api.ostest.example.com:6443.
    #[arg(short = 's', long, global = true, value_name = "URL")]
    pub server: Option<String>,
    /// Bearer token for authentication to the API server, e.g. --token "$(oc whoami -t)".
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Username to impersonate for the operation, e.g. --as system:admin.
    #[arg(long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Group to impersonate for the operation (repeat for several), e.g. --as-group system:masters.
    #[arg(long = "as-group", global = true, value_name = "GROUP")]
    pub as_group: Vec<String>,
    /// UID to impersonate for the operation, e.g. --as-uid 6f1b2c3d.
    #[arg(long = "as-uid", global = true, value_name = "UID")]
    pub as_uid: Option<String>,
    /// Path to a cert file for the certificate authority, e.g. --certificate-authority ca.crt.
    #[arg(long = "certificate-authority", global = true, value_name = "FILE")]
    pub certificate_authority: Option<PathBuf>,
    /// Path to a client certificate file for TLS, e.g. --client-certificate admin.crt.
    #[arg(long = "client-certificate", global = true, value_name = "FILE")]
    pub client_certificate: Option<PathBuf>,
    /// Path to a client key file for TLS, e.g. --client-key admin.key.
    #[arg(long = "client-key", global = true, value_name = "FILE")]
    pub client_key: Option<PathBuf>,
    /// If given, the server's certificate will not be checked for validity. This will make your
    /// HTTPS connections insecure.
    #[arg(long = "insecure-skip-tls-verify", global = true)]
    pub insecure_skip_tls_verify: bool,
    /// Server name to use for server certificate validation (default: the server's host name),
    /// e.g. --tls-server-name api.ostest.example.com.
    #[arg(long = "tls-server-name", global = true, value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// How long to wait for a single server request: 0 (no limit), or a duration such as 30s,
    /// 1m, 1h30m (a bare number is seconds), e.g. --request-timeout 1m.
    #[arg(long = "request-timeout", global = true, value_name = "DURATION")]
    pub request_timeout: Option<String>,
}

impl KubeFlags {
    /// A resolver of these flags for [`crate::kube::Connection`]: each call reads the
    /// kubeconfig and the environment again ([`KubeFlags::resolve`]).
    pub fn resolver(&self) -> crate::kube::Resolve {
        let flags = self.clone();
        std::sync::Arc::new(move || {
            let f = flags.clone();
            Box::pin(async move { f.resolve().await })
        })
    }

    /// Loads the kubeconfig by client-go's rules, applies the flags, and builds the client.
    /// Nothing is sent to the server yet. Empty flag values count as unset, as in kubectl
    /// (`--context=`, `--token ''`).
    ///
    /// Errors: [`Error::Kubeconfig`]/[`Error::KubeconfigEntry`] (exit 4) naming the file,
    /// context, cluster or user entry at fault (also a token or impersonation value from the
    /// kubeconfig that cannot be sent as an HTTP header); [`Error::Usage`] (exit 2) for a
    /// malformed `--request-timeout` or `--server`, `--as-group`/`--as-uid` without `--as`, or
    /// a `--token`/`--as*` value that cannot be sent as an HTTP header (a control character).
    pub async fn resolve(&self) -> Result<KubeTarget> {
        let flags = self.normalized();
        let config = flags.to_config_inner().await?;
        let server = config.cluster_url.to_string();
        let proxy = config
            .proxy_url
            .as_ref()
            .map(|u| crate::kube::errors::without_password(&u.to_string()));
        let namespace = config.default_namespace.clone();
        let client = kube::Client::try_from(config).map_err(|e| Error::Kubeconfig {
            message: match &e {
                kube::Error::Auth(a) => format!(
                    "cannot build a client for {server}: {}",
                    crate::kube::errors::auth_failure(a)
                ),
                other => format!("cannot build a client for {server}: {other}"),
            },
        })?;
        let kc = flags.load_kubeconfig().ok().flatten();
        let context = flags
            .context
            .clone()
            .or_else(|| kc.as_ref().and_then(|k| k.current_context.clone()));
        let user_hint = flags.as_user.clone().or_else(|| flags.user.clone()).or_else(|| {
            let kc = kc.as_ref()?;
            let ctx = context.as_ref()?;
            let named = kc.contexts.iter().find(|c| &c.name == ctx)?;
            named.context.as_ref().and_then(|c| c.user.clone())
        });
        let request_timeout = match &flags.request_timeout {
            Some(t) => parse_flag("--request-timeout", t).map_err(Error::Usage)?,
            None => None,
        };
        Ok(KubeTarget {
            client,
            server,
            namespace,
            context,
            user_hint,
            proxy,
            request_timeout,
            request_timeout_given: flags.request_timeout.is_some(),
            deadline: request_timeout,
        })
    }

    /// The flags with empty values turned into "unset" (kubectl treats `--context=` and
    /// `--token ''` as not given).
    fn normalized(&self) -> KubeFlags {
        let ne = |o: &Option<String>| o.clone().filter(|v| !v.is_empty());
        let np = |o: &Option<PathBuf>| o.clone().filter(|v| !v.as_os_str().is_empty());
        KubeFlags {
            kubeconfig: np(&self.kubeconfig),
            context: ne(&self.context),
            cluster: ne(&self.cluster),
            user: ne(&self.user),
            namespace: ne(&self.namespace),
            server: ne(&self.server),
            token: ne(&self.token),
            as_user: ne(&self.as_user),
            as_group: self.as_group.iter().filter(|g| !g.is_empty()).cloned().collect(),
            as_uid: ne(&self.as_uid),
            certificate_authority: np(&self.certificate_authority),
            client_certificate: np(&self.client_certificate),
            client_key: np(&self.client_key),
            insecure_skip_tls_verify: self.insecure_skip_tls_verify,
            tls_server_name: ne(&self.tls_server_name),
            request_timeout: ne(&self.request_timeout),
        }
    }

    /// The kubeconfig by client-go's precedence; `Ok(None)` when none exists at all.
    /// `KUBECONFIG` naming only files that do not exist is an error naming them (client-go
    /// then uses an empty config and fails later with a vaguer message).
    fn load_kubeconfig(&self) -> Result<Option<Kubeconfig>> {
        if let Some(path) = &self.kubeconfig {
            // --kubeconfig: that file only, and it must exist (client-go errors too).
            return read_kubeconfig(path, "--kubeconfig").map(Some);
        }
        if let Some(value) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            let mut merged: Option<Kubeconfig> = None;
            let mut skipped = Vec::new();
            for p in std::env::split_paths(&value).filter(|p| !p.as_os_str().is_empty()) {
                // client-go skips KUBECONFIG entries that do not exist.
                if !p.exists() {
                    tracing::debug!(path = %p.display(), "KUBECONFIG entry does not exist, skipped");
                    skipped.push(p.display().to_string());
                    continue;
                }
                let kc = read_kubeconfig(&p, "KUBECONFIG")?;
                merged = Some(match merged {
                    None => kc,
                    Some(m) => m.merge(kc).map_err(|e| Error::Kubeconfig {
                        message: format!("cannot merge kubeconfig {} (from KUBECONFIG): {e}", p.display()),
                    })?,
                });
            }
            if merged.is_some() {
                return Ok(merged);
            }
            if self.server.is_none() {
                return Err(Error::KubeconfigEntry {
                    message: format!("KUBECONFIG names no existing file: {}", skipped.join(", ")),
                    hint: "fix KUBECONFIG (colon-separated kubeconfig paths), unset it to use \
                           ~/.kube/config, or pass --kubeconfig FILE or --server"
                        .into(),
                });
            }
            return Ok(None);
        }
        let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
            return Ok(None);
        };
        let path = home.join(".kube").join("config");
        if !path.exists() {
            return Ok(None);
        }
        read_kubeconfig(&path, "~/.kube/config").map(Some)
    }

    /// Checks the names the flags and the context pick against the kubeconfig, with
    /// kubectl's messages: `--user`, `--cluster`, `--context` and the context's cluster must
    /// exist (kube-rs would silently fall back to an anonymous user).
    fn check_entries(&self, kc: &Kubeconfig) -> Result<()> {
        let names = |v: Vec<&str>| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        let ctx_name = self
            .context
            .clone()
            .or_else(|| kc.current_context.clone().filter(|c| !c.is_empty()));
        let ctx = match &ctx_name {
            Some(n) => match kc.contexts.iter().find(|c| &c.name == n) {
                Some(c) => c.context.clone(),
                None if self.context.is_some() => {
                    return Err(Error::KubeconfigEntry {
                        message: format!(
                            "context {n:?} not found in the kubeconfig (contexts: {})",
                            names(kc.contexts.iter().map(|c| c.name.as_str()).collect())
                        ),
                        hint: "pick one of those with --context, or see `kubectl config get-contexts`".into(),
                    })
                }
                None => {
                    return Err(Error::KubeconfigEntry {
                        message: format!(
                            "current-context {n:?} is not a context of the kubeconfig (contexts: {})",
                            names(kc.contexts.iter().map(|c| c.name.as_str()).collect())
                        ),
                        hint: "pass --context NAME, or fix it with `kubectl config use-context NAME`".into(),
                    })
                }
            },
            None => None,
        };
        if let Some(u) = &self.user {
            if !kc.auth_infos.iter().any(|a| &a.name == u) {
                return Err(Error::KubeconfigEntry {
                    message: format!(
                        "auth info {u:?} does not exist (users: {})",
                        names(kc.auth_infos.iter().map(|a| a.name.as_str()).collect())
                    ),
                    hint: "pick one of those with --user, or leave --user out to use the context's".into(),
                });
            }
        } else if let (Some(c), Some(n)) = (&ctx, &ctx_name) {
            if let Some(u) = c.user.as_ref().filter(|u| !u.is_empty()) {
                if !kc.auth_infos.iter().any(|a| &a.name == u) {
                    return Err(Error::KubeconfigEntry {
                        message: format!("context {n:?} names user {u:?}, which is not in the kubeconfig"),
                        hint: "fix the context (`kubectl config set-context`), or pass --user NAME".into(),
                    });
                }
            }
        }
        if let Some(cl) = &self.cluster {
            if !kc.clusters.iter().any(|c| &c.name == cl) {
                return Err(Error::KubeconfigEntry {
                    message: format!(
                        "no server found for cluster {cl:?} (clusters: {})",
                        names(kc.clusters.iter().map(|c| c.name.as_str()).collect())
                    ),
                    hint: "pick one of those with --cluster, or pass --server URL".into(),
                });
            }
        } else if let (Some(c), Some(n)) = (&ctx, &ctx_name) {
            if !c.cluster.is_empty()
                && !kc.clusters.iter().any(|x| x.name == c.cluster)
                && self.server.is_none()
            {
                return Err(Error::KubeconfigEntry {
                    message: format!(
                        "context {n:?} names cluster {:?}, which is not in the kubeconfig (clusters: {})",
                        c.cluster,
                        names(kc.clusters.iter().map(|c| c.name.as_str()).collect())
                    ),
                    hint: "fix the context (`kubectl config set-context`), or pass --cluster NAME or --server URL".into(),
                });
            }
        }
        Ok(())
    }

    /// The name of the kubeconfig user entry in use (for messages).
    fn user_entry(&self, kc: Option<&Kubeconfig>) -> Option<String> {
        self.user.clone().or_else(|| {
            let kc = kc?;
            let ctx = self.context.clone().or_else(|| kc.current_context.clone())?;
            kc.contexts
                .iter()
                .find(|c| c.name == ctx)?
                .context
                .as_ref()?
                .user
                .clone()
        })
    }

    /// Builds the `kube::Config`: kubeconfig selection, then flag overrides, then the proxy.
    /// Errors as [`KubeFlags::resolve`].
    pub async fn to_config(&self) -> Result<kube::Config> {
        self.normalized().to_config_inner().await
    }

    async fn to_config_inner(&self) -> Result<kube::Config> {
        if self.as_user.is_none() && (!self.as_group.is_empty() || self.as_uid.is_some()) {
            // client-go's transport refuses this too (same wording).
            return Err(Error::Usage(format!(
                "requesting uid, groups or user-extra for {} without impersonating a user: add --as USER",
                match (&self.as_uid, self.as_group.first()) {
                    (Some(u), _) => format!("--as-uid {u:?}"),
                    (None, Some(g)) => format!("--as-group {g:?}"),
                    (None, None) => String::new(),
                }
            )));
        }
        for (flag, v) in [
            ("--token", self.token.as_deref()),
            ("--as", self.as_user.as_deref()),
            ("--as-uid", self.as_uid.as_deref()),
        ]
        .into_iter()
        .chain(self.as_group.iter().map(|g| ("--as-group", Some(g.as_str()))))
        {
            if let Some(v) = v {
                if let Err(what) = header_safe(v) {
                    return Err(Error::Usage(format!(
                        "{flag}: the value {what}, so it cannot be sent in an HTTP header{}",
                        if flag == "--token" {
                            "; copy the token again (e.g. from `oc whoami -t`), or log in with `oc login`"
                        } else {
                            ""
                        }
                    )));
                }
            }
        }
        let server_flag = match &self.server {
            Some(s) => Some(parse_server(s)?),
            None => None,
        };
        let timeout = match &self.request_timeout {
            Some(t) => parse_flag("--request-timeout", t).map_err(Error::Usage)?,
            None => None,
        };
        let mut kc = self.load_kubeconfig()?;
        if let Some(k) = &mut kc {
            self.check_entries(k)?;
            let ctx_name = self
                .context
                .clone()
                .or_else(|| k.current_context.clone().filter(|c| !c.is_empty()));
            let ctx = ctx_name
                .and_then(|n| k.contexts.iter().find(|c| c.name == n))
                .and_then(|c| c.context.clone());
            let cluster = self
                .cluster
                .clone()
                .or_else(|| ctx.as_ref().map(|c| c.cluster.clone()));
            let user = self
                .user
                .clone()
                .or_else(|| ctx.as_ref().and_then(|c| c.user.clone()));
            preload_referenced_files(k, cluster.as_deref(), user.as_deref())?;
        }
        let has_contexts = kc.as_ref().is_some_and(|k| !k.contexts.is_empty());
        let kc_proxy = kc.as_ref().and_then(|k| self.selected_cluster_proxy(k));

        let mut config = if has_contexts || self.context.is_some() {
            let kc = kc.clone().unwrap_or_default();
            let opts = KubeConfigOptions {
                context: self.context.clone(),
                cluster: self.cluster.clone(),
                user: self.user.clone(),
            };
            match kube::Config::from_custom_kubeconfig(kc, &opts).await {
                Ok(c) => c,
                // client-go: --server alone is enough when the kubeconfig has no usable context.
                Err(_) if server_flag.is_some() && self.context.is_none() => {
                    kube::Config::new(server_flag.clone().unwrap())
                }
                Err(e) => {
                    let what = match (&self.context, &self.kubeconfig) {
                        (Some(c), _) => format!("context {c:?}"),
                        (None, Some(p)) => format!("kubeconfig {}", p.display()),
                        (None, None) => "the current context".to_string(),
                    };
                    return Err(Error::Kubeconfig {
                        message: format!("cannot use {what}: {e}"),
                    });
                }
            }
        } else if let Some(url) = server_flag.clone() {
            kube::Config::new(url)
        } else {
            return Err(Error::Kubeconfig {
                message: match &self.kubeconfig {
                    Some(p) => format!(
                        "kubeconfig {} has no context and no --server was given",
                        p.display()
                    ),
                    None => "no kubeconfig found ($KUBECONFIG, ~/.kube/config) and no --server given".into(),
                },
            });
        };

        if let Some(url) = server_flag {
            config.cluster_url = url;
        }
        if let Some(ns) = &self.namespace {
            config.default_namespace = ns.clone();
        }
        if let Some(ca) = &self.certificate_authority {
            config.root_cert = Some(read_ca_file(ca)?);
        }
        if self.insecure_skip_tls_verify {
            if self.certificate_authority.is_some() {
                return Err(Error::Usage(
                    "--insecure-skip-tls-verify and --certificate-authority cannot be used together".into(),
                ));
            }
            config.accept_invalid_certs = true;
            config.root_cert = None;
        }
        if let Some(name) = &self.tls_server_name {
            config.tls_server_name = Some(name.clone());
        }
        if let Some(token) = &self.token {
            // An explicit token replaces the context's other bearer/basic/exec credentials. A
            // client certificate stays, as in kubectl: client-go sends both and
            // kube-apiserver's authenticator takes the first that succeeds.
            config.auth_info.token = Some(SecretString::from(token.clone()));
            config.auth_info.token_file = None;
            config.auth_info.exec = None;
            config.auth_info.auth_provider = None;
            config.auth_info.username = None;
            config.auth_info.password = None;
        }
        // Read here with the 1 MiB cap (crate::files) rather than left to kube's unbounded read.
        if let Some(cert) = &self.client_certificate {
            let data = read_key_flag(cert, "--client-certificate")?;
            config.auth_info.client_certificate = None;
            config.auth_info.client_certificate_data = Some(data);
        }
        if let Some(key) = &self.client_key {
            let data = read_key_flag(key, "--client-key")?;
            config.auth_info.client_key = None;
            config.auth_info.client_key_data = Some(SecretString::from(data));
        }
        if let Some(user) = &self.as_user {
            config.auth_info.impersonate = Some(user.clone());
        }
        if !self.as_group.is_empty() {
            config.auth_info.impersonate_groups = Some(self.as_group.clone());
        }
        if let Some(uid) = &self.as_uid {
            config.auth_info.impersonate_uid = Some(uid.clone());
        }
        if let Some(t) = timeout {
            config.read_timeout = Some(t);
            config.connect_timeout = Some(t);
            config.write_timeout = Some(t);
        }
        // Values from the kubeconfig go into headers too; a control character there would
        // panic deep in the HTTP stack (tower-http's add_authorization), so refuse it here.
        {
            use secrecy::ExposeSecret;
            let entry = || {
                self.user_entry(kc.as_ref())
                    .map(|u| format!("kubeconfig user {u:?}"))
                    .unwrap_or_else(|| "the kubeconfig user".into())
            };
            let mut checks: Vec<(&str, String)> = Vec::new();
            if self.token.is_none() {
                if let Some(t) = &config.auth_info.token {
                    checks.push(("token", t.expose_secret().to_string()));
                }
            }
            if self.as_user.is_none() {
                if let Some(a) = &config.auth_info.impersonate {
                    checks.push(("as", a.clone()));
                }
            }
            if self.as_group.is_empty() {
                for g in config.auth_info.impersonate_groups.iter().flatten() {
                    checks.push(("as-groups", g.clone()));
                }
            }
            for (field, v) in checks {
                if let Err(what) = header_safe(&v) {
                    return Err(Error::KubeconfigEntry {
                        message: format!(
                            "{}: field {field:?}: the value {what}, so it cannot be sent in an HTTP header",
                            entry()
                        ),
                        hint: if field == "token" {
                            "copy the token again into the kubeconfig, or log in again with `oc login`".into()
                        } else {
                            "fix that field of the kubeconfig user entry".into()
                        },
                    });
                }
            }
        }
        config.proxy_url = select_proxy(&config.cluster_url, kc_proxy.as_deref(), &|k| {
            std::env::var(k).ok()
        })?;
        Ok(config)
    }

    /// `proxy-url` of the cluster the flags select, if set.
    fn selected_cluster_proxy(&self, kc: &Kubeconfig) -> Option<String> {
        let ctx_name = self.context.clone().or_else(|| kc.current_context.clone());
        let cluster_name = self.cluster.clone().or_else(|| {
            let ctx = kc.contexts.iter().find(|c| Some(&c.name) == ctx_name.as_ref())?;
            ctx.context.as_ref().map(|c| c.cluster.clone())
        })?;
        let named = kc.clusters.iter().find(|c| c.name == cluster_name)?;
        named
            .cluster
            .as_ref()?
            .proxy_url
            .clone()
            .filter(|p| !p.is_empty())
    }
}

/// Reads one kubeconfig file, naming it once in the error (kube's own error repeats it).
fn read_kubeconfig(path: &Path, from: &str) -> Result<Kubeconfig> {
    let text = crate::files::read_input_file(path, crate::files::MAX_KUBECONFIG, from).map_err(|e| {
        Error::KubeconfigEntry {
            message: format!(
                "cannot read kubeconfig {} (from {from}): {}",
                path.display(),
                e.reason
            ),
            hint: "check the path, or log in with `oc login` to create ~/.kube/config".into(),
        }
    })?;
    let mut kc = Kubeconfig::from_yaml(&text).map_err(|e| Error::KubeconfigEntry {
        message: format!(
            "kubeconfig {} (from {from}) is not a valid kubeconfig: {}",
            path.display(),
            parse_error(&e)
        ),
        hint: format!("fix the YAML there, or give {from} another kubeconfig"),
    })?;
    absolutize_referenced_files(&mut kc, path);
    Ok(kc)
}

/// Why kube could not parse a kubeconfig, in one line without the file's text: the parser
/// quotes the lines around the fault (a token, a client key) and gives its own advice ("set
/// DuplicateKeyPolicy in Options"); neither may reach the user. The parser's reason and
/// position as for a nodes-config ([`crate::nodes_config::yaml::error_text`]), quoted values
/// replaced by `"…"`.
fn parse_error(e: &kube::config::KubeconfigError) -> String {
    let why = match e {
        kube::config::KubeconfigError::Parse(p) => crate::nodes_config::yaml::error_text(p),
        other => other.to_string().lines().next().unwrap_or("").to_string(),
    };
    let mut out = String::new();
    let mut quoted = false;
    for c in why.chars() {
        if c == '"' {
            if !quoted {
                out.push_str("\"…\"");
            }
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
        }
    }
    out
}

/// Makes the file paths a kubeconfig names (`certificate-authority`, `client-certificate`,
/// `client-key`, `tokenFile`) absolute, relative to the kubeconfig's directory as in client-go
/// (kube's `from_yaml` leaves them relative to the working directory). Reads nothing: only the
/// entries in use are read, by [`preload_referenced_files`].
fn absolutize_referenced_files(kc: &mut Kubeconfig, kubeconfig: &Path) {
    let dir = kubeconfig.parent().unwrap_or(Path::new("."));
    let abs = |p: &mut String| {
        if !Path::new(p.as_str()).is_absolute() {
            *p = dir.join(&*p).display().to_string();
        }
    };
    for c in kc.clusters.iter_mut().filter_map(|n| n.cluster.as_mut()) {
        c.certificate_authority.as_mut().map(abs);
    }
    for a in kc.auth_infos.iter_mut().filter_map(|n| n.auth_info.as_mut()) {
        a.client_certificate.as_mut().map(abs);
        a.client_key.as_mut().map(abs);
        a.token_file.as_mut().map(abs);
    }
}

/// Reads the files that the cluster and user entries in use (`cluster`, `user`: names from
/// the context or the flags) name (`certificate-authority`, `client-certificate`,
/// `client-key`) now, with the 1 MiB cap of [`crate::files`], into their `*-data` fields, so
/// kube never reads an unbounded file (`client-key: /dev/zero`); `tokenFile` (re-read by kube
/// for rotation) is only checked. Entries not in use are left alone, as kubectl does (a stale
/// user elsewhere in the file must not break the current one). Paths are absolute already
/// ([`absolutize_referenced_files`]). Errors: exit 4 naming the entry and the file.
fn preload_referenced_files(kc: &mut Kubeconfig, cluster: Option<&str>, user: Option<&str>) -> Result<()> {
    use base64::Engine;
    let read = |p: &str, what: String| -> Result<String> {
        crate::files::read_input_bytes(Path::new(p), crate::files::MAX_KEY_FILE, &what)
            .map(|b| base64::engine::general_purpose::STANDARD.encode(b))
            .map_err(|e| Error::Kubeconfig {
                message: e.to_string(),
            })
    };
    let k = "the kubeconfig";
    for named in kc
        .clusters
        .iter_mut()
        .filter(|n| Some(n.name.as_str()) == cluster)
    {
        let Some(c) = named.cluster.as_mut() else { continue };
        if c.certificate_authority_data.is_none() {
            if let Some(p) = c.certificate_authority.take() {
                c.certificate_authority_data = Some(read(
                    &p,
                    format!("certificate-authority of cluster {:?} in {k}", named.name),
                )?);
            }
        }
    }
    for named in kc.auth_infos.iter_mut().filter(|n| Some(n.name.as_str()) == user) {
        let Some(a) = named.auth_info.as_mut() else {
            continue;
        };
        if a.client_certificate_data.is_none() {
            if let Some(p) = a.client_certificate.take() {
                a.client_certificate_data = Some(read(
                    &p,
                    format!("client-certificate of user {:?} in {k}", named.name),
                )?);
            }
        }
        if a.client_key_data.is_none() {
            if let Some(p) = a.client_key.take() {
                a.client_key_data = Some(SecretString::from(read(
                    &p,
                    format!("client-key of user {:?} in {k}", named.name),
                )?));
            }
        }
        if let Some(p) = &a.token_file {
            crate::files::check_input_file(
                Path::new(p),
                crate::files::MAX_KEY_FILE,
                &format!("tokenFile of user {:?} in {k}", named.name),
            )
            .map_err(|e| Error::Kubeconfig {
                message: e.to_string(),
            })?;
        }
    }
    Ok(())
}

/// Whether `v` can be an HTTP header value (`Bearer <v>` or `Impersonate-*: <v>`): visible
/// ASCII, space, tab and bytes >= 0x80 only (RFC 9110 field-value; the `http` crate's rule).
/// Err describes the first offending character, e.g. `contains a newline (\n) at byte 3`.
pub fn header_safe(v: &str) -> std::result::Result<(), String> {
    match v
        .bytes()
        .enumerate()
        .find(|(_, b)| (*b < 0x20 && *b != b'\t') || *b == 0x7f)
    {
        None => Ok(()),
        Some((i, b)) => Err(match b {
            b'\n' => format!("contains a newline (\\n) at byte {i}"),
            b'\r' => format!("contains a carriage return (\\r) at byte {i}"),
            b => format!("contains the control character 0x{b:02x} at byte {i}"),
        }),
    }
}

fn parse_server(s: &str) -> Result<http::Uri> {
    // kubectl accepts a bare host:port and means https.
    let with_scheme = if s.contains("://") {
        s.to_string()
    } else {
        format!("https://{s}")
    };
    with_scheme
        .parse::<http::Uri>()
        .map_err(|e| Error::Usage(format!("--server {s:?} is not a URL: {e}")))
}

/// A `--client-certificate`/`--client-key` file, base64 as kube's `*-data` fields want it.
fn read_key_flag(path: &Path, flag: &str) -> Result<String> {
    use base64::Engine;
    crate::files::read_input_bytes(path, crate::files::MAX_KEY_FILE, flag)
        .map(|b| base64::engine::general_purpose::STANDARD.encode(b))
        .map_err(|e| Error::Kubeconfig {
            message: e.to_string(),
        })
}

/// Reads every `CERTIFICATE` block of a PEM file as DER (`--certificate-authority`).
fn read_ca_file(path: &Path) -> Result<Vec<Vec<u8>>> {
    let data = crate::files::read_input_bytes(path, crate::files::MAX_KEY_FILE, "--certificate-authority")
        .map_err(|e| Error::Kubeconfig {
            message: e.to_string(),
        })?;
    let certs: Vec<Vec<u8>> = pem::parse_many(&data)
        .map_err(|e| Error::Kubeconfig {
            message: format!(
                "{} (from --certificate-authority) is not PEM: {e}",
                path.display()
            ),
        })?
        .into_iter()
        .filter(|p| p.tag() == "CERTIFICATE")
        .map(|p| p.into_contents())
        .collect();
    if certs.is_empty() {
        return Err(Error::Kubeconfig {
            message: format!(
                "{} (from --certificate-authority) holds no CERTIFICATE",
                path.display()
            ),
        });
    }
    Ok(certs)
}

/// Picks the proxy for the API server like client-go: the kubeconfig cluster's `proxy-url`
/// wins; else `HTTPS_PROXY`/`https_proxy` (https servers) or `HTTP_PROXY`/`http_proxy`, unless
/// `NO_PROXY`/`no_proxy` matches the server or the server is localhost/loopback (Go never
/// proxies those). `env` is a lookup so tests need not touch the process environment.
pub fn select_proxy(
    server: &http::Uri,
    kubeconfig_proxy: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<http::Uri>> {
    let parse = |p: &str, from: &str| {
        p.parse::<http::Uri>().map(Some).map_err(|e| Error::Kubeconfig {
            message: format!("proxy {p:?} (from {from}) is not a URL: {e}"),
        })
    };
    if let Some(p) = kubeconfig_proxy {
        return parse(p, "kubeconfig proxy-url");
    }
    let get = |a: &str, b: &str| {
        env(a)
            .filter(|v| !v.is_empty())
            .or_else(|| env(b).filter(|v| !v.is_empty()))
    };
    let https = server.scheme_str() != Some("http");
    let (var, proxy) = if https {
        ("HTTPS_PROXY", get("HTTPS_PROXY", "https_proxy"))
    } else {
        ("HTTP_PROXY", get("HTTP_PROXY", "http_proxy"))
    };
    let Some(proxy) = proxy else { return Ok(None) };
    let host = server
        .host()
        .unwrap_or("")
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = server.port_u16().unwrap_or(if https { 443 } else { 80 });
    if host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
        return Ok(None);
    }
    if let Some(no_proxy) = get("NO_PROXY", "no_proxy") {
        if no_proxy_matches(&no_proxy, &host, port) {
            return Ok(None);
        }
    }
    parse(&proxy, var)
}

/// Go's `httpproxy` NO_PROXY rules: `*` matches all; an IP or CIDR matches IP hosts;
/// `example.com` matches it and its subdomains, `.example.com` only subdomains; an optional
/// `:port` must equal the port.
pub fn no_proxy_matches(no_proxy: &str, host: &str, port: u16) -> bool {
    let host_ip = host.parse::<std::net::IpAddr>().ok();
    for entry in no_proxy
        .split(',')
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
    {
        if entry == "*" {
            return true;
        }
        if let Some((net, bits)) = entry.split_once('/') {
            if let (Some(ip), Ok(net), Ok(bits)) =
                (host_ip, net.parse::<std::net::IpAddr>(), bits.parse::<u8>())
            {
                if crate::net::cidr_contains(net, bits, ip) {
                    return true;
                }
            }
            continue;
        }
        if let Ok(ip) = entry
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
        {
            if host_ip == Some(ip) {
                return true;
            }
            continue;
        }
        let (name, want_port) = match entry.rsplit_once(':') {
            Some((n, p)) if p.parse::<u16>().is_ok() => (n.to_string(), p.parse::<u16>().ok()),
            _ => (entry.clone(), None),
        };
        if want_port.is_some_and(|p| p != port) {
            continue;
        }
        if let Some(suffix) = name.strip_prefix('.') {
            if host.ends_with(&format!(".{suffix}")) {
                return true;
            }
        } else if host == name || host.ends_with(&format!(".{name}")) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::parse_duration;

    #[test]
    fn kubeconfig_parse_errors_lose_the_files_text_and_the_parsers_advice() {
        let e = Kubeconfig::from_yaml(
            "apiVersion: v1\nusers:\n- name: u\n  user:\n    token: abc\n    token: def\n",
        )
        .unwrap_err();
        assert_eq!(
            parse_error(&e),
            "line 6 column 5: duplicate mapping key `token` is not allowed here"
        );
        let e = Kubeconfig::from_yaml("apiVersion: v1\nusers: \"sekrit-token\"\n").unwrap_err();
        let why = parse_error(&e);
        assert!(
            why.starts_with("line 2 column 8: ") && !why.contains("sekrit"),
            "{why}"
        );
    }
    use std::time::Duration;

    #[test]
    fn durations_like_kubectl() {
        assert_eq!(parse_duration("0").unwrap(), None);
        assert_eq!(parse_duration("30").unwrap(), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("1m30s").unwrap(), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms").unwrap(), Some(Duration::from_millis(500)));
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("abc").is_err());
    }

    #[test]
    fn durations_out_of_range_are_errors_not_panics() {
        for s in [
            "9999999999999999h",
            "99999999999999999999999999999s",
            "2562048h",
            "9223372037s",
            "2562047h2562047h",
            // A bare number of seconds past u64 (was "missing unit").
            "99999999999999999999",
        ] {
            let e = parse_duration(s).expect_err(s);
            assert!(e.contains("out of range"), "{s}: {e}");
        }
        assert_eq!(
            parse_duration("2562047h").unwrap(),
            Some(Duration::from_secs(2562047 * 3600))
        );
    }

    #[test]
    fn no_proxy_rules() {
        assert!(no_proxy_matches("*", "api.x.com", 6443));
        assert!(no_proxy_matches("example.com", "api.example.com", 6443));
        assert!(no_proxy_matches("example.com", "example.com", 6443));
        assert!(!no_proxy_matches(".example.com", "example.com", 6443));
        assert!(no_proxy_matches(".example.com", "api.example.com", 6443));
        assert!(!no_proxy_matches("xample.com", "api.example.com", 6443));
        assert!(no_proxy_matches("192.168.111.0/24", "192.168.111.5", 6443));
        assert!(!no_proxy_matches("192.168.112.0/24", "192.168.111.5", 6443));
        assert!(no_proxy_matches("api.example.com:6443", "api.example.com", 6443));
        assert!(!no_proxy_matches("api.example.com:443", "api.example.com", 6443));
    }

    #[test]
    fn proxy_selection() {
        let server: http::Uri = "https://api.ostest.example.com:6443".parse().unwrap();
        let env = |k: &str| match k {
            "HTTPS_PROXY" => Some("http://proxy:3128".to_string()),
            "NO_PROXY" => Some(".internal".to_string()),
            _ => None,
        };
        assert_eq!(
            select_proxy(&server, None, &env).unwrap().unwrap().to_string(),
            "http://proxy:3128/"
        );
        // kubeconfig proxy-url wins over the environment.
        assert_eq!(
            select_proxy(&server, Some("http://kc:8080"), &env)
                .unwrap()
                .unwrap()
                .to_string(),
            "http://kc:8080/"
        );
        let env_np = |k: &str| match k {
            "https_proxy" => Some("http://proxy:3128".to_string()),
            "no_proxy" => Some("example.com".to_string()),
            _ => None,
        };
        assert_eq!(select_proxy(&server, None, &env_np).unwrap(), None);
        let lo: http::Uri = "https://127.0.0.1:6443".parse().unwrap();
        assert_eq!(select_proxy(&lo, None, &env).unwrap(), None);
    }
}
