//! Where the process's logs and traces go, set up once at start: log lines on stderr (text or
//! JSON, filtered by `MCPGATE_LOG`), and, in a build with `--features otlp` when an OTLP endpoint
//! is set, the gateway's own spans exported over OTLP.

/// Logs on stderr (text or JSON, filtered by `MCPGATE_LOG`) and, in a build with `--features
/// otlp` when `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` is set, spans exported over OTLP.
pub fn init_logging(json: bool, runtime: &tokio::runtime::Handle, writer: crate::telemetry::logwriter::LogWriter) -> Option<Telemetry> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCPGATE_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer().with_writer(writer).with_ansi(ansi);
    let fmt = if json { fmt.json().boxed() } else { fmt.fmt_fields(crate::telemetry::logfmt::Logfmt).boxed() };
    // `MCPGATE_LOG` filters the log lines only, not what is exported. The OpenTelemetry crates
    // log request URLs (and a collector's answers) at debug: they stay at info and above, so a
    // credential in the collector's URL never reaches the log.
    use tracing_subscriber::filter::FilterExt;
    let quiet_exporter =
        tracing_subscriber::filter::filter_fn(|m| !m.target().starts_with("opentelemetry") || *m.level() <= tracing::Level::INFO);
    let registry = tracing_subscriber::registry().with(fmt.with_filter(filter.and(quiet_exporter)));
    #[cfg(feature = "otlp")]
    {
        match crate::telemetry::otlp::start(runtime.clone()) {
            Ok(Some((export, tracer))) => {
                // Only the gateway's own spans, at info (the request and mcp spans) whatever
                // `MCPGATE_LOG` says: the exporter's HTTP client (h2, hyper) traced and exported
                // would feed itself. Export failures are logged (target `opentelemetry_sdk`).
                let own =
                    tracing_subscriber::filter::filter_fn(|m| m.target().starts_with("mcpgate") && *m.level() <= tracing::Level::INFO);
                registry.with(tracing_opentelemetry::layer().with_tracer(tracer).with_filter(own)).init();
                tracing::info!(endpoint = %export.endpoint(), "exporting traces over OTLP/HTTP");
                return Some(export);
            }
            Ok(None) => {}
            Err(e) => eprintln!("warning: {e}; traces are not exported"),
        }
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = runtime;
        if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() || std::env::var_os("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some() {
            eprintln!(
                "warning: OTEL_EXPORTER_OTLP_*ENDPOINT is set but this mcpgate was built without trace export (cargo build --features otlp)"
            );
        }
    }
    registry.init();
    None
}

#[cfg(feature = "otlp")]
pub type Telemetry = crate::telemetry::otlp::Export;
#[cfg(not(feature = "otlp"))]
pub type Telemetry = std::convert::Infallible;
