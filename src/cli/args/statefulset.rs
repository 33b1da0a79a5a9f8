//! `serve`'s StatefulSet flags: derive the node ID, address and peers from a pod's stable name
//! (`config::statefulset`), flattened into `ServeArgs`.

use std::path::PathBuf;

use clap::Args;

use crate::config::Settings;

/// Every flag also reads `LEAFRAFT_<FLAG>` and the `--config` TOML file (flags > env > file).
#[derive(Debug, Args, Default)]
pub struct StatefulSetArgs {
    /// The StatefulSet's headless Service: derive --node-id (ordinal + 1), --advertise
    /// (POD.SERVICE.NAMESPACE.svc.DOMAIN:PORT, PORT from --listen) and how to start: the first
    /// --statefulset-initial ordinals form the cluster, later ones join through them.
    #[arg(long, env = "LEAFRAFT_STATEFULSET_SERVICE")]
    pub statefulset_service: Option<String>,
    /// This pod's name, NAME-ORDINAL [default: $HOSTNAME].
    #[arg(long, env = "LEAFRAFT_STATEFULSET_POD")]
    pub statefulset_pod: Option<String>,
    /// How many ordinals form the cluster: the formation size, the same on every pod, not the
    /// live replica count [default: 3].
    #[arg(long, env = "LEAFRAFT_STATEFULSET_INITIAL")]
    pub statefulset_initial: Option<u32>,
    /// The pods' namespace [default: default].
    #[arg(long, env = "LEAFRAFT_STATEFULSET_NAMESPACE")]
    pub statefulset_namespace: Option<String>,
    /// The cluster's DNS domain [default: cluster.local].
    #[arg(long, env = "LEAFRAFT_STATEFULSET_DOMAIN")]
    pub statefulset_domain: Option<String>,
    /// A file of `NAME HOST:PORT` lines that reach a pod (by DNS or pod name) elsewhere than
    /// NAME:PORT: for tests and runs outside Kubernetes.
    #[arg(long, env = "LEAFRAFT_STATEFULSET_HOSTS")]
    pub statefulset_hosts: Option<PathBuf>,
    /// How long (ms) a member's pod name at or above the formation size must stay unresolvable
    /// before the leader removes that member: a scale-down needs no command [default: 300000].
    #[arg(long, env = "LEAFRAFT_STATEFULSET_SCALE_DOWN_AFTER_MS")]
    pub statefulset_scale_down_after_ms: Option<u64>,
}

impl StatefulSetArgs {
    /// `settings` with these flags added.
    pub fn layer(&self, settings: Settings) -> Settings {
        Settings {
            statefulset_service: self.statefulset_service.clone(),
            statefulset_pod: self.statefulset_pod.clone(),
            statefulset_initial: self.statefulset_initial,
            statefulset_namespace: self.statefulset_namespace.clone(),
            statefulset_domain: self.statefulset_domain.clone(),
            statefulset_hosts: self.statefulset_hosts.clone(),
            statefulset_scale_down_after_ms: self.statefulset_scale_down_after_ms,
            ..settings
        }
    }
}
