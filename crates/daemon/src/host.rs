//! The host's environment events with one API whether the daemon runs or not: the daemon's
//! event service when its socket exists (or when told to), the process's own monitor
//! otherwise. It lives in the runtime ([`adaptnet_runtime::host_events`]) beside the CM
//! handle, which chooses the same way; re-exported here. [`Backend`] is the runtime's
//! [`CmBackend`](adaptnet_runtime::cm::CmBackend), read from the same `ADAPTNET_CM`.

pub use adaptnet_runtime::cm::{BACKEND_ENV, CmBackend as Backend};
pub use adaptnet_runtime::host_events::{HostError, HostEvent, HostEvents, HostSubscription};
