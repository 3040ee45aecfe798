//! ATP (placeholder).
