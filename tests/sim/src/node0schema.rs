//! assisted-service's database schema, as far as `migrate` needs it (the source database of
//! `agent-day2-sim node0` and the target database of the migrate tests).
//!
//! Tables and column names follow assisted-service's gorm models: the swagger models of
//! assisted-service's `swagger.yaml` at 063b2579 (`cluster`, `host`, `infra-env`, `event`,
//! `cluster_network`, `service_network`, `machine_network`, `api_vip`, `ingress_vip`,
//! `monitored-operator`) with their field names in snake_case, embedded structs with their
//! prefix (`platform_type`, `progress_*`, `image_*`), plus the columns assisted-service adds to
//! the swagger models in `internal/common` (`clusters.pull_secret`, `clusters.kube_key_name`,
//! `clusters.kube_key_namespace`, `infra_envs.kube_key_namespace`, `hosts.kube_key_namespace`)
//! and gorm.Model's columns on `events` (`id bigserial`, `created_at`, `updated_at`,
//! `deleted_at`). Ids (uuids) are `text`, as gorm stores `strfmt.UUID`; hosts' primary key is
//! `(id, infra_env_id)`. A subset of the real columns: nested arrays (`hosts`, `api_vips`, ...)
//! live in their own tables, and fields the simulator never sets are left out.
//! tests/migrate_real.rs `the_simulated_node0_schema_is_part_of_the_real_one` holds it to the
//! schema the real service's migrations make wherever that build is there (CI): every table and
//! column here is there with the same type and nullability (`cidr`/`inet` networks and VIPs,
//! `varchar` status and logs infos, `text[]` bundles; no host counts on `clusters`, no
//! `deleted_at` on `infra_envs`: the first run found all of these), the same primary keys and
//! the same migration ids.
//!
//! `migrations (id varchar(255) primary key)` is gormigrate's table: one row per applied
//! migration. Its ids are those of the real assisted-service at 063b2579 ([`REAL_MIGRATIONS`],
//! docs/migrate.md "Node 0 and cluster 0"), typos included: `2021115162400` (13 digits) and
//! `21211125182200` (year 2121) make `max(id)` the same on every real database since 2021, so
//! the schema "version" here is the newest migration by the date it was written
//! ([`schema_version`]), and a newer or older assisted-service build is a different set of ids
//! ([`create`]).

use anyhow::Context;

/// The simulated schema's version when none is given: the newest migration by date of
/// assisted-service at 063b2579 (`20260413120000`, set_events_autovacuum_settings).
pub const DEFAULT_SCHEMA_VERSION: &str = "20260413120000";

/// The gormigrate ids a fresh database of assisted-service at 063b2579 holds (all 26,
/// docs/migrate.md "Node 0 and cluster 0", read back from a database its migrations made), each with the
/// date (`YYYYMMDDhhmmss`) it was written: the id itself, except the two typos, whose date is
/// their file's name (`20211115162400_modify_events_id.go`, `20211125182200_change_hosts_pkey.go`).
pub const REAL_MIGRATIONS: &[(&str, &str)] = &[
    ("20201019194303", "20201019194303"),
    ("20201202140700", "20201202140700"),
    ("20210218160100", "20210218160100"),
    ("20210223090000", "20210223090000"),
    ("20210822134659", "20210822134659"),
    ("20210825135341", "20210825135341"),
    ("20211108163809", "20211108163809"),
    ("2021115162400", "20211115162400"),
    ("21211125182200", "20211125182200"),
    ("20220113152127", "20220113152127"),
    ("20220221193600", "20220221193600"),
    ("20220325125504", "20220325125504"),
    ("20220527210238", "20220527210238"),
    ("20221031103047", "20221031103047"),
    ("20221110174000", "20221110174000"),
    ("20230629113604", "20230629113604"),
    ("20231010101010", "20231010101010"),
    ("20231219105000", "20231219105000"),
    ("20240918161800", "20240918161800"),
    ("20241122160000", "20241122160000"),
    ("20250115120000", "20250115120000"),
    ("20250728120000", "20250728120000"),
    ("20251023201000", "20251023201000"),
    ("20251216120000", "20251216120000"),
    ("20251217120000", "20251217120000"),
    ("20260413120000", "20260413120000"),
];

/// The date a migration id stands for: its [`REAL_MIGRATIONS`] date, else the id itself.
pub fn migration_date(id: &str) -> &str {
    REAL_MIGRATIONS
        .iter()
        .find(|(i, _)| *i == id)
        .map(|(_, d)| *d)
        .unwrap_or(id)
}

/// Orders dates given as digits: by length, then as text (so numerically).
fn date_key(d: &str) -> (usize, &str) {
    (d.len(), d)
}

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
    status_info varchar,
    status_updated_at timestamp with time zone,
    progress_total_percentage bigint,
    progress_preparing_for_installation_stage_percentage bigint,
    progress_installing_stage_percentage bigint,
    progress_finalizing_stage_percentage bigint,
    progress_finalizing_stage text,
    schedulable_masters boolean DEFAULT false,
    schedulable_masters_forced_true boolean DEFAULT true,
    updated_at timestamp with time zone,
    created_at timestamp with time zone,
    install_started_at timestamp with time zone,
    install_completed_at timestamp with time zone,
    pull_secret_set boolean,
    vip_dhcp_allocation boolean,
    validations_info text,
    logs_info varchar,
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
    load_balancer_type text NOT NULL DEFAULT 'cluster-managed',
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
    kube_key_namespace text
);

CREATE TABLE hosts (
    id text NOT NULL,
    infra_env_id text NOT NULL,
    kind text,
    href text,
    cluster_id text,
    status text,
    status_info varchar,
    validations_info text,
    logs_info varchar,
    status_updated_at timestamp with time zone,
    progress_current_stage text,
    progress_installation_percentage bigint,
    progress_progress_info varchar,
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
    cidr cidr NOT NULL,
    host_prefix bigint,
    PRIMARY KEY (cluster_id, cidr)
);
CREATE TABLE service_networks (
    cluster_id text NOT NULL,
    cidr cidr NOT NULL,
    PRIMARY KEY (cluster_id, cidr)
);
CREATE TABLE machine_networks (
    cluster_id text NOT NULL,
    cidr cidr NOT NULL,
    PRIMARY KEY (cluster_id, cidr)
);
CREATE TABLE api_vips (
    cluster_id text NOT NULL,
    ip inet NOT NULL,
    verification text DEFAULT 'unverified',
    PRIMARY KEY (cluster_id, ip)
);
CREATE TABLE ingress_vips (
    cluster_id text NOT NULL,
    ip inet NOT NULL,
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
    bundles text[],
    dependency_only boolean,
    PRIMARY KEY (cluster_id, name)
);

CREATE TABLE migrations (
    id varchar(255) PRIMARY KEY
);
"#;

/// Creates every table of [`TABLES`] plus `migrations` in the database at `url` (one
/// transaction) and gives every table and sequence to the database's owner (as
/// assisted-service's own user owns them). `migrations` gets the ids of an assisted-service
/// build whose newest migration is of date `schema_version`: the [`REAL_MIGRATIONS`] of that
/// date or earlier, plus `schema_version` itself when no real migration has that date (a
/// migration of a build newer than 063b2579). So [`DEFAULT_SCHEMA_VERSION`] gives the real 26
/// ids, `20250115120000` an older build's 21, `20990101000000` the 26 and one more.
///
/// `schema_version`: digits (a gormigrate id such as `20260413120000`). Errors: another
/// version format, the tables exist already, or psql's error.
pub fn create(url: &str, schema_version: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !schema_version.is_empty() && schema_version.bytes().all(|b| b.is_ascii_digit()),
        "schema version {schema_version:?}: expected digits, e.g. {DEFAULT_SCHEMA_VERSION}"
    );
    let mut sql = String::from("BEGIN;\n");
    sql.push_str(DDL);
    for id in migration_ids_of(schema_version) {
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

/// The `migrations` ids [`create`] writes for `schema_version` (see there), in date order.
pub fn migration_ids_of(schema_version: &str) -> Vec<String> {
    let mut ids: Vec<String> = REAL_MIGRATIONS
        .iter()
        .filter(|(_, d)| date_key(d) <= date_key(schema_version))
        .map(|(i, _)| i.to_string())
        .collect();
    if !REAL_MIGRATIONS.iter().any(|(_, d)| *d == schema_version) {
        ids.push(schema_version.to_string());
    }
    ids
}

/// The ids in `migrations` of the database at `url`, sorted as text.
pub fn migration_ids(url: &str) -> anyhow::Result<Vec<String>> {
    let v = crate::postgres::psql(url, "SELECT id FROM migrations ORDER BY id")?;
    Ok(v.lines().filter(|l| !l.is_empty()).map(str::to_string).collect())
}

/// The schema version of the database at `url`: the newest date ([`migration_date`]) of its
/// `migrations` ids (not `max(id)`, which the typo id `21211125182200` holds on every real
/// database). Empty when `migrations` is.
pub fn schema_version(url: &str) -> anyhow::Result<String> {
    let ids = migration_ids(url)?;
    Ok(ids
        .iter()
        .map(|i| migration_date(i))
        .max_by(|a, b| date_key(a).cmp(&date_key(b)))
        .unwrap_or("")
        .to_string())
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
