//! One module per subcommand.

pub mod addr;
pub mod bench;
pub mod bulk;
pub mod daemon;
pub mod daemon_bench;
pub mod daemon_env_bench;
pub mod env_netns_bench;
pub mod events;
pub mod exp;
pub mod link;
pub mod link_bench;
pub mod loopback_bench;
pub mod monitor;
pub mod real;
pub mod sender_link;
pub mod serve;
pub mod sim;
pub mod table2_netns_bench;
pub mod urgent_bench;
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

/// Progress of a long run: a bar on a terminal; elsewhere (CI logs, pipes) one line on stderr
/// per tenth of the run, so that a log shows the run moving without a flood of lines.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    label: String,
    len: u64,
    /// Tenths already reported (plain-line mode).
    tenths: u64,
    start: std::time::Instant,
}

impl Progress {
    /// Progress over `len` steps, labelled `label`.
    pub fn new(len: u64, label: &str) -> Progress {
        use std::io::IsTerminal;
        let bar = std::io::stderr().is_terminal().then(|| {
            let pb = indicatif::ProgressBar::new(len);
            pb.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg} [{bar:40}] {percent}% ({elapsed}, eta {eta})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            pb.set_message(label.to_string());
            pb
        });
        Progress {
            bar,
            label: label.to_string(),
            len: len.max(1),
            tenths: 0,
            start: std::time::Instant::now(),
        }
    }

    /// `pos` of `len` steps are done.
    pub fn set(&mut self, pos: u64) {
        let pos = pos.min(self.len);
        if let Some(bar) = &self.bar {
            bar.set_position(pos);
            return;
        }
        let tenths = pos * 10 / self.len;
        if tenths > self.tenths {
            self.tenths = tenths;
            eprintln!(
                "{}: {} % ({:.1} s)",
                self.label,
                tenths * 10,
                self.start.elapsed().as_secs_f64()
            );
        }
    }

    /// The run ended: the bar is removed (the results follow on stdout).
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
