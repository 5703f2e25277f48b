//! kube-rs (the client the plugin uses) against the simulator: client-certificate and token
//! authentication over rustls, typed lists, watcher streams with bookmarks, status writes and
//! 404/409/403 errors as `kube::Error::Api`.

use agent_day2_sim::harness::TestCluster;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use std::time::Duration;

async fn client(c: &TestCluster, context: &str) -> kube::Client {
    let kc = Kubeconfig::read_from(&c.kubeconfig).unwrap();
    let opts = KubeConfigOptions {
        context: Some(context.into()),
        ..Default::default()
    };
    let cfg = kube::Config::from_custom_kubeconfig(kc, &opts).await.unwrap();
    kube::Client::try_from(cfg).unwrap()
}

#[test]
fn kube_rs_client_works() {
    agent_day2_sim::harness::require_netns();
    let c = TestCluster::start("").expect("simulator starts");
    // A current-thread runtime on this thread: its sockets live in this thread's namespace.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let admin = client(&c, "admin").await;
        let nodes: Api<Node> = Api::all(admin.clone());
        let list = nodes.list(&ListParams::default()).await.unwrap();
        assert!(!list.items.is_empty(), "seeded nodes expected");

        let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kube-rs"}, "data": {"a": "1"}
        }))
        .unwrap();
        // A watcher (list + watch with bookmarks) sees the object appear and change.
        let watch_api = cms.clone();
        let seen = tokio::spawn(async move {
            let cfg = watcher::Config::default().fields("metadata.name=kube-rs");
            let mut s = watcher::watcher(watch_api, cfg).boxed();
            let mut versions = Vec::new();
            while let Some(ev) = s.try_next().await.unwrap() {
                if let watcher::Event::Apply(o) = ev {
                    versions.push(o.data.unwrap_or_default().get("a").cloned().unwrap_or_default());
                    if versions.last().map(String::as_str) == Some("2") {
                        return versions;
                    }
                }
            }
            versions
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let created = cms.create(&PostParams::default(), &cm).await.unwrap();
        assert!(created.metadata.uid.is_some() && created.metadata.resource_version.is_some());
        let e = cms.create(&PostParams::default(), &cm).await.unwrap_err();
        assert!(matches!(&e, kube::Error::Api(s) if s.code == 409), "{e:?}");
        cms.patch(
            "kube-rs",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"a": "2"}})),
        )
        .await
        .unwrap();
        let versions = tokio::time::timeout(Duration::from_secs(10), seen)
            .await
            .expect("watcher saw the change")
            .unwrap();
        assert_eq!(versions.last().map(String::as_str), Some("2"), "{versions:?}");

        let e = cms.get("missing").await.unwrap_err();
        assert!(matches!(&e, kube::Error::Api(s) if s.code == 404), "{e:?}");

        // Concurrent writers: one watch sees every ADDED event, in resourceVersion order.
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
        ns.create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "burst"}})).unwrap(),
        )
        .await
        .unwrap();
        let burst: Api<ConfigMap> = Api::namespaced(admin.clone(), "burst");
        let rv = burst
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap();
        let mut stream = burst
            .watch(&kube::api::WatchParams::default(), &rv)
            .await
            .unwrap()
            .boxed();
        let creates = (0..60).map(|i| {
            let burst = burst.clone();
            async move {
                let cm: ConfigMap =
                    serde_json::from_value(serde_json::json!({"metadata": {"name": format!("b{i}")}}))
                        .unwrap();
                burst.create(&PostParams::default(), &cm).await.unwrap();
            }
        });
        futures::future::join_all(creates).await;
        let mut rvs = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        while names.len() < 60 {
            let ev = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
                .await
                .expect("events")
                .unwrap()
                .unwrap();
            if let kube::api::WatchEvent::Added(o) = ev {
                rvs.push(o.metadata.resource_version.unwrap().parse::<u64>().unwrap());
                names.insert(o.metadata.name.unwrap());
            }
        }
        assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");

        // Token authentication (viewer): reads work, Secrets are forbidden.
        let viewer = client(&c, "viewer").await;
        Api::<Node>::all(viewer.clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        let e = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(viewer, "default")
            .list(&ListParams::default())
            .await
            .unwrap_err();
        assert!(matches!(&e, kube::Error::Api(s) if s.code == 403), "{e:?}");
    });
}
