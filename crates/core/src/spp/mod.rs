//! SPP (placeholder).
