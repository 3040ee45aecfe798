//! What the libraries log (the runtime reports through `tracing`: a listener that cannot
//! accept, an endpoint that stopped) on stderr, one line per event:
//! `adaptnet: warning: accepting a TCP connection failed; … (error=…)`. Warnings and errors by
//! default; `ADAPTNET_LOG=info|debug|trace` shows more.

use std::fmt::Write as _;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::{Event, Level, Metadata, Subscriber, span};

/// Installs the stderr logger for the whole process (once, at start).
pub fn init() {
    let max = match std::env::var("ADAPTNET_LOG").as_deref() {
        Ok("trace") => Level::TRACE,
        Ok("debug") => Level::DEBUG,
        Ok("info") => Level::INFO,
        Ok("error") => Level::ERROR,
        _ => Level::WARN,
    };
    // Fails only if a logger is already set, which then stays.
    let _ = tracing::subscriber::set_global_default(Stderr { max });
}

/// Events at `max` or more severe, printed as they come; spans are not tracked.
struct Stderr {
    max: Level,
}

impl Subscriber for Stderr {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        // In `tracing`, more verbose levels compare greater.
        *metadata.level() <= self.max
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::from_level(self.max))
    }

    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = Line::default();
        event.record(&mut line);
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        let fields = if line.fields.is_empty() {
            String::new()
        } else {
            format!(" ({})", line.fields.trim_start())
        };
        eprintln!("adaptnet: {level}: {}{fields}", line.message);
    }

    fn enter(&self, _: &span::Id) {}

    fn exit(&self, _: &span::Id) {}
}

/// One event's message and its other fields as `key=value`.
#[derive(Default)]
struct Line {
    message: String,
    fields: String,
}

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }
}
