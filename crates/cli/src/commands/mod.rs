//! One module per subcommand.

pub mod bench;
pub mod sim;
pub mod validate;

use std::path::{Path, PathBuf};

/// The experiments directory: `explicit`, else `./experiments`, else the source tree's.
pub fn experiments_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    let local = PathBuf::from("experiments");
    if local.is_dir() {
        return local;
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments")
}
