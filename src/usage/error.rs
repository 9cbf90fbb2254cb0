//! What reading and writing the usage counts runs into: the JSON file of a single machine, the
//! state database, the cluster's Redis, and a blocking step that did not finish. Each message is
//! the one `mcpgate usage`, the console and the log show.

use std::path::PathBuf;

/// A failure of the store of the usage counts.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// The JSON store is there but cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The JSON store holds something else than counts.
    #[error("{}: not a usage store ({source})", path.display())]
    NotAStore {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The counts cannot be put in JSON.
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
    /// The JSON store cannot be written.
    #[error("{}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The state database refused a read or a change.
    #[error(transparent)]
    Db(#[from] mcpgate_store::StoreError),
    /// The cluster's Redis did not answer a read.
    #[error("the cluster's Redis: {0}")]
    Redis(#[source] mcpgate_net::cluster::ClusterError),
    /// The read of a report from the shared database did not finish.
    #[error("the usage report stopped: {0}")]
    ReportStopped(#[source] tokio::task::JoinError),
    /// The quota step (taking a call from the windows in the state database) did not finish.
    #[error("the state database -: the quota step stopped: {0}")]
    QuotaStepStopped(#[source] tokio::task::JoinError),
}
