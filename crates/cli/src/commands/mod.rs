//! One module per subcommand.

pub mod bench;
pub mod exp;
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

/// Writes files into `dir` (created if needed), naming the file in any error.
pub fn write_files(dir: &Path, files: &[(String, Vec<u8>)]) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// A progress bar of `len` steps labelled `msg` (hidden when stderr is not a terminal).
pub fn progress_bar(len: u64, msg: &str) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new(len);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:40}] {percent}% ({elapsed}, eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.set_message(msg.to_string());
    pb
}
