// The wrapper module that names the real consumer components of the node ISO (item 2 of the
// node-contract issue): assisted-service's REST server (`cmd`) and its agent-based-installer
// client (`cmd/agentbasedinstaller/client`), pinned to one commit as a pseudo-version.
// scripts/real-components.sh builds them from here; nothing upstream is vendored in this repo.
// The replace block repeats upstream's own go.mod (ignored when it is a dependency), with its
// ./api, ./client, ./models lines turned into the same pseudo-version.
module agent-day2.invalid/real

go 1.26.0

// The git tree id of that commit (`git rev-parse 063b257950f7^{tree}`): scripts/real-components.sh
// compares a source tree that is not a git checkout (an unpacked tarball) with it, exactly.
require github.com/openshift/assisted-service v0.0.0-20260821015408-063b257950f7 // tree 095f064b122912ed0bfd17681c1bbc9219f7c832

replace (
	github.com/google/gnostic-models => github.com/google/gnostic-models v0.6.8
	github.com/metal3-io/baremetal-operator => github.com/openshift/baremetal-operator v0.0.0-20231019133159-8643f32fea3e
	github.com/metal3-io/baremetal-operator/apis => github.com/openshift/baremetal-operator/apis v0.0.0-20231019133159-8643f32fea3e
	github.com/metal3-io/baremetal-operator/pkg/hardwareutils => github.com/openshift/baremetal-operator/pkg/hardwareutils v0.0.0-20231019133159-8643f32fea3e
	github.com/opencontainers/runc => github.com/opencontainers/runc v1.1.12
	github.com/openshift/assisted-service/api => github.com/openshift/assisted-service/api v0.0.0-20260821015408-063b257950f7
	github.com/openshift/assisted-service/client => github.com/openshift/assisted-service/client v0.0.0-20260821015408-063b257950f7
	github.com/openshift/assisted-service/models => github.com/openshift/assisted-service/models v0.0.0-20260821015408-063b257950f7
	golang.org/x/oauth2 => github.com/openshift/golang-oauth2 v0.26.1-0.20250310184649-06a918c6239d
	k8s.io/api => k8s.io/api v0.29.9
	k8s.io/apimachinery => k8s.io/apimachinery v0.29.9
	k8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-20240228011516-70dd3763d340
	sigs.k8s.io/cluster-api-provider-aws => github.com/openshift/cluster-api-provider-aws v0.2.1-0.20201022175424-d30c7a274820
	sigs.k8s.io/cluster-api-provider-azure => github.com/openshift/cluster-api-provider-azure v0.1.0-alpha.3.0.20201016155852-4090a6970205
)
