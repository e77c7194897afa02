//! Logs (tracing, text or JSON) and metrics (Prometheus, rendered by `/metrics`).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::{
    EnvFilter,
    filter::filter_fn,
    fmt::{self, format::FmtSpan},
    prelude::*,
};

use crate::config::LogFormat;

/// Installs the global log subscriber on stdout. `RUST_LOG` overrides the default
/// level (info).
pub fn init_logs(format: LogFormat) {
    init_logs_to(format, std::io::stdout);
}

/// Installs the global log subscriber writing to `writer` (tests capture logs with it
/// to prove that no personal data is logged).
///
/// Each store call runs in a debug-level `statement` span (its name, backend and rows);
/// a second layer prints those spans, and only those, when they close, with their time,
/// so `RUST_LOG=info,engram::store=debug` follows a request into its statements. At the
/// default level the spans are never created and cost a disabled-callsite check.
pub fn init_logs_to<W>(format: LogFormat, writer: W)
where
    W: for<'w> fmt::MakeWriter<'w> + Clone + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let registry = tracing_subscriber::registry().with(filter);
    let statements = || filter_fn(|meta| meta.is_span() && meta.target().starts_with("engram::store"));
    // A second init (tests build several apps) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => registry
            .with(fmt::layer().with_target(false).with_writer(writer.clone()))
            .with(fmt::layer().with_span_events(FmtSpan::CLOSE).with_writer(writer).with_filter(statements()))
            .try_init(),
        LogFormat::Json => registry
            .with(fmt::layer().json().flatten_event(true).with_current_span(true).with_writer(writer.clone()))
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_span_events(FmtSpan::CLOSE)
                    .with_writer(writer)
                    .with_filter(statements()),
            )
            .try_init(),
    };
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
