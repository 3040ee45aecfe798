//! ATP over one TCP connection (placeholder).
