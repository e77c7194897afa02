//! Logs (tracing, text or JSON) and metrics (Prometheus, rendered by `/metrics`).

use std::{io::IsTerminal, sync::OnceLock};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::{
    EnvFilter,
    field::MakeExt,
    filter::{LevelFilter, filter_fn},
    fmt::{
        self,
        format::{FmtSpan, debug_fn},
    },
    prelude::*,
};

use crate::config::LogFormat;

/// Installs the global log subscriber on stdout. `RUST_LOG` overrides the default
/// level (info). Text is coloured only on a terminal: in a file, a pipe or a log
/// collector the colour codes are noise (and formatting them cost every request).
pub fn init_logs(format: LogFormat) {
    install(format, std::io::stdout, std::io::stdout().is_terminal());
}

/// Installs the global log subscriber writing to `writer` (tests capture logs with it
/// to prove that no personal data is logged), without colours.
pub fn init_logs_to<W>(format: LogFormat, writer: W)
where
    W: for<'w> fmt::MakeWriter<'w> + Clone + Send + Sync + 'static,
{
    install(format, writer, false);
}

fn install<W>(format: LogFormat, writer: W, ansi: bool)
where
    W: for<'w> fmt::MakeWriter<'w> + Clone + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    // A second init (tests build several apps) keeps the first subscriber.
    let _ = tracing::subscriber::set_global_default(subscriber(format, writer, filter, ansi));
}

/// The log subscriber: events in `format`, filtered by `filter`.
///
/// Each store call runs in a debug-level `statement` span (its name, backend and rows);
/// a second layer prints those spans, and only those, when they close, with their time,
/// so `RUST_LOG=info,engram::store=debug` follows a request into its statements. At the
/// default level the spans are never created and cost a disabled-callsite check.
fn subscriber<W>(
    format: LogFormat,
    writer: W,
    filter: EnvFilter,
    ansi: bool,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> fmt::MakeWriter<'w> + Clone + Send + Sync + 'static,
{
    let statements_on = enables_debug(&filter);
    let registry = tracing_subscriber::registry().with(filter);
    let statements = || filter_fn(|meta| meta.is_span() && meta.target().starts_with("engram::store"));
    match format {
        LogFormat::Text => {
            Box::new(registry.with(fmt::layer().with_target(false).with_ansi(ansi).with_writer(writer.clone())).with(
                statements_on.then(|| {
                    fmt::layer()
                        .with_ansi(ansi)
                        // Its own field formatter type: layers of one type share each span's
                        // formatted text, and the rows, recorded later, would be written twice.
                        .fmt_fields(debug_fn(|w, field, value| write!(w, "{field}={value:?}")).delimited(" "))
                        .with_span_events(FmtSpan::CLOSE)
                        .with_writer(writer)
                        .with_filter(statements())
                }),
            ))
        }
        // JSON layers must keep JSON fields (the span is parsed back when an event is
        // written); JSON fields merge a later record instead of appending it.
        LogFormat::Json => Box::new(
            registry
                .with(fmt::layer().json().flatten_event(true).with_current_span(true).with_writer(writer.clone()))
                .with(statements_on.then(|| {
                    fmt::layer()
                        .json()
                        .flatten_event(true)
                        .with_span_events(FmtSpan::CLOSE)
                        .with_writer(writer)
                        .with_filter(statements())
                })),
        ),
    }
}

/// Whether `filter` can enable a debug span anywhere, so that the statements' layer is
/// worth adding: a layer with a filter of its own makes the registry track, at every
/// entry into and exit from any span (a request's span is entered at each poll), whether
/// that layer wants it — ~3 k instructions a request at the default level, for nothing.
fn enables_debug(filter: &EnvFilter) -> bool {
    filter.max_level_hint().is_none_or(|level| level >= LevelFilter::DEBUG)
}

/// The process-wide metrics recorder. Metrics are global by nature (the `metrics`
/// macros write to one recorder), so every app in a process shares this handle.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let buckets = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("seconds".into()), &buckets)
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder is installed, in which case ours stays empty.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Every job status, so that each gauge is set (to 0 when no job has it).
const JOB_STATUSES: [&str; 6] = ["queued", "running", "succeeded", "failed", "dead", "cancelled"];

/// Sets the `engram_jobs` gauges from counts read when `/metrics` is scraped, so every
/// replica reports the queue as it is rather than as it saw it.
pub fn set_job_gauges(counts: &[(String, i64)]) {
    for status in JOB_STATUSES {
        let n = counts.iter().find(|(s, _)| s == status).map_or(0, |(_, n)| *n);
        // Job counts fit an f64 exactly far beyond any real queue.
        metrics::gauge!("engram_jobs", "status" => status).set(n as f64);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Collects what a subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A store statement's span as `RUST_LOG=info,engram::store=debug` shows it in each
    /// format: one line when it closes, with its name, backend, rows (once) and time; and
    /// an info event inside it still written by the main layer.
    fn logged(format: LogFormat) -> String {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = subscriber(format, move || writer.clone(), EnvFilter::new("info,engram::store=debug"), false);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::debug_span!(target: "engram::store::facts", "statement",
                statement = "list_facts", backend = "sqlite", rows = tracing::field::Empty);
            let _entered = span.enter();
            span.record("rows", 3);
            tracing::info!(target: "engram::store::facts", "inside");
        });
        String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8")
    }

    #[test]
    fn the_statements_layer_is_added_only_where_debug_can_be_on() {
        for (directives, wanted) in [
            ("info,sqlx=warn", false),
            ("warn", false),
            ("info,engram::store=debug", true),
            ("info,engram=trace", true),
            ("debug", true),
        ] {
            assert_eq!(enables_debug(&EnvFilter::new(directives)), wanted, "{directives}");
        }
    }

    #[test]
    fn statement_spans_close_with_their_time_in_both_formats() {
        for format in [LogFormat::Text, LogFormat::Json] {
            let out = logged(format);
            let close: Vec<&str> = out.lines().filter(|l| l.contains("time.busy")).collect();
            assert_eq!(close.len(), 1, "{out}");
            for expected in ["list_facts", "sqlite", "inside"] {
                assert!(out.contains(expected), "{expected} missing: {out}");
            }
            assert_eq!(close[0].matches("rows").count(), 1, "{out}");
        }
        assert!(logged(LogFormat::Json).lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
        // Written where no terminal reads it, the text has no colour codes.
        assert!(!logged(LogFormat::Text).contains('\u{1b}'), "{}", logged(LogFormat::Text));
    }
}
