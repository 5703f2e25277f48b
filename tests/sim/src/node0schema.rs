//! assisted-service's database schema, as far as `migrate` needs it (the source database of
//! `agent-day2-sim node0` and the target database of the migrate tests).
//!
//! Tables and column names follow assisted-service's gorm models: the swagger models of
//! `../shared/upstream/assisted-service/swagger.yaml` (`cluster`, `host`, `infra-env`, `event`,
//! `cluster_network`, `service_network`, `machine_network`, `api_vip`, `ingress_vip`,
//! `monitored-operator`) with their field names in snake_case, embedded structs with their
//! prefix (`platform_type`, `progress_*`, `image_*`), plus the columns assisted-service adds to
//! the swagger models in `internal/common` (`clusters.pull_secret`, `clusters.kube_key_name`,
//! `clusters.kube_key_namespace`, `infra_envs.kube_key_namespace`, `hosts.kube_key_namespace`)
//! and gorm.Model's columns on `events` (`id bigserial`, `created_at`, `updated_at`,
//! `deleted_at`). Ids (uuids) are `text`, as gorm stores `strfmt.UUID`; hosts' primary key is
//! `(id, infra_env_id)`. A subset of the real columns: nested arrays (`hosts`, `api_vips`, ...)
//! live in their own tables, and fields the simulator never sets are left out.
//!
//! `migrations (id varchar(255) primary key)` is gormigrate's table: one row per applied
//! migration, the greatest id is the schema version.

use anyhow::Context;

/// Schema version used when none is given (the id of a real assisted-service migration).
pub const DEFAULT_SCHEMA_VERSION: &str = "20240617140000";

/// Migration ids (real assisted-service migration ids, ascending) filled into `migrations`
/// below the requested schema version.
pub const KNOWN_MIGRATIONS: &[&str] = &[
    "20210713123129",
    "20211222094200",
    "20220325130000",
    "20230309113400",
    "20231005120000",
    "20240322140000",
    "20240617140000",
];

/// Every data table [`create`] makes (not `migrations`), in creation order.
pub const TABLES: &[&str] = &[
    "clusters",
    "infra_envs",
    "hosts",
    "events",
    "cluster_networks",
    "service_networks",
    "machine_networks",
    "api_vips",
    "ingress_vips",
    "monitored_operators",
];

/// The DDL (`CREATE TABLE ...;` statements, no data).
pub const DDL: &str = r#"
CREATE TABLE clusters (
    id text PRIMARY KEY,
    kind text,
    href text,
    name text,
    user_name text,
    org_id text,
    email_domain text,
    openshift_version text,
    ocp_release_image text,
    openshift_cluster_id text,
    image_static_network_config text,
    platform_type text,
    base_dns_domain text,
    cluster_network_cidr text,
    cluster_network_host_prefix bigint,
    service_network_cidr text,
    api_vip_dns_name text,
    machine_network_cidr text,
    ssh_public_key text,
    http_proxy text,
    https_proxy text,
    no_proxy text,
    status text,
    status_info text,
    status_updated_at timestamp with time zone,
    progress_total_percentage bigint,
    progress_preparing_for_installation_stage_percentage bigint,
    progress_installing_stage_percentage bigint,
    progress_finalizing_stage_percentage bigint,
    progress_finalizing_stage text,
    ready_host_count bigint,
    enabled_host_count bigint,
    total_host_count bigint,
    schedulable_masters boolean DEFAULT false,
    schedulable_masters_forced_true boolean DEFAULT true,
    updated_at timestamp with time zone,
    created_at timestamp with time zone,
    install_started_at timestamp with time zone,
    install_completed_at timestamp with time zone,
    pull_secret_set boolean,
    vip_dhcp_allocation boolean,
    validations_info text,
    logs_info text,
    install_config_overrides text,
    controller_logs_collected_at timestamp with time zone,
    controller_logs_started_at timestamp with time zone,
    connectivity_majority_groups text,
    ignored_host_validations text,
    ignored_cluster_validations text,
    deleted_at timestamp with time zone,
    user_managed_networking boolean,
    additional_ntp_source text,
    hyperthreading text,
    feature_usage text,
    network_type text,
    cpu_architecture text,
    imported boolean DEFAULT false,
    tags text,
    control_plane_count bigint,
    high_availability_mode text,
    load_balancer_type text,
    pull_secret text,
    kube_key_name text,
    kube_key_namespace text
);
CREATE INDEX idx_clusters_deleted_at ON clusters (deleted_at);

CREATE TABLE infra_envs (
    id text PRIMARY KEY,
    kind text,
    href text,
    openshift_version text,
    name text,
    user_name text,
    org_id text,
    email_domain text,
    additional_ntp_sources text,
    ssh_authorized_key text,
    pull_secret_set boolean,
    static_network_config text,
    rendezvous_ip text,
    type text,
    ignition_config_override text,
    cluster_id text,
    size_bytes bigint,
    download_url text,
    generator_version text,
    updated_at timestamp with time zone,
    created_at timestamp with time zone,
    expires_at timestamp with time zone,
    cpu_architecture text,
    kernel_arguments text,
    additional_trust_bundle text,
    deleted_at timestamp with time zone,
    kube_key_namespace text
);

CREATE TABLE hosts (
    id text NOT NULL,
    infra_env_id text NOT NULL,
    kind text,
    href text,
    cluster_id text,
    status text,
    status_info text,
    validations_info text,
    logs_info text,
    status_updated_at timestamp with time zone,
    progress_current_stage text,
    progress_installation_percentage bigint,
    progress_progress_info text,
    progress_stage_started_at timestamp with time zone,
    progress_stage_updated_at timestamp with time zone,
    stage_started_at timestamp with time zone,
    stage_updated_at timestamp with time zone,
    connectivity text,
    api_vip_connectivity text,
    inventory text,
    free_addresses text,
    ntp_sources text,
    disks_info text,
    role text,
    suggested_role text,
    bootstrap boolean,
    logs_collected_at timestamp with time zone,
    logs_started_at timestamp with time zone,
    installer_version text,
    installation_disk_path text,
    installation_disk_id text,
    updated_at timestamp with time zone,
    created_at timestamp with time zone,
    checked_in_at timestamp with time zone,
    registered_at timestamp with time zone,
    discovery_agent_version text,
    requested_hostname text,
    user_name text,
    media_status text,
    deleted_at timestamp with time zone,
    ignition_config_overrides text,
    installer_args text,
    machine_config_pool_name text,
    images_status text,
    domain_name_resolutions text,
    node_labels text,
    kube_key_namespace text,
    PRIMARY KEY (id, infra_env_id)
);
CREATE INDEX idx_hosts_cluster_id ON hosts (cluster_id);

CREATE TABLE events (
    id bigserial PRIMARY KEY,
    created_at timestamp with time zone,
    updated_at timestamp with time zone,
    deleted_at timestamp with time zone,
    name text,
    cluster_id text,
    host_id text,
    infra_env_id text,
    severity text,
    category text DEFAULT 'user',
    message varchar(4096),
    event_time timestamp with time zone,
    request_id text,
    props text
);
CREATE INDEX idx_events_cluster_id ON events (cluster_id);
CREATE INDEX idx_events_host_id ON events (host_id);
CREATE INDEX idx_events_infra_env_id ON events (infra_env_id);
CREATE INDEX idx_events_event_time ON events (event_time);

CREATE TABLE cluster_networks (
    cluster_id text NOT NULL,
    cidr text NOT NULL,
    host_prefix bigint,
    PRIMARY KEY (cluster_id, cidr)
);
CREATE TABLE service_networks (
    cluster_id text NOT NULL,
    cidr text NOT NULL,
    PRIMARY KEY (cluster_id, cidr)
);
CREATE TABLE machine_networks (
    cluster_id text NOT NULL,
    cidr text NOT NULL,
    PRIMARY KEY (cluster_id, cidr)
);
CREATE TABLE api_vips (
    cluster_id text NOT NULL,
    ip text NOT NULL,
    verification text DEFAULT 'unverified',
    PRIMARY KEY (cluster_id, ip)
);
CREATE TABLE ingress_vips (
    cluster_id text NOT NULL,
    ip text NOT NULL,
    verification text DEFAULT 'unverified',
    PRIMARY KEY (cluster_id, ip)
);
CREATE TABLE monitored_operators (
    cluster_id text NOT NULL,
    name text NOT NULL,
    version text,
    namespace text,
    subscription_name text,
    operator_type text,
    properties text,
    timeout_seconds bigint,
    status text,
    status_info text,
    status_updated_at timestamp with time zone,
    bundles text,
    dependency_only boolean,
    PRIMARY KEY (cluster_id, name)
);

CREATE TABLE migrations (
    id varchar(255) PRIMARY KEY
);
"#;

/// Creates every table of [`TABLES`] plus `migrations` in the database at `url` (one
/// transaction), fills `migrations` with the [`KNOWN_MIGRATIONS`] below `schema_version` and
/// `schema_version` itself (so `SELECT max(id) FROM migrations` = `schema_version`), and gives
/// every table and sequence to the database's owner (as assisted-service's own user owns them).
///
/// `schema_version`: digits (a gormigrate id such as `20240617140000`). Errors: another
/// version format, the tables exist already, or psql's error.
pub fn create(url: &str, schema_version: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !schema_version.is_empty() && schema_version.bytes().all(|b| b.is_ascii_digit()),
        "schema version {schema_version:?}: expected digits, e.g. {DEFAULT_SCHEMA_VERSION}"
    );
    let mut sql = String::from("BEGIN;\n");
    sql.push_str(DDL);
    let mut ids: Vec<&str> = KNOWN_MIGRATIONS
        .iter()
        .copied()
        .filter(|m| (m.len(), *m) < (schema_version.len(), schema_version))
        .collect();
    ids.push(schema_version);
    for id in ids {
        sql.push_str(&format!("INSERT INTO migrations (id) VALUES ('{id}');\n"));
    }
    sql.push_str(
        r#"DO $$
DECLARE o text; r record;
BEGIN
  SELECT pg_get_userbyid(datdba) INTO o FROM pg_database WHERE datname = current_database();
  FOR r IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'public' AND c.relkind = 'r' LOOP
    EXECUTE format('ALTER TABLE public.%I OWNER TO %I', r.relname, o);
  END LOOP;
END $$;
COMMIT;
"#,
    );
    crate::postgres::psql(url, &sql)
        .with_context(|| format!("creating the assisted-service tables in {url}"))?;
    Ok(())
}

/// The schema version of the database at `url`: `SELECT max(id) FROM migrations`.
pub fn schema_version(url: &str) -> anyhow::Result<String> {
    let v = crate::postgres::psql(url, "SELECT max(id) FROM migrations")?;
    Ok(v.trim().to_string())
}

/// Whether the database at `url` has the `clusters` table already.
pub fn exists(url: &str) -> anyhow::Result<bool> {
    let v = crate::postgres::psql(url, "SELECT to_regclass('public.clusters') IS NOT NULL")?;
    Ok(v.trim() == "t")
}

/// Row count of each table of [`TABLES`] and `migrations` (name, count), for comparisons.
pub fn row_counts(url: &str) -> anyhow::Result<Vec<(String, u64)>> {
    let q: Vec<String> = TABLES
        .iter()
        .chain(["migrations"].iter())
        .map(|t| format!("SELECT '{t}', count(*) FROM {t}"))
        .collect();
    let out = crate::postgres::psql(url, &(q.join(" UNION ALL ") + ";"))?;
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (t, n) = l.split_once('|').context("unexpected psql output")?;
            Ok((t.to_string(), n.parse()?))
        })
        .collect()
}
