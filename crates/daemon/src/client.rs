//! The client library applications use to talk to the daemon. It lives in the runtime
//! ([`adaptnet_runtime::daemon_client`]), whose own CM handle uses it; re-exported here so
//! that `adaptnet_daemon::DaemonClient` keeps working.

pub use adaptnet_runtime::daemon_client::{
    ClientError, DEFAULT_EVENT_QUEUE, DaemonClient, process_name, socket_path,
};
